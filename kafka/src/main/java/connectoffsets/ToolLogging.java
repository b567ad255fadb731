package connectoffsets;

import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.appender.ConsoleAppender;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilder;
import org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilderFactory;
import org.apache.logging.log4j.core.config.builder.impl.BuiltConfiguration;

/**
 * Logging for the command-line helpers: to stderr at the given level (env
 * CONNECT_OFFSETS_TOOL_LOG_LEVEL overrides it), so that stdout
 * carries only the helper's own output. Log4j2's built-in default would log ERROR to
 * stdout. A -Dlog4j2.configurationFile given by the caller wins.
 */
final class ToolLogging {
    private ToolLogging() {}

    static void init(String defaultLevel) {
        if (System.getProperty("log4j2.configurationFile") != null
                || System.getProperty("log4j.configurationFile") != null) {
            return;
        }
        String level = System.getenv().getOrDefault("CONNECT_OFFSETS_TOOL_LOG_LEVEL", defaultLevel);
        ConfigurationBuilder<BuiltConfiguration> b = ConfigurationBuilderFactory.newConfigurationBuilder();
        b.setStatusLevel(Level.ERROR);
        b.setConfigurationName("connect-offsets-tools");
        b.add(b.newAppender("stderr", "Console")
                .addAttribute("target", ConsoleAppender.Target.SYSTEM_ERR)
                .add(b.newLayout("PatternLayout").addAttribute("pattern", "[%d{HH:mm:ss,SSS}] %-5p %c{1}: %m%n")));
        b.add(b.newRootLogger(Level.toLevel(level, Level.WARN)).add(b.newAppenderRef("stderr")));
        Configurator.initialize(b.build());
    }
}
