package connectoffsets;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.FileOffsetBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.storage.OffsetBackingStore;
import org.apache.kafka.connect.storage.OffsetStorageReaderImpl;
import org.apache.kafka.connect.storage.OffsetStorageWriter;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.SharedTopicAdmin;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Kafka Connect side of the side-by-side benchmark (issue 5, item 3): drives Kafka Connect's own
 * {@link OffsetStorageWriter} and {@link OffsetStorageReaderImpl} over Connect's own
 * {@link KafkaOffsetBackingStore} (built the way ConnectDistributed 4.x builds it: a
 * {@link DistributedConfig}, a {@link SharedTopicAdmin}, client id base from
 * {@link ConnectUtils#clientIdBase}, the internal JsonConverter with schemas.enable=false) and over
 * {@link FileOffsetBackingStore} (as ConnectStandalone builds it).
 *
 * <pre>
 * ConnectOffsetsBench WORKLOAD --store kafka|file [options]
 *   commit  --batch N --duration S --partitions P   offer N offsets, flush, wait for the callback; repeat
 *           [--warmup S]                            (2) seconds of the same, not measured, first (JIT)
 *   load    --offsets N                             write N distinct offsets, then time a fresh store's start()
 *   lookups --offsets N --count C                   load, then C lookups through OffsetStorageReaderImpl.offset()
 *           [--growth-repeat R]                     then R flushes of --flush-size offsets on that store (a
 *                                                   "growth" line with stored=N; no extra warm-up: the
 *                                                   data set was just written and read by the same code)
 *   growth  --stored A,B --flush-size K --repeat R  (file store) one flush of K offsets with A, then B keys stored
 * options:
 *   --bootstrap HOST:PORT   (127.0.0.1:9092)         --topic NAME (a fresh connect-offsets-bench-... per run)
 *   --file PATH             (a fresh file under /tmp, deleted at the end)
 *   --write-batch N         offsets per flush while writing the data set (kafka: 10000; file: all of them in
 *                           one flush, since every flush rewrites the whole file)
 *   --worker k=v            extra worker property (e.g. linger.ms=0: the offsets producer takes the
 *                           worker's top-level properties, as in Connect); repeatable
 *   --keep                  keep the topic / file
 * </pre>
 *
 * Each result is one JSON line on stdout; progress and logs go to stderr.
 */
public final class ConnectOffsetsBench {
    static final String CONNECTOR = "bench-0";

    // ------------------------------------------------------------------------------------------
    // Options
    // ------------------------------------------------------------------------------------------
    static final class Opts {
        String workload;
        String store = "kafka";
        String bootstrap = "127.0.0.1:9092";
        String topic;
        String file;
        long batch = 1;
        double duration = 10;
        double warmup = 2;
        long partitions = 10_000;
        long offsets = 100_000;
        int count = 1_000;
        long writeBatch = 0; // 0: kafka 10,000, file the whole data set
        long[] stored = {1_000, 1_000_000};
        int flushSize = 100;
        int repeat = 5;
        int growthRepeat = 0;
        boolean keep;
        final Map<String, String> worker = new LinkedHashMap<>();
    }

    static void usage(String why) {
        if (why != null) System.err.println("ConnectOffsetsBench: " + why);
        System.err.println("usage: ConnectOffsetsBench commit|load|lookups|growth --store kafka|file"
                + " [--batch N] [--duration S] [--warmup S] [--partitions P] [--offsets N] [--count C]"
                + " [--stored A,B] [--flush-size K] [--repeat R] [--growth-repeat R] [--write-batch N]"
                + " [--bootstrap HOST:PORT] [--topic NAME] [--file PATH] [--worker k=v]... [--keep]");
        System.exit(2);
    }

    static Opts parse(String[] args) {
        Opts o = new Opts();
        if (args.length == 0) usage("no workload");
        o.workload = args[0];
        if (!List.of("commit", "load", "lookups", "growth").contains(o.workload)) usage("unknown workload " + o.workload);
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--keep")) {
                o.keep = true;
                continue;
            }
            if (i + 1 >= args.length) usage(a + " needs a value");
            String v = args[++i];
            try {
                switch (a) {
                    case "--store": o.store = v; break;
                    case "--bootstrap": o.bootstrap = v; break;
                    case "--topic": o.topic = v; break;
                    case "--file": o.file = v; break;
                    case "--batch": o.batch = Long.parseLong(v); break;
                    case "--duration": o.duration = Double.parseDouble(v); break;
                    case "--warmup": o.warmup = Double.parseDouble(v); break;
                    case "--partitions": o.partitions = Long.parseLong(v); break;
                    case "--offsets": o.offsets = Long.parseLong(v); break;
                    case "--count": o.count = Integer.parseInt(v); break;
                    case "--write-batch": o.writeBatch = Long.parseLong(v); break;
                    case "--stored": o.stored = Arrays.stream(v.split(",")).mapToLong(Long::parseLong).toArray(); break;
                    case "--flush-size": o.flushSize = Integer.parseInt(v); break;
                    case "--repeat": o.repeat = Integer.parseInt(v); break;
                    case "--growth-repeat": o.growthRepeat = Integer.parseInt(v); break;
                    case "--worker": {
                        int eq = v.indexOf('=');
                        if (eq <= 0) usage("--worker wants k=v");
                        o.worker.put(v.substring(0, eq), v.substring(eq + 1));
                        break;
                    }
                    default: usage("unknown option " + a);
                }
            } catch (NumberFormatException e) {
                usage("bad number for " + a + ": " + v);
            }
        }
        if (!o.store.equals("kafka") && !o.store.equals("file")) usage("--store must be kafka or file");
        if (o.batch < 1 || o.partitions < 1 || o.offsets < 1 || o.count < 1 || o.writeBatch < 0 || o.flushSize < 1
                || o.repeat < 1 || o.growthRepeat < 0) usage("counts must be at least 1");
        if (o.workload.equals("growth") && !o.store.equals("file")) usage("growth is a file-store workload");
        String stamp = Long.toString(System.currentTimeMillis(), 36) + "-" + ProcessHandle.current().pid();
        if (o.topic == null) o.topic = "connect-offsets-bench-" + o.workload + "-" + stamp;
        if (o.file == null) o.file = "/tmp/connect-offsets-bench-" + o.workload + "-" + stamp + ".offsets";
        return o;
    }

    // ------------------------------------------------------------------------------------------
    // Building Connect's stores the way the Connect CLIs do
    // ------------------------------------------------------------------------------------------

    /** Worker#internalKeyConverter / internalValueConverter: JsonConverter, schemas.enable=false. */
    static Converter internalConverter(boolean isKey) {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), isKey);
        return c;
    }

    /** A Connect store plus what it needs to be closed. */
    static final class Store implements AutoCloseable {
        final OffsetBackingStore backing;
        final SharedTopicAdmin sharedAdmin; // null for the file store
        final Converter keyConverter = internalConverter(true);
        final Converter valueConverter = internalConverter(false);

        Store(OffsetBackingStore backing, SharedTopicAdmin sharedAdmin) {
            this.backing = backing;
            this.sharedAdmin = sharedAdmin;
        }

        OffsetStorageWriter writer() {
            return new OffsetStorageWriter(backing, CONNECTOR, keyConverter, valueConverter);
        }

        OffsetStorageReaderImpl reader() {
            return new OffsetStorageReaderImpl(backing, CONNECTOR, keyConverter, valueConverter);
        }

        @Override
        public void close() {
            backing.stop();
            if (sharedAdmin != null) sharedAdmin.close();
        }
    }

    static Map<String, String> workerProps(Opts o) {
        Map<String, String> p = new HashMap<>();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(WorkerConfig.KEY_CONVERTER_CLASS_CONFIG, JsonConverter.class.getName());
        p.put(WorkerConfig.VALUE_CONVERTER_CLASS_CONFIG, JsonConverter.class.getName());
        p.put("key.converter.schemas.enable", "false");
        p.put("value.converter.schemas.enable", "false");
        if (o.store.equals("kafka")) {
            p.put(DistributedConfig.GROUP_ID_CONFIG, "connect-offsets-bench");
            p.put(DistributedConfig.OFFSET_STORAGE_TOPIC_CONFIG, o.topic);
            p.put(DistributedConfig.OFFSET_STORAGE_PARTITIONS_CONFIG, "25");
            p.put(DistributedConfig.OFFSET_STORAGE_REPLICATION_FACTOR_CONFIG, "1");
            p.put(DistributedConfig.CONFIG_TOPIC_CONFIG, o.topic + "-configs");
            p.put(DistributedConfig.CONFIG_STORAGE_REPLICATION_FACTOR_CONFIG, "1");
            p.put(DistributedConfig.STATUS_STORAGE_TOPIC_CONFIG, o.topic + "-status");
            p.put(DistributedConfig.STATUS_STORAGE_REPLICATION_FACTOR_CONFIG, "1");
        } else {
            p.put(StandaloneConfig.OFFSET_STORAGE_FILE_FILENAME_CONFIG, o.file);
        }
        p.putAll(o.worker);
        return p;
    }

    /**
     * As ConnectDistributed#startConnect (4.x): DistributedConfig, a SharedTopicAdmin over the worker
     * properties with client id "<base>shared-admin", KafkaOffsetBackingStore(sharedAdmin, () ->
     * clientIdBase, internal key converter), configure(config); start() is left to the caller.
     * ConnectStandalone: FileOffsetBackingStore(internal key converter), configure(StandaloneConfig).
     */
    static Store newStore(Opts o) {
        if (o.store.equals("kafka")) {
            DistributedConfig config = new DistributedConfig(workerProps(o));
            String kafkaClusterId = config.kafkaClusterId();
            String clientIdBase = ConnectUtils.clientIdBase(config);
            Map<String, Object> adminProps = new HashMap<>(config.originals());
            ConnectUtils.addMetricsContextProperties(adminProps, config, kafkaClusterId);
            adminProps.put(CommonClientConfigs.CLIENT_ID_CONFIG, clientIdBase + "shared-admin");
            SharedTopicAdmin sharedAdmin = new SharedTopicAdmin(adminProps);
            KafkaOffsetBackingStore backing = new KafkaOffsetBackingStore(sharedAdmin, () -> clientIdBase,
                    internalConverter(true));
            backing.configure(config);
            return new Store(backing, sharedAdmin);
        } else {
            StandaloneConfig config = new StandaloneConfig(workerProps(o));
            FileOffsetBackingStore backing = new FileOffsetBackingStore(internalConverter(true));
            backing.configure(config);
            return new Store(backing, null);
        }
    }

    /** The settings in effect in the offsets producer of a started KafkaOffsetBackingStore. */
    static Map<String, Object> producerSettings(Store s) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (!(s.backing instanceof KafkaOffsetBackingStore)) return out;
        try {
            Field logField = KafkaOffsetBackingStore.class.getDeclaredField("offsetLog");
            logField.setAccessible(true);
            Object log = logField.get(s.backing);
            Field prodField = log.getClass().getDeclaredField("producer");
            prodField.setAccessible(true);
            Object producer = ((Optional<?>) prodField.get(log)).orElseThrow();
            Field cfgField = producer.getClass().getDeclaredField("producerConfig");
            cfgField.setAccessible(true);
            ProducerConfig cfg = (ProducerConfig) cfgField.get(producer);
            for (String k : List.of(ProducerConfig.ACKS_CONFIG, ProducerConfig.LINGER_MS_CONFIG,
                    ProducerConfig.BATCH_SIZE_CONFIG, ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, ProducerConfig.COMPRESSION_TYPE_CONFIG,
                    ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, CommonClientConfigs.CLIENT_ID_CONFIG)) {
                Object v = cfg.values().get(k);
                if (k.equals(ProducerConfig.ACKS_CONFIG) && "-1".equals(String.valueOf(v))) v = "all";
                out.put(k, v instanceof Number || v instanceof Boolean ? v : String.valueOf(v));
            }
            out.put("source", "the store's own KafkaProducer");
        } catch (ReflectiveOperationException | RuntimeException e) {
            out.put("error", "could not read the producer's config: " + e);
        }
        return out;
    }

    // ------------------------------------------------------------------------------------------
    // Writing through OffsetStorageWriter as WorkerSourceTask does
    // ------------------------------------------------------------------------------------------

    static Map<String, Object> partition(long i) {
        return Collections.singletonMap("partition", i);
    }

    static Map<String, Object> position(long i) {
        return Collections.singletonMap("position", i);
    }

    /**
     * beginFlush, doFlush(callback), wait for the callback (as the source task's commit does; on an
     * error or a timeout: cancelFlush and throw). Returns false when there was nothing to flush.
     */
    static boolean flush(OffsetStorageWriter writer, long timeoutMs) throws Exception {
        if (!writer.beginFlush(timeoutMs, TimeUnit.MILLISECONDS)) return false;
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> error = new AtomicReference<>();
        Future<Void> f = writer.doFlush((err, ignored) -> {
            error.set(err);
            done.countDown();
        });
        if (f == null) {
            writer.cancelFlush();
            throw new IllegalStateException("doFlush returned null (serialization failed)");
        }
        if (!done.await(timeoutMs, TimeUnit.MILLISECONDS)) {
            writer.cancelFlush();
            throw new IllegalStateException("flush timed out after " + timeoutMs + " ms");
        }
        if (error.get() != null) {
            writer.cancelFlush();
            throw new IllegalStateException("flush failed", error.get());
        }
        return true;
    }

    static final long FLUSH_TIMEOUT_MS = 600_000; // data-set writes on a loaded 2-core machine

    /** Writes offsets 0..n-1 (partition i, position i), `batch` per flush. */
    static void writeDistinct(Store s, long n, long batch, String what) throws Exception {
        if (batch == 0) batch = s.sharedAdmin != null ? 10_000 : n;
        OffsetStorageWriter w = s.writer();
        long t0 = System.nanoTime(), lastReport = t0;
        for (long i = 0; i < n; ) {
            long end = Math.min(n, i + batch);
            for (; i < end; i++) w.offset(partition(i), position(i));
            flush(w, FLUSH_TIMEOUT_MS);
            long now = System.nanoTime();
            if (now - lastReport > 5_000_000_000L) {
                progress(String.format(Locale.ROOT, "%s: %d of %d offsets written (%.1f s)", what, i, n, (now - t0) / 1e9));
                lastReport = now;
            }
        }
        progress(String.format(Locale.ROOT, "%s: %d offsets written in %.1f s", what, n, (System.nanoTime() - t0) / 1e9));
    }

    // ------------------------------------------------------------------------------------------
    // Workloads
    // ------------------------------------------------------------------------------------------

    static void commit(Opts o) throws Exception {
        try (Store s = newStore(o)) {
            s.backing.start();
            Map<String, Object> producer = producerSettings(s);
            OffsetStorageWriter w = s.writer();
            List<Map<String, Object>> parts = new ArrayList<>((int) Math.min(o.partitions, 10_000_000));
            for (long p = 0; p < o.partitions; p++) parts.add(partition(p));
            long i = 0;
            long warmupNs = (long) (o.warmup * 1e9);
            long warm = System.nanoTime();
            while (System.nanoTime() - warm < warmupNs) {
                for (long j = 0; j < o.batch; j++, i++) w.offset(parts.get((int) (i % o.partitions)), position(i));
                flush(w, FLUSH_TIMEOUT_MS);
            }
            long[] lat = new long[1 << 16];
            int commits = 0;
            long offsets = 0;
            long durationNs = (long) (o.duration * 1e9);
            long started = System.nanoTime();
            while (System.nanoTime() - started < durationNs) {
                for (long j = 0; j < o.batch; j++, i++) w.offset(parts.get((int) (i % o.partitions)), position(i));
                long t0 = System.nanoTime();
                flush(w, FLUSH_TIMEOUT_MS);
                long dt = System.nanoTime() - t0;
                if (commits == lat.length) lat = Arrays.copyOf(lat, lat.length * 2);
                lat[commits++] = dt;
                offsets += o.batch;
            }
            double secs = (System.nanoTime() - started) / 1e9;
            long[] sorted = Arrays.copyOf(lat, commits);
            Arrays.sort(sorted);
            Json j = base(o).put("batch", o.batch).put("partitions", o.partitions)
                    .put("offsets", offsets).put("commits", commits).put("seconds", secs)
                    .put("warmup_seconds", o.warmup)
                    .put("offsets_per_sec", offsets / secs).put("commits_per_sec", commits / secs)
                    .put("p50_ms", pct(sorted, 0.50)).put("p99_ms", pct(sorted, 0.99))
                    .put("max_ms", commits == 0 ? 0 : sorted[commits - 1] / 1e6);
            if (!producer.isEmpty()) j.putObj("producer", producer);
            emit(j);
        } finally {
            cleanup(o);
        }
    }

    /** load and lookups: write the data set, then time a fresh instance's start(); lookups go on from there. */
    static void load(Opts o, boolean lookups) throws Exception {
        try {
            Map<String, Object> producer;
            long writeNs;
            try (Store s = newStore(o)) {
                s.backing.start();
                producer = producerSettings(s);
                long t0 = System.nanoTime();
                writeDistinct(s, o.offsets, o.writeBatch, "load");
                writeNs = System.nanoTime() - t0;
            }
            System.gc();
            // A restarted worker: a new store instance; configure() as the CLI does, then the timed start().
            long c0 = System.nanoTime();
            Store fresh = newStore(o);
            long configureNs = System.nanoTime() - c0;
            long s0 = System.nanoTime();
            fresh.backing.start();
            long startNs = System.nanoTime() - s0;
            try {
                OffsetStorageReaderImpl reader = fresh.reader();
                // One check that the data is all there: the last offset written.
                Map<String, Object> last = reader.offset(partition(o.offsets - 1));
                if (last == null || ((Number) last.get("position")).longValue() != o.offsets - 1) {
                    throw new IllegalStateException("after start(), partition " + (o.offsets - 1) + " has " + last);
                }
                long wb = o.writeBatch != 0 ? o.writeBatch : o.store.equals("kafka") ? 10_000 : o.offsets;
                Json j = base(o, "load").put("offsets", o.offsets).put("write_batch", wb)
                        .put("write_seconds", writeNs / 1e9)
                        .put("configure_ms", configureNs / 1e6)
                        .put("start_ms", startNs / 1e6)
                        .put("seconds", startNs / 1e9)
                        .put("offsets_per_sec", o.offsets / (startNs / 1e9));
                if (o.store.equals("file")) j.put("file_bytes", new File(o.file).length());
                if (!producer.isEmpty()) j.putObj("producer", producer);
                emit(j.put("heap_peak_mb", heapPeakMb()));

                if (lookups) {
                    Random rnd = new Random(42);
                    long[] lat = new long[o.count];
                    long started = System.nanoTime();
                    for (int k = 0; k < o.count; k++) {
                        long p = Math.floorMod(rnd.nextLong(), o.offsets);
                        long t0 = System.nanoTime();
                        Map<String, Object> got = reader.offset(partition(p));
                        lat[k] = System.nanoTime() - t0;
                        if (got == null || ((Number) got.get("position")).longValue() != p) {
                            throw new IllegalStateException("lookup of partition " + p + " gave " + got);
                        }
                    }
                    double secs = (System.nanoTime() - started) / 1e9;
                    Arrays.sort(lat);
                    emit(base(o, "lookups").put("offsets", o.offsets).put("count", o.count).put("seconds", secs)
                            .put("lookups_per_sec", o.count / secs)
                            .put("p50_ms", pct(lat, 0.50)).put("p99_ms", pct(lat, 0.99))
                            .put("via", "OffsetStorageReaderImpl.offset"));
                }
                if (o.growthRepeat > 0) {
                    OffsetStorageWriter w = fresh.writer();
                    long[] next = {0};
                    long[] lat = new long[o.growthRepeat];
                    for (int r = 0; r < o.growthRepeat; r++) lat[r] = growthFlush(w, o, o.offsets, next);
                    Arrays.sort(lat);
                    Json g = base(o, "growth").put("stored", o.offsets).put("flush_size", o.flushSize)
                            .put("repeat", o.growthRepeat).put("warmup_flushes", 0)
                            .put("flush_p50_ms", pct(lat, 0.50)).put("flush_min_ms", lat[0] / 1e6)
                            .put("flush_max_ms", lat[lat.length - 1] / 1e6);
                    if (o.store.equals("file")) g.put("file_bytes", new File(o.file).length());
                    emit(g.put("heap_peak_mb", heapPeakMb()));
                }
            } finally {
                fresh.close();
            }
        } finally {
            cleanup(o);
        }
    }

    /** File store: the time of one flush of `flushSize` offsets with A, then B keys already stored. */
    static void growth(Opts o) throws Exception {
        try {
            for (long stored : o.stored) {
                Files.deleteIfExists(Path.of(o.file));
                try (Store s = newStore(o)) {
                    s.backing.start();
                    writeDistinct(s, stored, o.writeBatch, "growth " + stored);
                    OffsetStorageWriter w = s.writer();
                    long[] next = {0};
                    // Warm-up (JIT): unmeasured flushes until one ends after 2 s, at least one.
                    int warmups = 0;
                    for (long w0 = System.nanoTime(); warmups == 0 || System.nanoTime() - w0 < 2_000_000_000L; warmups++) {
                        growthFlush(w, o, stored, next);
                    }
                    long[] lat = new long[o.repeat];
                    for (int r = 0; r < o.repeat; r++) lat[r] = growthFlush(w, o, stored, next);
                    Arrays.sort(lat);
                    emit(base(o).put("stored", stored).put("flush_size", o.flushSize).put("repeat", o.repeat)
                            .put("warmup_flushes", warmups)
                            .put("flush_p50_ms", pct(lat, 0.50)).put("flush_min_ms", lat[0] / 1e6)
                            .put("flush_max_ms", lat[lat.length - 1] / 1e6)
                            .put("file_bytes", new File(o.file).length())
                            .put("heap_peak_mb", heapPeakMb()));
                }
                System.gc();
            }
        } finally {
            cleanup(o);
        }
    }

    /** One flush of `flushSize` updates of keys already stored (the map does not grow); its time in ns. */
    static long growthFlush(OffsetStorageWriter w, Opts o, long stored, long[] next) throws Exception {
        for (int k = 0; k < o.flushSize; k++, next[0]++) w.offset(partition(next[0] % stored), position(stored + next[0]));
        long t0 = System.nanoTime();
        flush(w, FLUSH_TIMEOUT_MS);
        return System.nanoTime() - t0;
    }

    // ------------------------------------------------------------------------------------------
    // Plumbing
    // ------------------------------------------------------------------------------------------

    static void cleanup(Opts o) {
        if (o.keep) return;
        if (o.store.equals("file")) {
            try {
                Files.deleteIfExists(Path.of(o.file));
            } catch (Exception e) {
                progress("could not delete " + o.file + ": " + e);
            }
            return;
        }
        try (Admin admin = Admin.create(Map.of(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap))) {
            admin.deleteTopics(List.of(o.topic)).all().get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            progress("could not delete topic " + o.topic + ": " + e);
        }
    }

    static double pct(long[] sortedNs, double p) {
        if (sortedNs.length == 0) return 0;
        int idx = Math.min((int) (sortedNs.length * p), sortedNs.length - 1);
        return sortedNs[idx] / 1e6;
    }

    static long heapPeakMb() {
        long peak = 0;
        for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
            if (pool.getType() == MemoryType.HEAP && pool.getPeakUsage() != null) peak += pool.getPeakUsage().getUsed();
        }
        return peak >> 20;
    }

    static Json base(Opts o) {
        return base(o, o.workload);
    }

    static Json base(Opts o, String workload) {
        Json j = new Json().put("side", "connect").put("store", o.store).put("workload", workload)
                .put("connect_version", org.apache.kafka.common.utils.internals.AppInfoParser.getVersion())
                .put("java", System.getProperty("java.version"))
                .put("heap_max_mb", Runtime.getRuntime().maxMemory() >> 20);
        if (o.store.equals("kafka")) j.put("topic", o.topic).put("topic_partitions", 25).put("replication", 1);
        else j.put("file", o.file);
        if (!o.worker.isEmpty()) j.putObj("worker_overrides", new LinkedHashMap<>(o.worker));
        return j;
    }

    static void emit(Json j) {
        System.out.println(j);
        System.out.flush();
    }

    static void progress(String msg) {
        System.err.println("connect-bench: " + msg);
    }

    /** A flat JSON object writer (strings, numbers, booleans, one level of nested objects). */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");

        private void key(String k) {
            if (sb.length() > 1) sb.append(',');
            str(sb, k);
            sb.append(':');
        }

        Json put(String k, Object v) {
            key(k);
            value(sb, v);
            return this;
        }

        Json putObj(String k, Map<String, ?> m) {
            key(k);
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, ?> e : m.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                str(sb, e.getKey());
                sb.append(':');
                value(sb, e.getValue());
            }
            sb.append('}');
            return this;
        }

        static void value(StringBuilder sb, Object v) {
            if (v == null) sb.append("null");
            else if (v instanceof Double || v instanceof Float) {
                double d = ((Number) v).doubleValue();
                sb.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%.3f", d) : "null");
            } else if (v instanceof Number || v instanceof Boolean) sb.append(v);
            else str(sb, String.valueOf(v));
        }

        static void str(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') sb.append('\\').append(c);
                else if (c < 0x20) sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                else sb.append(c);
            }
            sb.append('"');
        }

        @Override
        public String toString() {
            return sb + "}";
        }
    }

    public static void main(String[] args) throws Exception {
        ToolLogging.init("WARN");
        Opts o = parse(args);
        try {
            switch (o.workload) {
                case "commit": commit(o); break;
                case "load": load(o, false); break;
                case "lookups": load(o, true); break;
                case "growth": growth(o); break;
                default: usage("unknown workload");
            }
        } catch (Throwable t) {
            progress("failed: " + t);
            t.printStackTrace();
            System.exit(1);
        }
        progress(String.format(Locale.ROOT, "%s done; JVM up %.1f s", o.workload,
                ManagementFactory.getRuntimeMXBean().getUptime() / 1e3));
        // Kafka clients leave non-daemon threads behind only until closed; exit explicitly anyway.
        System.exit(0);
    }
}
