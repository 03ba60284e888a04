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
        assertEquals("http://127.0.0.1:8186/write?db=spark&precision=ms", c.writeUrl().toString());
        assertNull(c.authorizationHeader());
        assertEquals(500, c.batchSize);
        assertEquals(1000, c.flushIntervalMs);
        assertEquals(10_000, c.queueCapacity);
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
        conf.put("spark.sparkscope.queueCapacity", "99");
        conf.put("spark.sparkscope.maxAttempts", "5");
        conf.put("spark.sparkscope.shutdownTimeoutMs", "0");
        conf.put("spark.sparkscope.runningPoints", "false");
        conf.put("spark.sparkscope.maxTrackedStages", "7");
        conf.put("spark.sparkscope.straggler.ratio", "2.5");
        conf.put("spark.sparkscope.straggler.minTasks", "10");
        conf.put("spark.sparkscope.straggler.minExcessMs", "500");
        AnnotatorConfig c = parse();
        assertEquals("https://influx.example:8443/proxy/write?db=my+db&precision=ms", c.writeUrl().toString());
        assertEquals("Basic dTpw", c.authorizationHeader());
        assertEquals(250, c.connectTimeoutMs);
        assertEquals(750, c.readTimeoutMs);
        assertEquals(50, c.batchSize);
        assertEquals(200, c.flushIntervalMs);
        assertEquals(99, c.queueCapacity);
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
    void out_of_range_numbers_are_refused() {
        conf.put("spark.sparkscope.queueCapacity", "0");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, this::parse);
        assertTrue(e.getMessage().contains("spark.sparkscope.queueCapacity=0 is outside 1.."), e.getMessage());
    }

    @Test
    void disabled_listener_is_still_a_valid_config() {
        conf.put("spark.sparkscope.enabled", "false");
        assertEquals(false, parse().enabled);
    }
}
