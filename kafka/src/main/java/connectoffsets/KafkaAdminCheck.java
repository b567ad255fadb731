package connectoffsets;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.common.Node;

import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Collection;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Waits until a Kafka cluster answers an AdminClient: exits 0 as soon as it can list topics
 * (and, with --brokers N, describeCluster shows at least N brokers), 1 when the timeout runs out
 * or the watched process (--pid) has died, 2 on bad usage.
 *
 * usage: KafkaAdminCheck BOOTSTRAP [--timeout-ms MS] [--brokers N] [--pid PID]
 *                        [--command-config FILE] [--property key=value]... [--quiet]
 */
public final class KafkaAdminCheck {
    public static void main(String[] args) throws Exception {
        ToolLogging.init("ERROR");
        if (args.length < 1 || args[0].startsWith("-")) usage();
        String bootstrap = args[0];
        long timeoutMs = 30_000;
        int minBrokers = 0;
        long pid = -1;
        boolean quiet = false;
        Properties props = new Properties();
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--timeout-ms": timeoutMs = Long.parseLong(value(args, ++i)); break;
                case "--brokers": minBrokers = Integer.parseInt(value(args, ++i)); break;
                case "--pid": pid = Long.parseLong(value(args, ++i)); break;
                case "--quiet": quiet = true; break;
                case "--command-config":
                    try (InputStream in = new FileInputStream(value(args, ++i))) { props.load(in); }
                    break;
                case "--property": {
                    String kv = value(args, ++i);
                    int eq = kv.indexOf('=');
                    if (eq <= 0) usage();
                    props.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default: usage();
            }
        }
        props.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        props.putIfAbsent(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "200");
        props.putIfAbsent(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        props.putIfAbsent(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "200");
        props.putIfAbsent(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "1000");

        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        String last = "no attempt made";
        try (Admin admin = Admin.create(props)) {
            while (true) {
                if (pid > 0 && ProcessHandle.of(pid).map(ph -> !ph.isAlive()).orElse(true)) {
                    System.err.println("KafkaAdminCheck: process " + pid + " is gone");
                    System.exit(1);
                }
                long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (leftMs <= 0) break;
                int callMs = (int) Math.max(500, Math.min(5000, leftMs));
                try {
                    Set<String> topics = admin.listTopics(new ListTopicsOptions().listInternal(true).timeoutMs(callMs))
                            .names().get(callMs + 1000L, TimeUnit.MILLISECONDS);
                    Collection<Node> nodes = admin.describeCluster(new DescribeClusterOptions().timeoutMs(callMs))
                            .nodes().get(callMs + 1000L, TimeUnit.MILLISECONDS);
                    if (nodes.size() >= minBrokers) {
                        if (!quiet) {
                            System.out.println("ok: " + bootstrap + " answers: " + nodes.size() + " broker(s), "
                                    + topics.size() + " topic(s)");
                        }
                        System.exit(0);
                    }
                    last = "only " + nodes.size() + " of " + minBrokers + " brokers registered";
                } catch (Exception e) {
                    Throwable c = e.getCause() != null ? e.getCause() : e;
                    last = c.getClass().getSimpleName() + ": " + c.getMessage();
                }
                Thread.sleep(Math.max(0, Math.min(500, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()))));
            }
        }
        System.err.println("KafkaAdminCheck: " + bootstrap + " did not answer within " + timeoutMs + " ms (" + last + ")");
        System.exit(1);
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) usage();
        return args[i];
    }

    private static void usage() {
        System.err.println("usage: KafkaAdminCheck BOOTSTRAP [--timeout-ms MS] [--brokers N] [--pid PID]"
                + " [--command-config FILE] [--property key=value]... [--quiet]");
        System.exit(2);
    }
}
