package dev.sparkscope.annotator.events;

import dev.sparkscope.annotator.core.ConfigKeys;
import dev.sparkscope.annotator.core.SettingsReader;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;


/**
 * The annotations' own settings: running points, how many stages are
 * tracked, and the straggler rule. Read by the listener only; the plugins
 * never see these keys, so a bad straggler ratio leaves them running.
 */
public final class EventsConfig {

    public static final String RUNNING_POINTS = ConfigKeys.PREFIX + "runningPoints";
    public static final String MAX_TRACKED_STAGES = ConfigKeys.PREFIX + "maxTrackedStages";
    public static final String STRAGGLER_RATIO = ConfigKeys.PREFIX + "straggler.ratio";
    public static final String STRAGGLER_MIN_TASKS = ConfigKeys.PREFIX + "straggler.minTasks";
    public static final String STRAGGLER_MIN_EXCESS_MS = ConfigKeys.PREFIX + "straggler.minExcessMs";
    /** The recurring job a run belongs to, for comparing it with its earlier runs (default: the app name). */
    public static final String JOB = ConfigKeys.PREFIX + "job";

    public static final List<String> KEYS = Collections.unmodifiableList(Arrays.asList(RUNNING_POINTS,
            MAX_TRACKED_STAGES, STRAGGLER_RATIO, STRAGGLER_MIN_TASKS, STRAGGLER_MIN_EXCESS_MS, JOB));

    public final boolean runningPoints;
    public final int maxTrackedStages;
    public final StragglerRule straggler;
    /** spark.sparkscope.job, or null when unset (the application's name stands in). */
    public final String job;

    private EventsConfig(SettingsReader r) {
        runningPoints = r.bool(RUNNING_POINTS, true);
        job = r.optional(JOB);
        maxTrackedStages = (int) r.number(MAX_TRACKED_STAGES, 500, 1, 1_000_000);
        straggler = new StragglerRule(
                r.decimal(STRAGGLER_RATIO, StragglerRule.DEFAULT_RATIO, 1.0),
                (int) r.number(STRAGGLER_MIN_TASKS, StragglerRule.DEFAULT_MIN_TASKS, 1, Integer.MAX_VALUE),
                r.number(STRAGGLER_MIN_EXCESS_MS, StragglerRule.DEFAULT_MIN_EXCESS_MS, 0, Long.MAX_VALUE));
    }

    /** Reads through r, which collects the problems (the caller decides when to throw). */
    public static EventsConfig read(SettingsReader r) {
        return new EventsConfig(r);
    }
}
