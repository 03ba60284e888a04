package dev.sparkscope.annotator.profiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** The executor's profiler reads its own keys and the sink's: no other product's setting can stop it. */
class ProfilerSetupTest {

    private final Map<String, String> conf = new HashMap<>();

    @Test
    void a_bad_straggler_ratio_leaves_the_profiler_running() {
        conf.put("spark.sparkscope.straggler.ratio", "0.5");
        conf.put("spark.sparkscope.maxTrackedStages", "many");
        conf.put("spark.sparkscope.influx.url", "http://telegraf:8186");
        conf.put(ProfilerSettings.CONTINUOUS, "cpu");
        ProfilerExecutorPlugin.Setup setup = ProfilerExecutorPlugin.Setup.read(conf::get);
        assertEquals("cpu", setup.settings.continuous);
        assertEquals("http://telegraf:8186/write?db=spark&precision=ns", setup.sink.writeUrl().toString());
    }

    @Test
    void a_bad_setting_of_its_own_or_of_the_sink_still_stops_it_naming_the_key() {
        conf.put("spark.sparkscope.influx.url", "telegraf:8186");
        IllegalArgumentException sink = assertThrows(IllegalArgumentException.class,
                () -> ProfilerExecutorPlugin.Setup.read(conf::get));
        assertTrue(sink.getMessage().contains("spark.sparkscope.influx.url=telegraf:8186"), sink.getMessage());
        conf.clear();
        conf.put(ProfilerSettings.CONTINUOUS, "sometimes");
        IllegalArgumentException own = assertThrows(IllegalArgumentException.class,
                () -> ProfilerExecutorPlugin.Setup.read(conf::get));
        assertTrue(own.getMessage().contains(ProfilerSettings.CONTINUOUS), own.getMessage());
    }
}
