package connectoffsets.jni;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Properties;

import org.apache.kafka.connect.errors.ConnectException;

/**
 * The crate's native library (java/native): its functions, and loading it once per JVM from a path
 * the configuration names or from inside this jar, refusing a library of another version.
 * Every native method throws {@link ConnectException} with the crate's message on failure.
 */
final class NativeStore {
    static final String LIBRARY = "libconnect_offsets_jni.so";
    private static final String PLATFORM = "linux-x86_64";
    private static final String RESOURCE = "/connectoffsets/jni/native/" + PLATFORM + "/" + LIBRARY;

    private static String loadedFrom;

    private NativeStore() {
    }

    static native String version();

    /** Opens a commit buffer over the store at {@code url}; returns its handle. */
    static native long open(String url, String logDir, byte[][] names, byte[][] values);

    /** The value bytes of each key, null where there is none. */
    static native byte[][] get(long handle, byte[][] keys);

    /** Commits the entries (a null value resets its key) as one batch; returns once durable. */
    static native long set(long handle, byte[][] keys, byte[][] values);

    /** The key bytes of every partition of the connector. */
    static native byte[][] partitions(long handle, String connector);

    static native void close(long handle);

    /**
     * Loads the library: {@code path} when it is given, else the copy inside this jar. A second
     * call is a no-op if it names the same library and an error if it names another.
     */
    static synchronized void load(String path, String property) {
        String from = path != null ? path : "jar:" + RESOURCE;
        if (loadedFrom != null) {
            if (!loadedFrom.equals(from)) {
                throw new ConnectException("connect-offsets' native library is already loaded from " + loadedFrom
                        + "; a JVM loads it once, so " + property + " cannot name " + from);
            }
            return;
        }
        if (path != null) {
            try {
                System.load(Path.of(path).toAbsolutePath().toString());
            } catch (UnsatisfiedLinkError e) {
                throw new ConnectException("cannot load connect-offsets' native library " + path + " (named by "
                        + property + "): " + e.getMessage(), e);
            }
        } else {
            extract(property);
        }
        String expected = jarVersion();
        String actual;
        try {
            actual = version();
        } catch (UnsatisfiedLinkError e) {
            throw new ConnectException("the library loaded from " + from
                    + " is not connect-offsets' native library (no version function): " + e.getMessage(), e);
        }
        if (!expected.equals(actual)) {
            throw new ConnectException("connect-offsets' native library from " + from + " is version " + actual
                    + " but this jar is " + expected + ": use the library built with this jar");
        }
        loadedFrom = from;
    }

    /** Copies the jar's library to a temporary file, loads it and removes the copy. */
    private static void extract(String property) {
        String os = System.getProperty("os.name", "").toLowerCase();
        String arch = System.getProperty("os.arch", "");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new ConnectException("this jar carries connect-offsets' native library for " + PLATFORM
                    + " only, and this JVM runs on " + os + "/" + arch + ": build java/native for it and name "
                    + "the library with " + property);
        }
        try (InputStream in = NativeStore.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new ConnectException("this jar carries no native library (" + RESOURCE + "): build it with "
                        + "scripts/java, or name " + LIBRARY + " with " + property);
            }
            Path dir = Files.createTempDirectory("connect-offsets-jni");
            Path file = dir.resolve(LIBRARY);
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            try {
                System.load(file.toString());
            } catch (UnsatisfiedLinkError e) {
                throw new ConnectException("cannot load the native library this jar carries (copied to " + file
                        + "): " + e.getMessage(), e);
            } finally {
                // Loaded (mapped) or not, the copy is not needed again; a JVM killed later leaves none.
                Files.deleteIfExists(file);
                Files.deleteIfExists(dir);
            }
        } catch (IOException e) {
            throw new ConnectException("cannot copy the native library out of this jar to a temporary file: "
                    + e.getMessage(), e);
        }
    }

    static String jarVersion() {
        try (InputStream in = NativeStore.class.getResourceAsStream("connect-offsets.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
