package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The applicationid tag must equal the id in Spark's Graphite metric names. */
class ApplicationIdTagTest {

    private final Map<String, String> conf = new HashMap<>();

    @BeforeAll
    static void systemProperties() {
        System.setProperty("sparkscope.test.team", "data");
    }

    /** What a Spark conf (key, value, key, value, ...) resolves to. */
    static Stream<Arguments> resolved() {
        return Stream.of(
                Arguments.of("without a namespace it is spark.app.id", "app-20261122123158-0000",
                        new String[] {"spark.app.id", "app-20261122123158-0000", "spark.app.name", "etl"}),
                Arguments.of("a metrics namespace replaces the app id", "nightly_etl",
                        new String[] {"spark.app.id", "local-1", "spark.metrics.namespace", "nightly_etl"}),
                Arguments.of("namespace references to app name and app id are resolved", "etl-local-1",
                        new String[] {"spark.app.id", "local-1", "spark.app.name", "etl",
                            "spark.metrics.namespace", "${spark.app.name}-${spark.app.id}"}),
                Arguments.of("system property references are resolved and unknown ones stay as written",
                        "data_${spark.no.such.key}",
                        new String[] {"spark.metrics.namespace",
                            "${system:sparkscope.test.team}_${spark.no.such.key}"}));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("resolved")
    void resolves(String why, String expected, String[] keysAndValues) {
        for (int i = 0; i < keysAndValues.length; i += 2) {
            conf.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        assertEquals(expected, ApplicationIdTag.resolve(conf::get));
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
