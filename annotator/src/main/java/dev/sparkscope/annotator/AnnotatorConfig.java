package dev.sparkscope.annotator;

import java.net.MalformedURLException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * The {@code spark.sparkscope.*} settings, read once when the listener is
 * created. README.md documents every key; keep the two in step.
 */
final class AnnotatorConfig {

    static final String PREFIX = "spark.sparkscope.";
    static final String ENABLED = PREFIX + "enabled";
    static final String URL_KEY = PREFIX + "influx.url";
    static final String DATABASE = PREFIX + "influx.database";
    static final String USERNAME = PREFIX + "influx.username";
    static final String PASSWORD = PREFIX + "influx.password";
    static final String CONNECT_TIMEOUT_MS = PREFIX + "influx.connectTimeoutMs";
    static final String READ_TIMEOUT_MS = PREFIX + "influx.readTimeoutMs";
    static final String BATCH_SIZE = PREFIX + "batchSize";
    static final String FLUSH_INTERVAL_MS = PREFIX + "flushIntervalMs";
    static final String QUEUE_CAPACITY = PREFIX + "queueCapacity";
    static final String MAX_ATTEMPTS = PREFIX + "maxAttempts";
    static final String SHUTDOWN_TIMEOUT_MS = PREFIX + "shutdownTimeoutMs";
    static final String RUNNING_POINTS = PREFIX + "runningPoints";
    static final String MAX_TRACKED_STAGES = PREFIX + "maxTrackedStages";
    static final String STRAGGLER_RATIO = PREFIX + "straggler.ratio";
    static final String STRAGGLER_MIN_TASKS = PREFIX + "straggler.minTasks";
    static final String STRAGGLER_MIN_EXCESS_MS = PREFIX + "straggler.minExcessMs";

    static final String DEFAULT_URL = "http://127.0.0.1:8186";
    static final String DEFAULT_DATABASE = "spark";

    final boolean enabled;
    final String influxUrl;
    final String database;
    final String username;
    final String password;
    final int connectTimeoutMs;
    final int readTimeoutMs;
    final int batchSize;
    final long flushIntervalMs;
    final int queueCapacity;
    final int maxAttempts;
    final long shutdownTimeoutMs;
    final boolean runningPoints;
    final int maxTrackedStages;
    final StragglerRule straggler;

    private AnnotatorConfig(Reader r) {
        enabled = r.bool(ENABLED, true);
        influxUrl = r.url(URL_KEY, DEFAULT_URL);
        database = r.nonEmpty(DATABASE, DEFAULT_DATABASE);
        username = r.optional(USERNAME);
        password = r.optional(PASSWORD);
        connectTimeoutMs = (int) r.number(CONNECT_TIMEOUT_MS, 1000, 1, 600_000);
        readTimeoutMs = (int) r.number(READ_TIMEOUT_MS, 5000, 1, 600_000);
        batchSize = (int) r.number(BATCH_SIZE, 500, 1, 100_000);
        flushIntervalMs = r.number(FLUSH_INTERVAL_MS, 1000, 1, 3_600_000);
        queueCapacity = (int) r.number(QUEUE_CAPACITY, 10_000, 1, 10_000_000);
        maxAttempts = (int) r.number(MAX_ATTEMPTS, 3, 1, 100);
        shutdownTimeoutMs = r.number(SHUTDOWN_TIMEOUT_MS, 5000, 0, 3_600_000);
        runningPoints = r.bool(RUNNING_POINTS, true);
        maxTrackedStages = (int) r.number(MAX_TRACKED_STAGES, 500, 1, 1_000_000);
        straggler = new StragglerRule(
                r.decimal(STRAGGLER_RATIO, StragglerRule.DEFAULT_RATIO, 1.0),
                (int) r.number(STRAGGLER_MIN_TASKS, StragglerRule.DEFAULT_MIN_TASKS, 1, Integer.MAX_VALUE),
                r.number(STRAGGLER_MIN_EXCESS_MS, StragglerRule.DEFAULT_MIN_EXCESS_MS, 0, Long.MAX_VALUE));
        if (password != null && username == null) {
            r.problems.add(PASSWORD + " is set but " + USERNAME + " is not: set both or neither");
        }
    }

    /**
     * Reads the settings through {@code lookup} (key to value, null when
     * unset). Throws with every problem found, each naming its key.
     */
    static AnnotatorConfig parse(Function<String, String> lookup) {
        Reader r = new Reader(lookup);
        AnnotatorConfig config = new AnnotatorConfig(r);
        if (!r.problems.isEmpty()) {
            throw new IllegalArgumentException(String.join("; ", r.problems));
        }
        return config;
    }

    /** {@code <url>/write?db=<db>&precision=ms}: InfluxDB 1.x HTTP write endpoint. */
    URL writeUrl() {
        try {
            return new URL(influxUrl + "/write?db=" + URLEncoder.encode(database, "UTF-8") + "&precision=ms");
        } catch (java.io.UnsupportedEncodingException | MalformedURLException e) {
            throw new IllegalStateException(e);
        }
    }

    /** HTTP Basic credentials (InfluxDB 1.x accepts them), or null without a username. */
    String authorizationHeader() {
        if (username == null) {
            return null;
        }
        String pair = username + ":" + (password == null ? "" : password);
        return "Basic " + java.util.Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8));
    }

    private static final class Reader {
        private final Function<String, String> lookup;
        final List<String> problems = new ArrayList<>();

        Reader(Function<String, String> lookup) {
            this.lookup = lookup;
        }

        String optional(String key) {
            String v = lookup.apply(key);
            if (v == null) {
                return null;
            }
            v = v.trim();
            return v.isEmpty() ? null : v;
        }

        String nonEmpty(String key, String dflt) {
            String v = optional(key);
            return v == null ? dflt : v;
        }

        boolean bool(String key, boolean dflt) {
            String v = optional(key);
            if (v == null) {
                return dflt;
            }
            switch (v.toLowerCase(Locale.ROOT)) {
                case "true": return true;
                case "false": return false;
                default:
                    problems.add(key + "=" + v + " is not true or false");
                    return dflt;
            }
        }

        long number(String key, long dflt, long min, long max) {
            String v = optional(key);
            if (v == null) {
                return dflt;
            }
            try {
                long n = Long.parseLong(v);
                if (n < min || n > max) {
                    problems.add(key + "=" + v + " is outside " + min + ".." + max);
                    return dflt;
                }
                return n;
            } catch (NumberFormatException e) {
                problems.add(key + "=" + v + " is not a whole number");
                return dflt;
            }
        }

        double decimal(String key, double dflt, double min) {
            String v = optional(key);
            if (v == null) {
                return dflt;
            }
            try {
                double d = Double.parseDouble(v);
                if (!(d >= min) || Double.isInfinite(d)) {
                    problems.add(key + "=" + v + " must be a number >= " + min);
                    return dflt;
                }
                return d;
            } catch (NumberFormatException e) {
                problems.add(key + "=" + v + " is not a number");
                return dflt;
            }
        }

        String url(String key, String dflt) {
            String v = nonEmpty(key, dflt);
            while (v.endsWith("/")) {
                v = v.substring(0, v.length() - 1);
            }
            try {
                URI uri = new URI(v);
                String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
                if (!scheme.equals("http") && !scheme.equals("https")) {
                    problems.add(key + "=" + v + " must start with http:// or https:// (e.g. " + DEFAULT_URL + ")");
                    return dflt;
                }
                if (uri.getHost() == null) {
                    problems.add(key + "=" + v + " has no host (e.g. " + DEFAULT_URL + ")");
                    return dflt;
                }
                if (uri.getQuery() != null || uri.getFragment() != null) {
                    problems.add(key + "=" + v + " must not have a query or fragment: give the base URL, e.g. " + DEFAULT_URL);
                    return dflt;
                }
                new URL(v);
                return v;
            } catch (URISyntaxException | MalformedURLException e) {
                problems.add(key + "=" + v + " is not a URL (e.g. " + DEFAULT_URL + ")");
                return dflt;
            }
        }
    }
}
