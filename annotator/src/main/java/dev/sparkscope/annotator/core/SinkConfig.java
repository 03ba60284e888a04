package dev.sparkscope.annotator.core;

import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Where and how every product of the jar writes: the endpoint, its
 * credentials, batching, the queue and the shutdown wait. Only these keys:
 * a product's own settings (the listener's straggler rule, the profiler's
 * modes) are read by that product, so one of them set wrong never stops
 * another from writing. The annotator README documents every key.
 */
public final class SinkConfig {

    public static final String URL_KEY = ConfigKeys.PREFIX + "influx.url";
    public static final String DATABASE = ConfigKeys.PREFIX + "influx.database";
    public static final String USERNAME = ConfigKeys.PREFIX + "influx.username";
    public static final String PASSWORD = ConfigKeys.PREFIX + "influx.password";
    /**
     * The NAME of an environment variable that holds the password. Spark puts its
     * settings in spark-submit's argv and in the driver's ConfigMap on Kubernetes;
     * an environment variable (from a Secret there) keeps the value out of both.
     */
    public static final String PASSWORD_ENV = ConfigKeys.PREFIX + "influx.passwordEnv";
    public static final String CONNECT_TIMEOUT_MS = ConfigKeys.PREFIX + "influx.connectTimeoutMs";
    public static final String READ_TIMEOUT_MS = ConfigKeys.PREFIX + "influx.readTimeoutMs";
    public static final String BATCH_SIZE = ConfigKeys.PREFIX + "batchSize";
    public static final String FLUSH_INTERVAL_MS = ConfigKeys.PREFIX + "flushIntervalMs";
    public static final String QUEUE_MAX_BYTES = ConfigKeys.PREFIX + "queueMaxBytes";
    /** Replaced by queueMaxBytes: a count of lines did not bound memory (a line can be kilobytes). */
    public static final String REMOVED_QUEUE_CAPACITY = ConfigKeys.PREFIX + "queueCapacity";
    public static final String MAX_ATTEMPTS = ConfigKeys.PREFIX + "maxAttempts";
    public static final String OUTAGE_WAIT_MS = ConfigKeys.PREFIX + "influx.outageWaitMs";
    public static final String SHUTDOWN_TIMEOUT_MS = ConfigKeys.PREFIX + "shutdownTimeoutMs";

    public static final List<String> KEYS = Collections.unmodifiableList(Arrays.asList(URL_KEY, DATABASE, USERNAME,
            PASSWORD, PASSWORD_ENV, CONNECT_TIMEOUT_MS, READ_TIMEOUT_MS, BATCH_SIZE, FLUSH_INTERVAL_MS,
            QUEUE_MAX_BYTES, MAX_ATTEMPTS, OUTAGE_WAIT_MS, SHUTDOWN_TIMEOUT_MS));

    public static final long DEFAULT_QUEUE_MAX_BYTES = 16L << 20;
    public static final long MAX_QUEUE_MAX_BYTES = 256L << 20;
    /** An events listener that cannot be reached is waited for this long: a restart, even a slow one. */
    public static final long DEFAULT_OUTAGE_WAIT_MS = 600_000;

    /** Keys no longer read, to what a user should set instead. */
    public static final Map<String, String> RETIRED = Collections.singletonMap(REMOVED_QUEUE_CAPACITY,
            "is no longer read: the queue is bounded in bytes, see " + QUEUE_MAX_BYTES + " (default "
                    + (DEFAULT_QUEUE_MAX_BYTES >> 20) + " MiB)");

    public static final String DEFAULT_URL = "http://127.0.0.1:8186";
    public static final String DEFAULT_DATABASE = "spark";

    public final String influxUrl;
    public final String database;
    public final String username;
    public final String password;
    public final int connectTimeoutMs;
    public final int readTimeoutMs;
    public final int batchSize;
    public final long flushIntervalMs;
    public final long queueMaxBytes;
    public final int maxAttempts;
    public final long outageWaitMs;
    public final long shutdownTimeoutMs;

    private SinkConfig(SettingsReader r, Function<String, String> environment) {
        influxUrl = r.url(URL_KEY, DEFAULT_URL);
        database = r.nonEmpty(DATABASE, DEFAULT_DATABASE);
        String user = r.optional(USERNAME);
        username = user != null ? user : r.urlUser;
        String passwordEnv = r.optional(PASSWORD_ENV);
        String fromEnv = passwordEnv == null ? null : environment.apply(passwordEnv);
        if (passwordEnv != null && (fromEnv == null || fromEnv.isEmpty())) {
            r.problem(PASSWORD_ENV + " names " + passwordEnv + ", which is not set in this JVM's environment: "
                    + "export it before spark-submit, or on Kubernetes set spark.kubernetes.driver.secretKeyRef."
                    + passwordEnv + " (and .executor.) to <secret>:<key>");
        }
        if (passwordEnv != null && r.optional(PASSWORD) != null) {
            r.problem("both " + PASSWORD + " and " + PASSWORD_ENV + " are set: keep " + PASSWORD_ENV);
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
        if ((r.optional(PASSWORD) != null || passwordEnv != null) && user == null && r.urlUser == null) {
            r.problem((passwordEnv != null ? PASSWORD_ENV : PASSWORD) + " is set but " + USERNAME
                    + " is not: set both or neither");
        }
    }

    /** Reads through r, which collects the problems (the caller decides when to throw). */
    public static SinkConfig read(SettingsReader r, Function<String, String> environment) {
        return new SinkConfig(r, environment);
    }

    /**
     * Reads the settings through {@code lookup} (key to value, null when
     * unset). Throws with every problem found, each naming its key.
     */
    public static SinkConfig parse(Function<String, String> lookup) {
        return parse(lookup, System::getenv);
    }

    /** environment: a variable's value by name (System::getenv; tests give their own). */
    public static SinkConfig parse(Function<String, String> lookup, Function<String, String> environment) {
        SettingsReader r = new SettingsReader(lookup);
        SinkConfig config = read(r, environment);
        r.throwIfProblems();
        return config;
    }

    /**
     * {@code <url>/write?db=<db>&precision=ns}: InfluxDB 1.x HTTP write
     * endpoint. Nanoseconds because points carry a sub-millisecond offset
     * that keeps entities starting in the same millisecond apart.
     */
    public URL writeUrl() {
        try {
            return new URL(influxUrl + "/write?db=" + URLEncoder.encode(database, "UTF-8") + "&precision=ns");
        } catch (java.io.UnsupportedEncodingException | MalformedURLException e) {
            throw new IllegalStateException(e);
        }
    }

    /** HTTP Basic credentials (InfluxDB 1.x accepts them), or null without a username. */
    public String authorizationHeader() {
        if (username == null) {
            return null;
        }
        String pair = username + ":" + (password == null ? "" : password);
        return "Basic " + java.util.Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8));
    }
}
