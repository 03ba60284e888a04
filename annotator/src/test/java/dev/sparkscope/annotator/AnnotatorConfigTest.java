package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

class AnnotatorConfigTest {

    private final Map<String, String> conf = new HashMap<>();

    private AnnotatorConfig parse() {
        return AnnotatorConfig.parse(conf::get);
    }

    @Test
    void defaults_write_to_a_local_influxdb_database_spark() {
        AnnotatorConfig c = parse();
        assertTrue(c.enabled);
        assertEquals("http://127.0.0.1:8186/write?db=spark&precision=ns", c.writeUrl().toString());
        assertNull(c.authorizationHeader());
        assertEquals(500, c.batchSize);
        assertEquals(1000, c.flushIntervalMs);
        assertEquals(16L << 20, c.queueMaxBytes);
        assertEquals(5000, c.shutdownTimeoutMs);
        assertEquals(3, c.maxAttempts);
        assertEquals(1000, c.connectTimeoutMs);
        assertEquals(5000, c.readTimeoutMs);
        assertTrue(c.runningPoints);
        assertEquals(500, c.maxTrackedStages);
        assertEquals(3.0, c.straggler.ratio);
        assertEquals(4, c.straggler.minTasks);
        assertEquals(2000, c.straggler.minExcessMs);
    }

    @Test
    void every_key_is_read() {
        conf.put("spark.sparkscope.enabled", "TRUE");
        conf.put("spark.sparkscope.influx.url", "https://influx.example:8443/proxy/");
        conf.put("spark.sparkscope.influx.database", "my db");
        conf.put("spark.sparkscope.influx.username", "u");
        conf.put("spark.sparkscope.influx.password", "p");
        conf.put("spark.sparkscope.influx.connectTimeoutMs", "250");
        conf.put("spark.sparkscope.influx.readTimeoutMs", "750");
        conf.put("spark.sparkscope.batchSize", "50");
        conf.put("spark.sparkscope.flushIntervalMs", "200");
        conf.put("spark.sparkscope.queueMaxBytes", "1048576");
        conf.put("spark.sparkscope.maxAttempts", "5");
        conf.put("spark.sparkscope.shutdownTimeoutMs", "0");
        conf.put("spark.sparkscope.runningPoints", "false");
        conf.put("spark.sparkscope.maxTrackedStages", "7");
        conf.put("spark.sparkscope.straggler.ratio", "2.5");
        conf.put("spark.sparkscope.straggler.minTasks", "10");
        conf.put("spark.sparkscope.straggler.minExcessMs", "500");
        AnnotatorConfig c = parse();
        assertEquals("https://influx.example:8443/proxy/write?db=my+db&precision=ns", c.writeUrl().toString());
        assertEquals("Basic dTpw", c.authorizationHeader());
        assertEquals(250, c.connectTimeoutMs);
        assertEquals(750, c.readTimeoutMs);
        assertEquals(50, c.batchSize);
        assertEquals(200, c.flushIntervalMs);
        assertEquals(1L << 20, c.queueMaxBytes);
        assertEquals(5, c.maxAttempts);
        assertEquals(0, c.shutdownTimeoutMs);
        assertEquals(false, c.runningPoints);
        assertEquals(7, c.maxTrackedStages);
        assertEquals(2.5, c.straggler.ratio);
        assertEquals(10, c.straggler.minTasks);
        assertEquals(500, c.straggler.minExcessMs);
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
        AnnotatorConfig c = parse();
        assertEquals("influx_db", c.writeUrl().getHost());
        assertEquals("http://influx_db:8186/write?db=spark&precision=ns", c.writeUrl().toString());
    }

    @Test
    void credentials_in_the_url_become_basic_auth_and_leave_the_url() {
        conf.put("spark.sparkscope.influx.url", "http://bob:s%40cret@influx:8086");
        AnnotatorConfig c = parse();
        assertEquals("http://influx:8086/write?db=spark&precision=ns", c.writeUrl().toString());
        assertEquals("Basic " + java.util.Base64.getEncoder().encodeToString("bob:s@cret".getBytes(
                java.nio.charset.StandardCharsets.UTF_8)), c.authorizationHeader());
        assertTrue(!c.influxUrl.contains("cret"), c.influxUrl);
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
}
