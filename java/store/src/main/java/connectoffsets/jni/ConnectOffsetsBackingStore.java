package connectoffsets.jni;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonDeserializer;
import org.apache.kafka.connect.json.JsonSerializer;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.storage.OffsetBackingStore;
import org.apache.kafka.connect.util.Callback;

/**
 * A Kafka Connect {@link OffsetBackingStore} (Debezium's {@code offset.storage}) backed by
 * connect-offsets: any store URL the crate takes, behind its write-ahead commit buffer.
 *
 * <pre>
 * offset.storage=connectoffsets.jni.ConnectOffsetsBackingStore
 * offset.storage.connect-offsets.url=rocksdb:///var/lib/dbz/offsets
 * offset.storage.connect-offsets.log.dir=/var/lib/dbz/offsets-log
 * </pre>
 *
 * Optional: {@code offset.storage.connect-offsets.native.library} (a path to
 * libconnect_offsets_jni.so instead of the copy inside this jar) and any property of the crate's
 * commit buffer under the same prefix, such as {@code offset.storage.connect-offsets.offsets.durability=store}.
 *
 * <p>{@code get} returns each value as this JVM's {@code JsonConverter} writes it (members in the
 * order written). Each {@code set} is one batch, appended to the log and synced before its callback runs (or
 * applied to the store too, with {@code offsets.durability=store}). Safe for concurrent calls; {@code stop} twice is a no-op; any call after it fails.
 */
public class ConnectOffsetsBackingStore implements OffsetBackingStore {
    public static final String PREFIX = "offset.storage.connect-offsets.";
    public static final String URL = PREFIX + "url";
    private static final String FLUSH_TIMEOUT = "offset.flush.timeout.ms";
    public static final String LOG_DIR = PREFIX + "log.dir";
    public static final String NATIVE_LIBRARY = PREFIX + "native.library";

    private static final AtomicInteger THREADS = new AtomicInteger();

    /** Held shared by every native call, exclusively by start and stop: a handle never outlives them. */
    private final ReadWriteLock lifecycle = new ReentrantReadWriteLock();
    private final JsonConverter keyConverter = new JsonConverter();
    private final JsonDeserializer jsonIn = new JsonDeserializer();
    private final JsonSerializer jsonOut = new JsonSerializer();
    private String url;
    private String logDir;
    private String nativeLibrary;
    private final List<String[]> bufferProperties = new ArrayList<>();
    private ExecutorService executor;
    private long handle;
    private boolean stopped;

    public ConnectOffsetsBackingStore() {
        keyConverter.configure(Map.of("schemas.enable", "false"), true);
    }

    @Override
    public void configure(WorkerConfig config) {
        configure(config.originals());
    }

    /** The same as {@link #configure(WorkerConfig)}, from the worker's properties. */
    public void configure(Map<String, ?> originals) {
        // Nothing of an earlier configure() is kept: each names the whole store.
        bufferProperties.clear();
        url = null;
        logDir = null;
        nativeLibrary = null;
        boolean flushTimeout = false;
        for (Map.Entry<String, ?> e : originals.entrySet()) {
            String name = e.getKey();
            if (!name.startsWith(PREFIX) || e.getValue() == null) {
                continue;
            }
            String value = String.valueOf(e.getValue());
            switch (name) {
                case URL -> url = value;
                case LOG_DIR -> logDir = value;
                case NATIVE_LIBRARY -> nativeLibrary = value;
                default -> {
                    bufferProperties.add(new String[] {name.substring(PREFIX.length()), value});
                    flushTimeout |= name.equals(PREFIX + FLUSH_TIMEOUT);
                }
            }
        }
        // The engine cancels a flush after its own offset.flush.timeout.ms: a set() waits as long.
        Object engineTimeout = originals.get(FLUSH_TIMEOUT);
        if (!flushTimeout && engineTimeout != null) {
            bufferProperties.add(new String[] {FLUSH_TIMEOUT, String.valueOf(engineTimeout)});
        }
        if (url == null || url.isBlank()) {
            throw new ConnectException(URL + " is not set: name the store, e.g. rocksdb:///var/lib/dbz/offsets");
        }
        if (logDir == null || logDir.isBlank()) {
            throw new ConnectException(LOG_DIR + " is not set: name a directory for the write-ahead log");
        }
    }

    @Override
    public void start() {
        lifecycle.writeLock().lock();
        try {
            if (url == null) {
                throw new ConnectException("offset store started before configure()");
            }
            if (stopped) {
                throw new ConnectException("offset store of " + shown(url) + " was stopped; make a new one");
            }
            if (handle != 0) {
                return;
            }
            NativeStore.load(nativeLibrary, NATIVE_LIBRARY);
            byte[][] names = new byte[bufferProperties.size()][];
            byte[][] values = new byte[bufferProperties.size()][];
            for (int i = 0; i < names.length; i++) {
                names[i] = utf8(bufferProperties.get(i)[0]);
                values[i] = utf8(bufferProperties.get(i)[1]);
            }
            handle = NativeStore.open(url, logDir, names, values);
            // One thread: sets commit in the order they were made (the native side serializes
            // them anyway), so an older set never lands after a newer one.
            executor = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "connect-offsets-store-" + THREADS.incrementAndGet());
                t.setDaemon(true);
                return t;
            });
        } finally {
            lifecycle.writeLock().unlock();
        }
    }

    @Override
    public void stop() {
        lifecycle.writeLock().lock();
        try {
            stopped = true;
            if (handle == 0) {
                return;
            }
            long h = handle;
            handle = 0;
            executor.shutdown();
            NativeStore.close(h);
        } finally {
            lifecycle.writeLock().unlock();
        }
    }

    @Override
    public Future<Map<ByteBuffer, ByteBuffer>> get(Collection<ByteBuffer> keys) {
        CompletableFuture<Map<ByteBuffer, ByteBuffer>> result = new CompletableFuture<>();
        try {
            List<ByteBuffer> order = new ArrayList<>(keys);
            byte[][] raw = new byte[order.size()][];
            for (int i = 0; i < raw.length; i++) {
                raw[i] = bytes(order.get(i));
            }
            byte[][] values = withHandle(h -> NativeStore.get(h, raw));
            Map<ByteBuffer, ByteBuffer> map = new HashMap<>();
            for (int i = 0; i < values.length; i++) {
                // The caller's own key objects: it looks the answers up by them.
                map.put(order.get(i), values[i] == null ? null : ByteBuffer.wrap(respelled(values[i])));
            }
            result.complete(map);
        } catch (RuntimeException e) {
            result.completeExceptionally(e);
        }
        return result;
    }

    @Override
    public Future<Void> set(Map<ByteBuffer, ByteBuffer> values, Callback<Void> callback) {
        CompletableFuture<Void> result = new CompletableFuture<>();
        // Bad arguments are refused through the callback as every other failure, not thrown.
        if (values == null) {
            fail(result, callback, new ConnectException("set() of a null map of offsets"));
            return result;
        }
        byte[][] keys = new byte[values.size()][];
        byte[][] vals = new byte[values.size()][];
        int i = 0;
        for (Map.Entry<ByteBuffer, ByteBuffer> e : values.entrySet()) {
            if (e.getKey() == null) {
                fail(result, callback, new ConnectException(
                        "set() of an offset under a null key: every offset needs its partition's key"));
                return result;
            }
            keys[i] = bytes(e.getKey());
            vals[i] = e.getValue() == null ? null : bytes(e.getValue());
            i++;
        }
        Runnable commit = () -> {
            Throwable failure = null;
            try {
                withHandle(h -> NativeStore.set(h, keys, vals));
            } catch (Throwable e) {
                failure = e instanceof RuntimeException ? e : new ConnectException(e.getMessage(), e);
            }
            try {
                if (callback != null) {
                    callback.onCompletion(failure, null);
                }
            } finally {
                // Completed whatever the callback does.
                if (failure == null) {
                    result.complete(null);
                } else {
                    result.completeExceptionally(failure);
                }
            }
        };
        ExecutorService ex = executorOrFail(result, callback);
        if (ex != null) {
            try {
                ex.execute(commit);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                fail(result, callback, stoppedError());
            }
        }
        return result;
    }

    @Override
    public Set<Map<String, Object>> connectorPartitions(String connectorName) {
        byte[][] keys = withHandle(h -> NativeStore.partitions(h, connectorName));
        Set<Map<String, Object>> partitions = new HashSet<>();
        for (byte[] key : keys) {
            Object parsed = keyConverter.toConnectData("", key).value();
            if (parsed instanceof List<?> list && list.size() == 2 && list.get(1) instanceof Map<?, ?> partition) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) partition;
                partitions.add(p);
            }
        }
        return partitions;
    }

    private interface NativeCall<T> {
        T call(long handle);
    }

    private <T> T withHandle(NativeCall<T> call) {
        lifecycle.readLock().lock();
        try {
            if (handle == 0) {
                throw stoppedError();
            }
            return call.call(handle);
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    private ExecutorService executorOrFail(CompletableFuture<Void> result, Callback<Void> callback) {
        lifecycle.readLock().lock();
        try {
            if (handle != 0) {
                return executor;
            }
        } finally {
            lifecycle.readLock().unlock();
        }
        fail(result, callback, stoppedError());
        return null;
    }

    private static void fail(CompletableFuture<Void> result, Callback<Void> callback, ConnectException e) {
        try {
            if (callback != null) {
                callback.onCompletion(e, null);
            }
        } finally {
            // Completed whatever the callback does.
            result.completeExceptionally(e);
        }
    }

    private ConnectException stoppedError() {
        return new ConnectException(stopped
                ? "offset store of " + shown(url) + " is stopped"
                : "offset store of " + shown(url) + " is not started");
    }

    /**
     * The URL as messages show it: the values of secret-looking parameters masked, by the crate's
     * rule (names holding password, secret, token, jaas, oauthbearer.config or key.pem, or ending
     * in .key). Messages reach the engine's logs.
     */
    static String shown(String url) {
        int q = url.indexOf('?');
        if (q < 0) {
            return url;
        }
        StringBuilder out = new StringBuilder(url.substring(0, q + 1));
        String[] params = url.substring(q + 1).split("&", -1);
        for (int i = 0; i < params.length; i++) {
            String p = params[i];
            int eq = p.indexOf('=');
            String name = (eq < 0 ? p : p.substring(0, eq)).toLowerCase(java.util.Locale.ROOT);
            boolean secret = name.contains("password") || name.contains("secret") || name.endsWith(".key")
                    || name.contains("key.pem") || name.contains("token") || name.contains("jaas")
                    || name.contains("oauthbearer.config");
            out.append(i > 0 ? "&" : "").append(secret && eq >= 0 ? p.substring(0, eq + 1) + "****" : p);
        }
        return out.toString();
    }

    /**
     * The value as this JVM's {@code JsonConverter} writes it: the crate keeps member order and
     * spells doubles as JDK 19+ does; Jackson on this JVM spells them as the engine wrote them.
     */
    private byte[] respelled(byte[] value) {
        return jsonOut.serialize("", jsonIn.deserialize("", value));
    }

    private static byte[] bytes(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
}
