package dev.sparkscope.annotator;

import dev.sparkscope.annotator.core.SinkConfig;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import org.junit.jupiter.api.Test;

/** The listener's settings: its switch, the sink's (shared with the plugins) and the annotations'. */
class ListenerConfigTest {

    private final Map<String, String> conf = new HashMap<>();

    private ListenerConfig parse() {
        return ListenerConfig.parse(conf::get);
    }

    /** A setting read as it is: its key after spark.sparkscope., a value to give, what that reads as, its default. */
    private static final class Setting {
        final String key;
        final String given;
        final Object read;
        final Object byDefault;
        final Function<ListenerConfig, Object> field;

        Setting(String key, String given, Object read, Object byDefault, Function<ListenerConfig, Object> field) {
            this.key = key;
            this.given = given;
            this.read = read;
            this.byDefault = byDefault;
            this.field = field;
        }
    }

    /**
     * Every key, in one row each. Values are boxed as the fields are (Integer
     * for int, Long for long), so equals compares as assertEquals(long, long) did.
     */
    private static final List<Setting> SETTINGS = Arrays.asList(
            new Setting("enabled", "TRUE", true, true, c -> c.enabled),
            new Setting("influx.url", "https://influx.example:8443/proxy/", "https://influx.example:8443/proxy",
                    SinkConfig.DEFAULT_URL, c -> c.sink.influxUrl),
            new Setting("influx.database", "my db", "my db", "spark", c -> c.sink.database),
            new Setting("influx.username", "u", "u", null, c -> c.sink.username),
            new Setting("influx.password", "p", "p", null, c -> c.sink.password),
            new Setting("influx.connectTimeoutMs", "250", 250, 1000, c -> c.sink.connectTimeoutMs),
            new Setting("influx.readTimeoutMs", "750", 750, 5000, c -> c.sink.readTimeoutMs),
            new Setting("batchSize", "50", 50, 500, c -> c.sink.batchSize),
            new Setting("flushIntervalMs", "200", 200L, 1000L, c -> c.sink.flushIntervalMs),
            new Setting("queueMaxBytes", "1048576", 1L << 20, 16L << 20, c -> c.sink.queueMaxBytes),
            new Setting("maxAttempts", "5", 5, 3, c -> c.sink.maxAttempts),
            new Setting("shutdownTimeoutMs", "0", 0L, 5000L, c -> c.sink.shutdownTimeoutMs),
            new Setting("runningPoints", "false", false, true, c -> c.events.runningPoints),
            new Setting("maxTrackedStages", "7", 7, 500, c -> c.events.maxTrackedStages),
            new Setting("straggler.ratio", "2.5", 2.5, 3.0, c -> c.events.straggler.ratio),
            new Setting("straggler.minTasks", "10", 10, 4, c -> c.events.straggler.minTasks),
            new Setting("straggler.minExcessMs", "500", 500L, 2000L, c -> c.events.straggler.minExcessMs));

    /** Each setting as read: its default, or the value the table gives it. */
    private static void assertSettings(ListenerConfig c, boolean given) {
        for (Setting s : SETTINGS) {
            assertEquals(given ? s.read : s.byDefault, s.field.apply(c), s.key);
        }
    }

    @Test
    void defaults_write_to_a_local_influxdb_database_spark() {
        ListenerConfig c = parse();
        assertEquals("http://127.0.0.1:8186/write?db=spark&precision=ns", c.sink.writeUrl().toString());
        assertNull(c.sink.authorizationHeader());
        assertSettings(c, false);
    }

    @Test
    void every_key_is_read() {
        for (Setting s : SETTINGS) {
            conf.put("spark.sparkscope." + s.key, s.given);
        }
        ListenerConfig c = parse();
        assertEquals("https://influx.example:8443/proxy/write?db=my+db&precision=ns", c.sink.writeUrl().toString());
        assertEquals("Basic dTpw", c.sink.authorizationHeader());
        assertSettings(c, true);
    }

    @Test
    void misconfiguration_is_reported_once_with_every_bad_key_named() {
        conf.put("spark.sparkscope.influx.url", "influx:8086");
        conf.put("spark.sparkscope.batchSize", "lots");
        conf.put("spark.sparkscope.straggler.ratio", "0.5");
        conf.put("spark.sparkscope.enabled", "yes");
        conf.put("spark.sparkscope.influx.password", "secret");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, this::parse);
        String m = e.getMessage();
        assertTrue(m.contains("spark.sparkscope.influx.url=influx:8086 must start with http://"), m);
        assertTrue(m.contains("spark.sparkscope.batchSize=lots is not a whole number"), m);
        assertTrue(m.contains("spark.sparkscope.straggler.ratio=0.5 must be a number >= 1.0"), m);
        assertTrue(m.contains("spark.sparkscope.enabled=yes is not true or false"), m);
        assertTrue(m.contains("spark.sparkscope.influx.username is not"), m);
        assertTrue(!m.contains("secret"), "passwords are never echoed: " + m);
    }

    @Test
    void a_docker_style_host_with_an_underscore_is_accepted() {
        conf.put("spark.sparkscope.influx.url", "http://influx_db:8186");
        ListenerConfig c = parse();
        assertEquals("influx_db", c.sink.writeUrl().getHost());
        assertEquals("http://influx_db:8186/write?db=spark&precision=ns", c.sink.writeUrl().toString());
    }

    @Test
    void credentials_in_the_url_become_basic_auth_and_leave_the_url() {
        conf.put("spark.sparkscope.influx.url", "http://bob:s%40cret@influx:8086");
        ListenerConfig c = parse();
        assertEquals("http://influx:8086/write?db=spark&precision=ns", c.sink.writeUrl().toString());
        assertEquals("Basic " + java.util.Base64.getEncoder().encodeToString("bob:s@cret".getBytes(
                java.nio.charset.StandardCharsets.UTF_8)), c.sink.authorizationHeader());
        assertTrue(!c.sink.influxUrl.contains("cret"), c.sink.influxUrl);
    }

    @Test
    void a_bad_url_with_a_password_in_it_is_reported_without_the_password() {
        conf.put("spark.sparkscope.influx.url", "http://bob:hunter2@influx:notaport");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, this::parse);
        assertTrue(!e.getMessage().contains("hunter2"), e.getMessage());
        assertTrue(e.getMessage().contains("spark.sparkscope.influx.url=http://***@influx:notaport"), e.getMessage());
    }

    @Test
    void out_of_range_numbers_are_refused() {
        conf.put("spark.sparkscope.queueMaxBytes", "10000000000");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, this::parse);
        assertTrue(e.getMessage().contains("spark.sparkscope.queueMaxBytes=10000000000 is outside 65536..268435456"), e.getMessage());
    }

    @Test
    void disabled_listener_is_still_a_valid_config() {
        conf.put("spark.sparkscope.enabled", "false");
        assertEquals(false, parse().enabled);
    }

    @Test
    void the_password_comes_from_the_environment_variable_the_settings_name() {
        Map<String, String> env = new HashMap<>();
        env.put("SPARKSCOPE_EVENTS_PASSWORD", "from-a-secret-0123");
        conf.put(SinkConfig.USERNAME, "sparkscope");
        conf.put(SinkConfig.PASSWORD_ENV, "SPARKSCOPE_EVENTS_PASSWORD");
        ListenerConfig c = ListenerConfig.parse(conf::get, env::get);
        assertEquals("from-a-secret-0123", c.sink.password);
        assertEquals("Basic " + java.util.Base64.getEncoder().encodeToString(
                "sparkscope:from-a-secret-0123".getBytes(java.nio.charset.StandardCharsets.UTF_8)),
                c.sink.authorizationHeader());
        // Named but not set where the JVM runs: said, with what to do, and the value never guessed.
        IllegalArgumentException unset = assertThrows(IllegalArgumentException.class,
                () -> ListenerConfig.parse(conf::get, name -> null));
        assertTrue(unset.getMessage().contains("SPARKSCOPE_EVENTS_PASSWORD, which is not set"), unset.getMessage());
        assertTrue(unset.getMessage().contains("secretKeyRef"), unset.getMessage());
        conf.put(SinkConfig.PASSWORD, "in-the-conf-0123");
        IllegalArgumentException both = assertThrows(IllegalArgumentException.class,
                () -> ListenerConfig.parse(conf::get, env::get));
        assertTrue(both.getMessage().contains("both"), both.getMessage());
    }
}
