package org.apache.kafka.common.utils;

/**
 * Compatibility shim, test harness only (like kafka/src/.../AppInfoParser.java).
 *
 * Debezium 3.6.1 is built against Kafka 4.3.0; its io.debezium.metrics.Metrics and
 * io.debezium.pipeline.JmxUtils (debezium-connector-common) call
 * org.apache.kafka.common.utils.Sanitizer.jmxSanitize, a class kafka-clients 4.4.0 moved to
 * org.apache.kafka.common.utils.internals. Without this class the engine's task fails to start on
 * Kafka 4.4.0 with NoClassDefFoundError. It is the only Kafka class Debezium's jars reference that
 * 4.4.0 lacks (checked with jdeps --missing-deps over every jar of the classpath; connect-file
 * 4.3.0's AppInfoParser is the other, unused here). Remove it once Debezium is built against 4.4.
 */
public final class Sanitizer {
    private Sanitizer() {}

    public static String sanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.sanitize(name);
    }

    public static String desanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.desanitize(name);
    }

    public static String jmxSanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.jmxSanitize(name);
    }
}
