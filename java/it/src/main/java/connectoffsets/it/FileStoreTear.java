package connectoffsets.it;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.storage.FileOffsetBackingStore;

/**
 * Kafka's {@code FileOffsetBackingStore} killed while it rewrites its file (tests/java/debezium.rs).
 * Its {@code save()} writes the whole map through an {@code ObjectOutputStream} over
 * {@code Files.newOutputStream(file)}: the file is truncated and rewritten in place, with no temp
 * file, no rename and no fsync; its {@code load()} reads an {@code EOFException} as "no offsets".
 *
 * <pre>
 *   FileStoreTear fill FILE N     one set() of N offsets (one save): prints "FILLED N BYTES"
 *   FileStoreTear rewrite FILE    loads FILE ("LOADED N"), then sets one offset again and again,
 *                                 each a save of the whole map ("SAVE i MS" after each), until killed
 *   FileStoreTear read FILE       a fresh store's start(): "READ N" offsets, or "ERROR class: message"
 * </pre>
 * Keys and values are the JSON a Connect source task's offsets would be
 * ({@code ["tear-connector",{"table":"t0000123"}]}, {@code {"lsn":...,"txId":...}}).
 */
public final class FileStoreTear {
    private FileStoreTear() {
    }

    /** Exposes the map's size ({@code data} is MemoryOffsetBackingStore's protected field). */
    static final class Counting extends FileOffsetBackingStore {
        Counting() {
            super(keyConverter());
        }

        int size() {
            return data.size();
        }
    }

    static JsonConverter keyConverter() {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), true);
        return c;
    }

    static Counting open(String file) {
        Map<String, String> props = new HashMap<>();
        props.put(StandaloneConfig.OFFSET_STORAGE_FILE_FILENAME_CONFIG, file);
        props.put(WorkerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.put(WorkerConfig.KEY_CONVERTER_CLASS_CONFIG, JsonConverter.class.getName());
        props.put(WorkerConfig.VALUE_CONVERTER_CLASS_CONFIG, JsonConverter.class.getName());
        Counting store = new Counting();
        store.configure(new StandaloneConfig(props));
        store.start();
        return store;
    }

    static ByteBuffer key(int i) {
        return utf8(String.format("[\"tear-connector\",{\"table\":\"t%07d\"}]", i));
    }

    static ByteBuffer value(long lsn) {
        return utf8("{\"lsn\":" + lsn + ",\"txId\":" + (lsn / 7) + "}");
    }

    static ByteBuffer utf8(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: FileStoreTear fill FILE N | rewrite FILE | read FILE");
            System.exit(2);
        }
        String file = args[1];
        switch (args[0]) {
            case "fill" -> {
                int n = Integer.parseInt(args[2]);
                Counting store = open(file);
                Map<ByteBuffer, ByteBuffer> values = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    values.put(key(i), value(1_000_000_000L + i));
                }
                store.set(values, null).get(10, TimeUnit.MINUTES);
                int size = store.size();
                store.stop();
                System.out.println("FILLED " + size + " " + new java.io.File(file).length());
            }
            case "rewrite" -> {
                Counting store = open(file);
                System.out.println("LOADED " + store.size());
                System.out.flush();
                for (long i = 1;; i++) {
                    long t0 = System.nanoTime();
                    store.set(Map.of(key(0), value(2_000_000_000L + i)), null).get(10, TimeUnit.MINUTES);
                    System.out.println("SAVE " + i + " " + (System.nanoTime() - t0) / 1_000_000);
                    System.out.flush();
                }
            }
            case "read" -> {
                try {
                    Counting store = open(file);
                    System.out.println("READ " + store.size());
                    store.stop();
                }
                catch (Exception e) {
                    Throwable root = e;
                    while (root.getCause() != null && root.getCause() != root) {
                        root = root.getCause();
                    }
                    System.out.println("ERROR " + e.getClass().getName() + ": " + e.getMessage()
                            + (root != e ? " (cause " + root.getClass().getName() + ": " + root.getMessage() + ")" : ""));
                }
            }
            default -> {
                System.err.println("unknown command " + args[0]);
                System.exit(2);
            }
        }
    }
}
