package dev.sparkscope.annotator;

import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
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
    /**
     * The NAME of an environment variable that holds the password. Spark puts its
     * settings in spark-submit's argv and in the driver's ConfigMap on Kubernetes;
     * an environment variable (from a Secret there) keeps the value out of both.
     */
    static final String PASSWORD_ENV = PREFIX + "influx.passwordEnv";
    static final String CONNECT_TIMEOUT_MS = PREFIX + "influx.connectTimeoutMs";
    static final String READ_TIMEOUT_MS = PREFIX + "influx.readTimeoutMs";
    static final String BATCH_SIZE = PREFIX + "batchSize";
    static final String FLUSH_INTERVAL_MS = PREFIX + "flushIntervalMs";
    static final String QUEUE_MAX_BYTES = PREFIX + "queueMaxBytes";
    /** Replaced by queueMaxBytes: a count of lines did not bound memory (a line can be kilobytes). */
    static final String REMOVED_QUEUE_CAPACITY = PREFIX + "queueCapacity";
    static final String MAX_ATTEMPTS = PREFIX + "maxAttempts";
    static final String OUTAGE_WAIT_MS = PREFIX + "influx.outageWaitMs";
    static final String SHUTDOWN_TIMEOUT_MS = PREFIX + "shutdownTimeoutMs";
    static final String RUNNING_POINTS = PREFIX + "runningPoints";
    static final String MAX_TRACKED_STAGES = PREFIX + "maxTrackedStages";
    static final String STRAGGLER_RATIO = PREFIX + "straggler.ratio";
    static final String STRAGGLER_MIN_TASKS = PREFIX + "straggler.minTasks";
    static final String STRAGGLER_MIN_EXCESS_MS = PREFIX + "straggler.minExcessMs";

    static final List<String> KEYS = Arrays.asList(ENABLED, URL_KEY, DATABASE, USERNAME, PASSWORD, PASSWORD_ENV,
            CONNECT_TIMEOUT_MS, READ_TIMEOUT_MS, BATCH_SIZE, FLUSH_INTERVAL_MS, QUEUE_MAX_BYTES, MAX_ATTEMPTS,
            OUTAGE_WAIT_MS,
            SHUTDOWN_TIMEOUT_MS, RUNNING_POINTS, MAX_TRACKED_STAGES, STRAGGLER_RATIO, STRAGGLER_MIN_TASKS,
            STRAGGLER_MIN_EXCESS_MS);

    static final long DEFAULT_QUEUE_MAX_BYTES = 16L << 20;
    static final long MAX_QUEUE_MAX_BYTES = 256L << 20;
    /** An events listener that cannot be reached is waited for this long: a restart, even a slow one. */
    static final long DEFAULT_OUTAGE_WAIT_MS = 600_000;

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
    final long queueMaxBytes;
    final int maxAttempts;
    final long outageWaitMs;
    final long shutdownTimeoutMs;
    final boolean runningPoints;
    final int maxTrackedStages;
    final StragglerRule straggler;

    private AnnotatorConfig(Reader r, Function<String, String> environment) {
        enabled = r.bool(ENABLED, true);
        influxUrl = r.url(URL_KEY, DEFAULT_URL);
        database = r.nonEmpty(DATABASE, DEFAULT_DATABASE);
        String user = r.optional(USERNAME);
        username = user != null ? user : r.urlUser;
        String passwordEnv = r.optional(PASSWORD_ENV);
        String fromEnv = passwordEnv == null ? null : environment.apply(passwordEnv);
        if (passwordEnv != null && (fromEnv == null || fromEnv.isEmpty())) {
            r.problems.add(PASSWORD_ENV + " names " + passwordEnv + ", which is not set in this JVM's environment: "
                    + "export it before spark-submit, or on Kubernetes set spark.kubernetes.driver.secretKeyRef."
                    + passwordEnv + " (and .executor.) to <secret>:<key>");
        }
        if (passwordEnv != null && r.optional(PASSWORD) != null) {
            r.problems.add("both " + PASSWORD + " and " + PASSWORD_ENV + " are set: keep " + PASSWORD_ENV);
        }
        password = user != null ? (passwordEnv != null ? fromEnv : r.optional(PASSWORD)) : r.urlPassword;
        connectTimeoutMs = (int) r.number(CONNECT_TIMEOUT_MS, 1000, 1, 600_000);
        readTimeoutMs = (int) r.number(READ_TIMEOUT_MS, 5000, 1, 600_000);
        batchSize = (int) r.number(BATCH_SIZE, 500, 1, 100_000);
        flushIntervalMs = r.number(FLUSH_INTERVAL_MS, 1000, 1, 3_600_000);
        queueMaxBytes = r.number(QUEUE_MAX_BYTES, DEFAULT_QUEUE_MAX_BYTES, 64L << 10, MAX_QUEUE_MAX_BYTES);
        maxAttempts = (int) r.number(MAX_ATTEMPTS, 3, 1, 100);
        outageWaitMs = r.number(OUTAGE_WAIT_MS, DEFAULT_OUTAGE_WAIT_MS, 0, 86_400_000);
        shutdownTimeoutMs = r.number(SHUTDOWN_TIMEOUT_MS, 5000, 0, 3_600_000);
        runningPoints = r.bool(RUNNING_POINTS, true);
        maxTrackedStages = (int) r.number(MAX_TRACKED_STAGES, 500, 1, 1_000_000);
        straggler = new StragglerRule(
                r.decimal(STRAGGLER_RATIO, StragglerRule.DEFAULT_RATIO, 1.0),
                (int) r.number(STRAGGLER_MIN_TASKS, StragglerRule.DEFAULT_MIN_TASKS, 1, Integer.MAX_VALUE),
                r.number(STRAGGLER_MIN_EXCESS_MS, StragglerRule.DEFAULT_MIN_EXCESS_MS, 0, Long.MAX_VALUE));
        if ((r.optional(PASSWORD) != null || passwordEnv != null) && user == null && r.urlUser == null) {
            r.problems.add((passwordEnv != null ? PASSWORD_ENV : PASSWORD) + " is set but " + USERNAME
                    + " is not: set both or neither");
        }
    }

    /**
     * Reads the settings through {@code lookup} (key to value, null when
     * unset). Throws with every problem found, each naming its key.
     */
    static AnnotatorConfig parse(Function<String, String> lookup) {
        return parse(lookup, System::getenv);
    }

    /** environment: a variable's value by name (System::getenv; tests give their own). */
    static AnnotatorConfig parse(Function<String, String> lookup, Function<String, String> environment) {
        Reader r = new Reader(lookup);
        AnnotatorConfig config = new AnnotatorConfig(r, environment);
        if (!r.problems.isEmpty()) {
            throw new IllegalArgumentException(String.join("; ", r.problems));
        }
        return config;
    }

    /**
     * One warning per {@code spark.sparkscope.*} key that this version does not
     * read (a misspelt key would otherwise be ignored without a word), naming
     * the closest known key.
     */
    static List<String> unknownKeys(Collection<String> setKeys) {
        List<String> warnings = new ArrayList<>();
        for (String key : setKeys) {
            if (key == null || !key.startsWith(PREFIX) || KEYS.contains(key) || ProfilerSettings.KEYS.contains(key)) {
                continue;
            }
            if (key.equals(REMOVED_QUEUE_CAPACITY)) {
                warnings.add("sparkscope annotator: " + key + " is no longer read: the queue is bounded in bytes, "
                        + "see " + QUEUE_MAX_BYTES + " (default " + (DEFAULT_QUEUE_MAX_BYTES >> 20) + " MiB)");
                continue;
            }
            String closest = null;
            int best = Integer.MAX_VALUE;
            List<String> allKnown = new ArrayList<>(KEYS);
            allKnown.addAll(ProfilerSettings.KEYS);
            for (String known : allKnown) {
                int d = editDistance(key.toLowerCase(Locale.ROOT), known.toLowerCase(Locale.ROOT));
                if (d < best) {
                    best = d;
                    closest = known;
                }
            }
            warnings.add("sparkscope annotator: unknown setting " + key + " is ignored"
                    + (best <= Math.max(3, key.length() / 4) ? "; did you mean " + closest + "?" : "")
                    + " (the annotator README lists every setting)");
        }
        return warnings;
    }

    private static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }

    /**
     * {@code <url>/write?db=<db>&precision=ns}: InfluxDB 1.x HTTP write
     * endpoint. Nanoseconds because points carry a sub-millisecond offset
     * that keeps entities starting in the same millisecond apart.
     */
    URL writeUrl() {
        try {
            return new URL(influxUrl + "/write?db=" + URLEncoder.encode(database, "UTF-8") + "&precision=ns");
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

    private static String decode(String s) {
        try {
            return java.net.URLDecoder.decode(s, "UTF-8");
        } catch (java.io.UnsupportedEncodingException | IllegalArgumentException e) {
            return s;
        }
    }

    private static final class Reader {
        private final Function<String, String> lookup;
        final List<String> problems = new ArrayList<>();
        String urlUser;
        String urlPassword;

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
            // Never log a password someone put in the URL.
            String shown = InfluxWriter.redact(v);
            String scheme = v.contains("://") ? v.substring(0, v.indexOf("://")).toLowerCase(Locale.ROOT) : "";
            if (!scheme.equals("http") && !scheme.equals("https")) {
                problems.add(key + "=" + shown + " must start with http:// or https:// (e.g. " + DEFAULT_URL + ")");
                return dflt;
            }
            try {
                // java.net.URL, not URI: URI reads no host in "influx_db" (underscores are
                // common in Docker service names), URL and the HTTP client take it.
                URL url = new URL(v);
                if (url.getHost() == null || url.getHost().isEmpty()) {
                    problems.add(key + "=" + shown + " has no host (e.g. " + DEFAULT_URL + ")");
                    return dflt;
                }
                if (url.getQuery() != null || url.getRef() != null) {
                    problems.add(key + "=" + shown + " must not have a query or fragment: give the base URL, e.g. "
                            + DEFAULT_URL);
                    return dflt;
                }
                if (url.getUserInfo() != null) {
                    // user:password@ in the URL: used as the credentials unless the keys set them,
                    // and kept out of the URL (and so out of every log line).
                    String info = url.getUserInfo();
                    int colon = info.indexOf(':');
                    urlUser = decode(colon < 0 ? info : info.substring(0, colon));
                    urlPassword = colon < 0 ? null : decode(info.substring(colon + 1));
                    v = v.replaceFirst("//[^/@]*@", "//");
                }
                return v;
            } catch (MalformedURLException e) {
                problems.add(key + "=" + shown + " is not a URL (e.g. " + DEFAULT_URL + ")");
                return dflt;
            }
        }
    }
}
