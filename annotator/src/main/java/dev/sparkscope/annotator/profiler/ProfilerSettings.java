package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.ConfigKeys;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * The {@code spark.sparkscope.profiler.*} settings of the profiler plugin
 * (docs/profiling.md lists them). Where to write (URL, database,
 * credentials) is shared with the annotator.
 */
public final class ProfilerSettings {

    static final String P = ConfigKeys.PREFIX + "profiler.";
    static final String CONTINUOUS = P + "continuous";
    static final String CONTINUOUS_WINDOW_S = P + "continuous.windowSeconds";
    static final String CONTINUOUS_INTERVAL_MS = P + "continuous.intervalMs";
    static final String INTERVAL_MS = P + "intervalMs";
    static final String ALLOC_INTERVAL_BYTES = P + "allocIntervalBytes";
    static final String DUMP_S = P + "dumpSeconds";
    static final String CONTROL = P + "control";
    static final String CONTROL_HOST = P + "control.host";
    static final String CONTROL_PORT = P + "control.port";
    static final String CONTROL_DIR = P + "control.dir";
    static final String MAX_SECONDS = P + "maxSeconds";
    static final String POLL_SECONDS = P + "pollSeconds";
    static final String STAGE_PROFILES = P + "stageProfiles";

    public static final List<String> KEYS = Arrays.asList(CONTINUOUS, CONTINUOUS_WINDOW_S, CONTINUOUS_INTERVAL_MS,
            INTERVAL_MS, ALLOC_INTERVAL_BYTES, DUMP_S, CONTROL, CONTROL_HOST, CONTROL_PORT, CONTROL_DIR, MAX_SECONDS,
            STAGE_PROFILES, POLL_SECONDS);

    static final List<String> MODES = Arrays.asList("cpu", "wall", "alloc", "lock");

    /** "off" or a mode: profile every executor all the time at a low rate. */
    final String continuous;
    final int continuousWindowS;
    final int continuousIntervalMs;
    final int intervalMs;
    final long allocIntervalBytes;
    final int dumpS;
    final boolean control;
    final String controlHost;
    final int controlPort;
    final String controlDir;
    final int maxSeconds;
    final int stageProfiles;
    /** How often each executor asks the driver for work: the delay before a requested profile starts. */
    final int pollSeconds;

    private ProfilerSettings(Function<String, String> conf) {
        StringBuilder problems = new StringBuilder();
        String c = text(conf, CONTINUOUS, "off").toLowerCase(Locale.ROOT);
        if (!c.equals("off") && !MODES.contains(c)) {
            problems.append(CONTINUOUS).append('=').append(c).append(" is not off, cpu, wall, alloc or lock; ");
            c = "off";
        }
        continuous = c;
        continuousWindowS = (int) number(conf, CONTINUOUS_WINDOW_S, 60, 5, 3600, problems);
        continuousIntervalMs = (int) number(conf, CONTINUOUS_INTERVAL_MS, 100, 1, 10_000, problems);
        intervalMs = (int) number(conf, INTERVAL_MS, 10, 1, 10_000, problems);
        allocIntervalBytes = number(conf, ALLOC_INTERVAL_BYTES, 512 * 1024, 1, 1L << 40, problems);
        dumpS = (int) number(conf, DUMP_S, 2, 1, 3600, problems);
        control = !"false".equalsIgnoreCase(text(conf, CONTROL, "true"));
        controlHost = text(conf, CONTROL_HOST, "127.0.0.1");
        controlPort = (int) number(conf, CONTROL_PORT, 0, 0, 65535, problems);
        controlDir = text(conf, CONTROL_DIR, defaultControlDir());
        maxSeconds = (int) number(conf, MAX_SECONDS, 300, 1, 86_400, problems);
        stageProfiles = (int) number(conf, STAGE_PROFILES, 8, 0, 99, problems);
        pollSeconds = (int) number(conf, POLL_SECONDS, 5, 1, 3600, problems);
        if (problems.length() > 0) {
            throw new IllegalArgumentException(problems.substring(0, problems.length() - 2));
        }
    }

    static ProfilerSettings parse(Function<String, String> conf) {
        return new ProfilerSettings(conf);
    }

    /** Per user, so that the CLI of that user finds it and nobody else can read its token. */
    static String defaultControlDir() {
        return System.getProperty("java.io.tmpdir", "/tmp") + "/sparkscope-profiler-"
                + System.getProperty("user.name", "spark");
    }

    private static String text(Function<String, String> conf, String key, String dflt) {
        String v = conf.apply(key);
        return v == null || v.trim().isEmpty() ? dflt : v.trim();
    }

    private static long number(Function<String, String> conf, String key, long dflt, long min, long max,
                               StringBuilder problems) {
        String v = conf.apply(key);
        if (v == null || v.trim().isEmpty()) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n >= min && n <= max) {
                return n;
            }
            problems.append(key).append('=').append(v).append(" is outside ").append(min).append("..").append(max)
                    .append("; ");
        } catch (NumberFormatException e) {
            problems.append(key).append('=').append(v).append(" is not a whole number; ");
        }
        return dflt;
    }
}
