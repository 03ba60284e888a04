package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** The applicationid tag must equal the id in Spark's Graphite metric names. */
class ApplicationIdTagTest {

    private final Map<String, String> conf = new HashMap<>();

    @Test
    void without_a_namespace_it_is_spark_app_id() {
        conf.put("spark.app.id", "app-20261122123158-0000");
        conf.put("spark.app.name", "etl");
        assertEquals("app-20261122123158-0000", ApplicationIdTag.resolve(conf::get));
    }

    @Test
    void a_metrics_namespace_replaces_the_app_id() {
        conf.put("spark.app.id", "local-1");
        conf.put("spark.metrics.namespace", "nightly_etl");
        assertEquals("nightly_etl", ApplicationIdTag.resolve(conf::get));
    }

    @Test
    void namespace_references_to_app_name_and_app_id_are_resolved() {
        conf.put("spark.app.id", "local-1");
        conf.put("spark.app.name", "etl");
        conf.put("spark.metrics.namespace", "${spark.app.name}-${spark.app.id}");
        assertEquals("etl-local-1", ApplicationIdTag.resolve(conf::get));
    }

    @Test
    void system_property_references_are_resolved_and_unknown_ones_stay_as_written() {
        System.setProperty("sparkscope.test.team", "data");
        conf.put("spark.metrics.namespace", "${system:sparkscope.test.team}_${spark.no.such.key}");
        assertEquals("data_${spark.no.such.key}", ApplicationIdTag.resolve(conf::get));
    }

    @Test
    void self_referencing_values_stop_after_a_bounded_number_of_rounds() {
        conf.put("spark.metrics.namespace", "${spark.metrics.namespace}x");
        String id = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(5),
                () -> ApplicationIdTag.resolve(conf::get));
        // Each round resolves the reference once more and adds one x; the last round leaves it as written.
        assertEquals("${spark.metrics.namespace}" + "xxxxxxxxxxxx", id);
    }

    @Test
    void unknown_before_spark_sets_the_app_id() {
        assertNull(ApplicationIdTag.resolve(conf::get));
    }
}
