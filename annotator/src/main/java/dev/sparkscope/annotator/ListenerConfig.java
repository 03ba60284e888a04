package dev.sparkscope.annotator;

import dev.sparkscope.annotator.core.ConfigKeys;
import dev.sparkscope.annotator.core.SettingsReader;
import dev.sparkscope.annotator.core.SinkConfig;
import dev.sparkscope.annotator.events.EventsConfig;

import java.util.Collections;
import java.util.List;
import java.util.function.Function;


/**
 * What the listener reads: its on/off switch, where to write (shared with
 * the plugins) and the annotations' own settings, parsed in one pass so that
 * one WARN names every bad key. The plugins read SinkConfig and their own
 * keys only: nothing here can turn them off.
 */
final class ListenerConfig {

    static final String ENABLED = ConfigKeys.PREFIX + "enabled";
    /** The listener's own keys besides the sink's and the annotations'. */
    static final List<String> KEYS = Collections.singletonList(ENABLED);

    final boolean enabled;
    final SinkConfig sink;
    final EventsConfig events;

    private ListenerConfig(SettingsReader r, Function<String, String> environment) {
        enabled = r.bool(ENABLED, true);
        sink = SinkConfig.read(r, environment);
        events = EventsConfig.read(r);
    }

    /** Throws with every problem found, each naming its key. */
    static ListenerConfig parse(Function<String, String> lookup) {
        return parse(lookup, System::getenv);
    }

    static ListenerConfig parse(Function<String, String> lookup, Function<String, String> environment) {
        SettingsReader r = new SettingsReader(lookup);
        ListenerConfig config = new ListenerConfig(r, environment);
        r.throwIfProblems();
        return config;
    }
}
