package connectoffsets.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.storage.FileOffsetBackingStore;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;
import org.apache.kafka.connect.storage.OffsetBackingStore;
import org.apache.kafka.connect.util.Callback;

/**
 * An {@link OffsetBackingStore} that wraps the real one and records in {@link DebeziumRunner}'s
 * output what was committed: {@code offset.storage=connectoffsets.it.RecordingOffsetStore} and
 * {@code recording.delegate=<the real store's class>}, its own properties beside.
 *
 * <p>In {@link #set} it notes how many {@code E} lines the runner had written when the engine called
 * it; when the delegate's callback reports success it appends {@code C <that count>}. The engine
 * calls {@code set} from the task's polling thread in {@code markBatchFinished}, after every record
 * of the batch was written and marked processed, so the offsets it writes cover at least that many
 * events: after a kill, a restart may re-deliver only the events written after the last C line.
 *
 * <p>How Debezium 3.6.1's async engine ({@code AsyncEmbeddedEngine.createAndStartOffsetStore})
 * makes its offset store, read from its source:
 * <ul>
 *   <li>the class names {@code FileOffsetBackingStore}, {@code MemoryOffsetBackingStore} and
 *       {@code KafkaOffsetBackingStore} are matched by name and built by {@code KafkaConnectUtil}
 *       (Kafka 3.5+ gave them constructors with arguments: {@code new FileOffsetBackingStore(
 *       JsonConverter with schemas.enable=false)}); any other class is loaded with the engine's
 *       class loader and made with its public no-argument constructor
 *       ({@code getDeclaredConstructor().newInstance()}). So this wrapper needs one, and builds a
 *       {@code FileOffsetBackingStore} delegate the way the engine would;</li>
 *   <li>then {@code configure(workerConfig)}, then {@code start()} (on a throw, {@code stop()} and
 *       the engine fails); {@code stop()} when the engine stops;</li>
 *   <li>{@code workerConfig} is an {@code EmbeddedWorkerConfig} (a {@code WorkerConfig}) made from
 *       <em>every</em> engine property as a string ({@code Configuration.asMap(ALL_FIELDS)} keeps all
 *       keys and adds the engine's defaults), with {@code bootstrap.servers} defaulted to
 *       {@code localhost:9092} and {@code key.converter}/{@code value.converter} forced to
 *       {@code JsonConverter}. Properties of its own ({@code recording.delegate},
 *       {@code offset.storage.connect-offsets.*}) are not defined in its ConfigDef: read them with
 *       {@code config.originalsStrings()} (WorkerConfig logs them as unknown, harmlessly);</li>
 *   <li>keys and values reach {@code set} as the bytes of a {@code JsonConverter} with
 *       {@code schemas.enable=false}: key {@code ["<name>",{"server":"<topic.prefix>"}]} for the
 *       PostgreSQL connector; {@code get} is asked for the same key bytes;</li>
 *   <li>{@code set} is called from the polling thread via {@code OffsetStorageWriter.doFlush}, which
 *       waits on the returned future at most {@code offset.flush.timeout.ms} (default 5 s; on a time-out
 *       the flush is cancelled and retried later) and then calls the task's {@code commit()} (the
 *       PostgreSQL connector then confirms the LSN to its replication slot).</li>
 * </ul>
 */
public class RecordingOffsetStore implements OffsetBackingStore {
    public static final String DELEGATE_CONFIG = "recording.delegate";

    private OffsetBackingStore delegate;

    public RecordingOffsetStore() {
    }

    @Override
    public void configure(WorkerConfig config) {
        String cls = config.originalsStrings().get(DELEGATE_CONFIG);
        if (cls == null || cls.isBlank()) {
            throw new ConnectException("RecordingOffsetStore needs " + DELEGATE_CONFIG + "=<an OffsetBackingStore class>");
        }
        delegate = instantiate(cls.trim());
        delegate.configure(config);
    }

    static OffsetBackingStore instantiate(String cls) {
        if (cls.equals(FileOffsetBackingStore.class.getName())) {
            JsonConverter keyConverter = new JsonConverter();
            keyConverter.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), true);
            return new FileOffsetBackingStore(keyConverter);
        }
        if (cls.equals(MemoryOffsetBackingStore.class.getName())) {
            // Abstract in Kafka 4.4; the engine makes the same anonymous subclass. Volatile: the
            // tests use it to show that their checks catch a store that forgets (tests/java/debezium.rs).
            return new MemoryOffsetBackingStore() {
                @Override
                public Set<Map<String, Object>> connectorPartitions(String connectorName) {
                    return null;
                }
            };
        }
        try {
            ClassLoader loader = Thread.currentThread().getContextClassLoader();
            if (loader == null) {
                loader = RecordingOffsetStore.class.getClassLoader();
            }
            Class<?> c = Class.forName(cls, true, loader);
            return (OffsetBackingStore) c.getDeclaredConstructor().newInstance();
        }
        catch (ReflectiveOperationException | ClassCastException | LinkageError e) {
            throw new ConnectException("RecordingOffsetStore cannot make " + cls + ": " + e, e);
        }
    }

    private OffsetBackingStore delegate() {
        if (delegate == null) {
            throw new IllegalStateException("RecordingOffsetStore is not configured");
        }
        return delegate;
    }

    @Override
    public void start() {
        delegate().start();
    }

    @Override
    public void stop() {
        if (delegate != null) {
            delegate.stop();
        }
    }

    @Override
    public Future<Map<ByteBuffer, ByteBuffer>> get(Collection<ByteBuffer> keys) {
        return delegate().get(keys);
    }

    @Override
    public Future<Void> set(Map<ByteBuffer, ByteBuffer> values, Callback<Void> callback) {
        final Output out = DebeziumRunner.output();
        final long written = out.events();
        return delegate().set(values, (error, result) -> {
            if (error == null) {
                try {
                    out.line("C " + written);
                }
                catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
            if (callback != null) {
                callback.onCompletion(error, result);
            }
        });
    }

    @Override
    public Set<Map<String, Object>> connectorPartitions(String connectorName) {
        return delegate().connectorPartitions(connectorName);
    }
}
