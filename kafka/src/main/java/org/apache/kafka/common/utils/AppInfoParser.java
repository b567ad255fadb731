package org.apache.kafka.common.utils;

/**
 * Compatibility shim, test infrastructure only.
 *
 * Maven Central serves no connect-file 4.4.0, so the pom uses connect-file 4.3.1. Its
 * FileStreamSourceConnector/FileStreamSinkConnector.version() call
 * org.apache.kafka.common.utils.AppInfoParser.getVersion(), a class that kafka-clients 4.4.0 moved to
 * org.apache.kafka.common.utils.internals. Without this class the 4.4.0 worker lists the plugins but
 * fails every connector create/validate with NoClassDefFoundError (HTTP 500). This is the only
 * reference of connect-file 4.3.1 that 4.4.0 lacks (checked with javap over all its classes).
 * Remove it once connect-file 4.4.0 is used.
 */
public final class AppInfoParser {
    private AppInfoParser() {}

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }

    public static String getCommitId() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getCommitId();
    }
}
