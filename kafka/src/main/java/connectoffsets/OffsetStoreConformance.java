package connectoffsets;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;
import org.apache.kafka.connect.storage.OffsetBackingStore;
import org.apache.kafka.connect.storage.OffsetStorageReaderImpl;
import org.apache.kafka.connect.storage.OffsetStorageWriter;

/**
 * Kafka Connect's own {@link OffsetStorageWriter} and {@link OffsetStorageReaderImpl} over
 * connect-offsets' Java store ({@code connectoffsets.jni.ConnectOffsetsBackingStore}, on the
 * classpath from scripts/java) and over Connect's {@link MemoryOffsetBackingStore}, driven by one
 * seeded workload: every read must agree. Run by tests/java_store.rs.
 *
 * <pre>
 * conformance URL LOG_DIR SEED ROUNDS   the workload, restarting our store every 100 rounds
 * threads URL LOG_DIR                   concurrent set() from several threads, then the lifecycle
 * configure KEY=VALUE...                configure + start with these properties; prints the error
 * acked URL LOG_DIR                     sets {"n": n} for n = 1, 2, ... round 10 partitions, printing
 *                                       "acked P N" once each set() completed (for a SIGKILL test)
 * read URL LOG_DIR                      prints "read P N" for each of those partitions
 * </pre>
 * Prints {@code ok ...} lines; a mismatch or an unexpected error exits 1 with what differed.
 */
public final class OffsetStoreConformance {
    static final String STORE = "connectoffsets.jni.ConnectOffsetsBackingStore";
    static final List<String> CONNECTORS = List.of("inventory-source", "dbz-ü \"quoted\"", "files");

    private OffsetStoreConformance() {
    }

    public static void main(String[] args) throws Exception {
        ToolLogging.init("WARN");
        switch (args[0]) {
            case "conformance" -> conformance(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]));
            case "threads" -> threads(args[1], args[2]);
            case "configure" -> configure(java.util.Arrays.copyOfRange(args, 1, args.length));
            case "acked" -> acked(args[1], args[2]);
            case "read" -> read(args[1], args[2]);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    /** Connect's in-memory store, with the partitions it holds a live offset for. */
    static final class Reference extends MemoryOffsetBackingStore {
        private final JsonConverter keys = converter(true);

        @Override
        public Set<Map<String, Object>> connectorPartitions(String connector) {
            Set<Map<String, Object>> out = new HashSet<>();
            for (Map.Entry<ByteBuffer, ByteBuffer> e : data.entrySet()) {
                if (e.getValue() == null) {
                    continue;
                }
                List<?> key = (List<?>) keys.toConnectData("", e.getKey().array()).value();
                if (connector.equals(key.get(0)) && key.get(1) instanceof Map<?, ?> p) {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> partition = (Map<String, Object>) p;
                    out.add(partition);
                }
            }
            return out;
        }
    }

    static JsonConverter converter(boolean isKey) {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of("schemas.enable", "false"), isKey);
        return c;
    }

    static WorkerConfig workerConfig(Map<String, String> extra) {
        Map<String, String> props = new HashMap<>();
        props.put("key.converter", JsonConverter.class.getName());
        props.put("value.converter", JsonConverter.class.getName());
        props.put("offset.storage.file.filename", "/nonexistent/unused");
        props.put("bootstrap.servers", "127.0.0.1:9");
        props.putAll(extra);
        return new StandaloneConfig(props);
    }

    static OffsetBackingStore ours(String url, String logDir) throws Exception {
        OffsetBackingStore s = (OffsetBackingStore) Class.forName(STORE).getConstructor().newInstance();
        s.configure(workerConfig(Map.of(
                "offset.storage.connect-offsets.url", url,
                "offset.storage.connect-offsets.log.dir", logDir)));
        s.start();
        return s;
    }

    /** One side of the comparison: a store with Connect's writer and reader for every connector. */
    static final class Side {
        final String name;
        OffsetBackingStore store;
        final Map<String, OffsetStorageWriter> writers = new HashMap<>();
        final Map<String, OffsetStorageReaderImpl> readers = new HashMap<>();

        Side(String name, OffsetBackingStore store) {
            this.name = name;
            attach(store);
        }

        void attach(OffsetBackingStore s) {
            store = s;
            for (String c : CONNECTORS) {
                writers.put(c, new OffsetStorageWriter(s, c, converter(true), converter(false)));
                readers.put(c, new OffsetStorageReaderImpl(s, c, converter(true), converter(false)));
            }
        }

        void flush(String connector) throws Exception {
            OffsetStorageWriter w = writers.get(connector);
            if (!w.beginFlush(10, TimeUnit.SECONDS)) {
                return;
            }
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Future<Void> f = w.doFlush((e, v) -> failed.set(e));
            f.get(30, TimeUnit.SECONDS);
            if (failed.get() != null) {
                throw new IllegalStateException(name + ": flush failed", failed.get());
            }
        }
    }

    static void conformance(String url, String logDir, long seed, int rounds) throws Exception {
        Random rnd = new Random(seed);
        Map<String, List<Map<String, Object>>> pool = new HashMap<>();
        for (String c : CONNECTORS) {
            List<Map<String, Object>> ps = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                ps.add(partition(rnd, i));
            }
            pool.put(c, ps);
        }
        Reference reference = new Reference();
        reference.configure(workerConfig(Map.of()));
        reference.start();
        Side ref = new Side("MemoryOffsetBackingStore", reference);
        Side our = new Side(STORE, ours(url, logDir));
        int written = 0;
        int checks = 0;
        for (int round = 1; round <= rounds; round++) {
            String c = CONNECTORS.get(rnd.nextInt(CONNECTORS.size()));
            List<Map<String, Object>> ps = pool.get(c);
            int n = 1 + rnd.nextInt(20);
            for (int i = 0; i < n; i++) {
                Map<String, Object> p = ps.get(rnd.nextInt(ps.size()));
                Map<String, Object> o = rnd.nextInt(10) == 0 ? null : offset(rnd, round);
                ref.writers.get(c).offset(p, o);
                our.writers.get(c).offset(p, o);
                written++;
            }
            ref.flush(c);
            our.flush(c);
            if (round % 10 == 0 || round == rounds) {
                compare(ref, our, pool, round);
                checks++;
            }
            if (round % 100 == 0) {
                // A new process would do this: stop, then open the same store and log again.
                our.store.stop();
                our.attach(ours(url, logDir));
                compare(ref, our, pool, round);
                checks++;
            }
        }
        our.store.stop();
        reference.stop();
        System.out.println("ok conformance: " + rounds + " flushes, " + written + " offsets written, "
                + checks + " comparisons of every connector's offsets and partitions, "
                + (rounds / 100) + " restarts");
    }

    static void compare(Side ref, Side our, Map<String, List<Map<String, Object>>> pool, int round) throws Exception {
        JsonConverter keyConverter = converter(true);
        for (String c : CONNECTORS) {
            // The raw bytes too: keys as the writer serializes them, values as this JVM wrote them.
            List<ByteBuffer> keys = new ArrayList<>();
            for (Map<String, Object> p : pool.get(c)) {
                keys.add(ByteBuffer.wrap(keyConverter.fromConnectData(c, null, java.util.Arrays.asList(c, p))));
            }
            Map<ByteBuffer, ByteBuffer> rawExpected = ref.store.get(keys).get();
            Map<ByteBuffer, ByteBuffer> rawActual = our.store.get(keys).get();
            for (ByteBuffer k : keys) {
                ByteBuffer e = rawExpected.get(k);
                ByteBuffer a = rawActual.get(k);
                if (e == null ? a != null : !e.equals(a)) {
                    fail("round " + round + ", key " + text(k) + ": get() over " + ref.name + " gives the bytes "
                            + (e == null ? null : text(e)) + ", over " + our.name + " " + (a == null ? null : text(a)));
                }
            }
            Map<Map<String, Object>, Map<String, Object>> expected = ref.readers.get(c).offsets(pool.get(c));
            Map<Map<String, Object>, Map<String, Object>> actual = our.readers.get(c).offsets(pool.get(c));
            for (Map<String, Object> p : pool.get(c)) {
                Object e = expected.get(p);
                Object a = actual.get(p);
                if (e == null ? a != null : !e.equals(a)) {
                    fail("round " + round + ", connector " + c + ", partition " + p + ": Connect's reader over "
                            + ref.name + " gives " + e + ", over " + our.name + " " + a);
                }
                Map<String, Object> single = our.readers.get(c).offset(p);
                if (e == null ? single != null : !e.equals(single)) {
                    fail("round " + round + ", connector " + c + ", partition " + p + ": offset() gives " + single
                            + ", offsets() " + a);
                }
            }
            Set<Map<String, Object>> ep = ref.store.connectorPartitions(c);
            Set<Map<String, Object>> ap = our.store.connectorPartitions(c);
            if (!ep.equals(ap)) {
                fail("round " + round + ", connector " + c + ": connectorPartitions over " + ref.name + " " + ep
                        + ", over " + our.name + " " + ap);
            }
        }
    }

    static String text(ByteBuffer b) {
        return StandardCharsets.UTF_8.decode(b.duplicate()).toString();
    }

    static Map<String, Object> partition(Random rnd, int i) {
        Map<String, Object> p = new LinkedHashMap<>();
        switch (i % 4) {
            case 0 -> p.put("server", "db-" + i);
            case 1 -> {
                p.put("tablé", "örders-" + i);
                p.put("shard", (long) i);
            }
            case 2 -> {
                p.put("filename", "/tmp/f " + i + " \"q\"\n😀");
                p.put("ratio", i == 2 ? 1e23 : i / 7.0);
                p.put("snapshot", rnd.nextBoolean());
            }
            default -> {
                p.put("zone", i);
                p.put("nothing", null);
            }
        }
        return p;
    }

    static Map<String, Object> offset(Random rnd, int round) {
        Map<String, Object> o = new LinkedHashMap<>();
        o.put("lsn", rnd.nextLong());
        o.put("txId", (long) round);
        o.put("ts_usec", System.nanoTime() / 1000);
        if (rnd.nextBoolean()) {
            o.put("snapshot", rnd.nextBoolean());
        }
        if (rnd.nextInt(3) == 0) {
            o.put("transaction_id", null);
        }
        if (rnd.nextInt(4) == 0) {
            o.put("ratio", rnd.nextDouble() * Math.pow(10, rnd.nextInt(40) - 20));
        }
        o.put("file", "pos-" + rnd.nextInt(1000) + "-ü");
        return o;
    }

    /** Several threads flush through their own writers into one store at once; then the lifecycle. */
    static void threads(String url, String logDir) throws Exception {
        OffsetBackingStore store = ours(url, logDir);
        int threads = 4;
        int flushes = 50;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                try {
                    OffsetStorageWriter w = new OffsetStorageWriter(store, "task-" + id, converter(true), converter(false));
                    start.await();
                    for (int f = 1; f <= flushes; f++) {
                        for (int p = 0; p < 10; p++) {
                            w.offset(Map.of("p", (long) p), Map.of("n", (long) f));
                        }
                        w.beginFlush(10, TimeUnit.SECONDS);
                        w.doFlush((e, v) -> {
                            if (e != null) {
                                failed.compareAndSet(null, e);
                            }
                        }).get(30, TimeUnit.SECONDS);
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            });
            ts.add(th);
            th.start();
        }
        start.countDown();
        for (Thread th : ts) {
            th.join();
        }
        if (failed.get() != null) {
            throw new IllegalStateException("a concurrent flush failed", failed.get());
        }
        store.stop();
        store.stop(); // twice: a no-op
        OffsetBackingStore reopened = ours(url, logDir);
        for (int t = 0; t < threads; t++) {
            OffsetStorageReaderImpl r = new OffsetStorageReaderImpl(reopened, "task-" + t, converter(true), converter(false));
            for (int p = 0; p < 10; p++) {
                Map<String, Object> o = r.offset(Map.of("p", (long) p));
                if (o == null || !Long.valueOf(flushes).equals(o.get("n"))) {
                    fail("task-" + t + " partition " + p + ": after " + flushes + " concurrent flushes and a reopen, " + o);
                }
            }
            if (reopened.connectorPartitions("task-" + t).size() != 10) {
                fail("task-" + t + ": " + reopened.connectorPartitions("task-" + t).size() + " partitions, not 10");
            }
        }
        System.out.println("ok threads: " + threads + " threads x " + flushes + " flushes of 10 offsets, all read back after a reopen");
        ByteBuffer key = ByteBuffer.wrap("[\"task-0\",{\"p\":0}]".getBytes(StandardCharsets.UTF_8));
        // A null key fails the set through its callback and its future, not by a throw.
        Map<ByteBuffer, ByteBuffer> withNull = new HashMap<>();
        withNull.put(null, key);
        AtomicReference<Throwable> told = new AtomicReference<>();
        Future<Void> nf = reopened.set(withNull, (e, v) -> told.set(e));
        try {
            nf.get();
            fail("a set with a null key succeeded");
        } catch (ExecutionException e) {
            if (told.get() == null) {
                fail("a set with a null key: the callback was not told");
            }
            System.out.println("ok set of a null key: " + e.getCause().getMessage());
        }
        reopened.stop();
        // After stop: get fails, set fails through its callback and its future, nothing crashes.
        try {
            reopened.get(List.of(key)).get();
            fail("get after stop succeeded");
        } catch (ExecutionException e) {
            System.out.println("ok get after stop: " + e.getCause().getClass().getName() + ": " + e.getCause().getMessage());
        }
        AtomicReference<Throwable> cb = new AtomicReference<>();
        Future<Void> f = reopened.set(Map.of(key, key), (e, v) -> cb.set(e));
        try {
            f.get();
            fail("set after stop succeeded");
        } catch (ExecutionException e) {
            if (cb.get() == null) {
                fail("set after stop: the callback was not told");
            }
            System.out.println("ok set after stop: " + e.getCause().getMessage());
        }
        try {
            reopened.start();
            fail("start after stop succeeded");
        } catch (RuntimeException e) {
            System.out.println("ok start after stop: " + e.getMessage());
        }
    }

    /** configure + start (+ a set of a malformed key) with the given properties: prints the outcome. */
    static void configure(String[] assignments) throws Exception {
        Map<String, String> props = new HashMap<>();
        boolean badKey = false;
        for (String a : assignments) {
            if (a.equals("--bad-key")) {
                badKey = true;
                continue;
            }
            int eq = a.indexOf('=');
            props.put(a.substring(0, eq), a.substring(eq + 1));
        }
        OffsetBackingStore s = (OffsetBackingStore) Class.forName(STORE).getConstructor().newInstance();
        try {
            s.configure(workerConfig(props));
            s.start();
        } catch (RuntimeException e) {
            System.out.println("error: " + e.getClass().getName() + ": " + e.getMessage());
            return;
        }
        if (badKey) {
            ByteBuffer k = ByteBuffer.wrap("{\"not\":\"a key\"}".getBytes(StandardCharsets.UTF_8));
            ByteBuffer v = ByteBuffer.wrap("{\"pos\":1}".getBytes(StandardCharsets.UTF_8));
            try {
                s.set(Map.of(k, v), null).get();
                System.out.println("started; set of a malformed key succeeded");
            } catch (ExecutionException e) {
                System.out.println("error: " + e.getCause().getClass().getName() + ": " + e.getCause().getMessage());
            }
            s.stop();
            return;
        }
        s.stop();
        System.out.println("started");
    }

    static final int ACKED_PARTITIONS = 10;

    static ByteBuffer ackedKey(int p) {
        return ByteBuffer.wrap(("[\"acked\",{\"p\":" + p + "}]").getBytes(StandardCharsets.UTF_8));
    }

    static void acked(String url, String logDir) throws Exception {
        OffsetBackingStore s = ours(url, logDir);
        // Go on from the highest n stored, so no partition moves backwards.
        List<ByteBuffer> keys = new ArrayList<>();
        for (int p = 0; p < ACKED_PARTITIONS; p++) {
            keys.add(ackedKey(p));
        }
        long start = 1;
        for (ByteBuffer v : s.get(keys).get().values()) {
            if (v != null) {
                Map<?, ?> o = (Map<?, ?>) converter(false).toConnectData("", v.array()).value();
                start = Math.max(start, ((Number) o.get("n")).longValue() + 1);
            }
        }
        for (long n = start; ; n++) {
            int p = (int) (n % ACKED_PARTITIONS);
            ByteBuffer v = ByteBuffer.wrap(("{\"n\":" + n + "}").getBytes(StandardCharsets.UTF_8));
            s.set(Map.of(ackedKey(p), v), null).get(60, TimeUnit.SECONDS);
            System.out.println("acked " + p + " " + n);
        }
    }

    static void read(String url, String logDir) throws Exception {
        OffsetBackingStore s = ours(url, logDir);
        List<ByteBuffer> keys = new ArrayList<>();
        for (int p = 0; p < ACKED_PARTITIONS; p++) {
            keys.add(ackedKey(p));
        }
        Map<ByteBuffer, ByteBuffer> got = s.get(keys).get();
        for (int p = 0; p < ACKED_PARTITIONS; p++) {
            ByteBuffer v = got.get(keys.get(p));
            System.out.println("read " + p + " " + (v == null ? "none" : new String(v.array(), StandardCharsets.UTF_8)));
        }
        s.stop();
    }

    static void fail(String why) {
        System.out.println("MISMATCH " + why);
        System.exit(1);
    }
}
