package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;

/**
 * The rule on stages run through a small scheduler model: tasks start in
 * partition order on the first free slot, as Spark's do, so multi-wave
 * stages finish when their last wave does.
 */
class StragglerRuleTest {

    private final StragglerRule rule = StragglerRule.defaults();

    /** A stage as it ran: its statistics and its end. */
    static final class Run {
        final StageStats stats;
        final long endMs;

        Run(StageStats stats, long endMs) {
            this.stats = stats;
            this.endMs = endMs;
        }

        boolean flaggedBy(StragglerRule rule) {
            return rule.isStraggler(stats, endMs);
        }
    }

    static Run run(int slots, long[] durations) {
        long[] free = new long[slots];
        List<StageStats.Task> tasks = new ArrayList<>();
        for (int p = 0; p < durations.length; p++) {
            int slot = 0;
            for (int i = 1; i < slots; i++) {
                if (free[i] < free[slot]) {
                    slot = i;
                }
            }
            StageStats.Task t = new StageStats.Task();
            t.durationMs = durations[p];
            t.finishMs = free[slot] + durations[p];
            t.partition = p;
            t.executorId = Integer.toString(slot);
            t.host = "host-" + slot;
            free[slot] = t.finishMs;
            tasks.add(t);
        }
        tasks.sort(Comparator.comparingLong(t -> t.finishMs));
        StageStats s = new StageStats(1, 0, 0, "stage", durations.length, null, null, null);
        long end = 0;
        for (StageStats.Task t : tasks) {
            s.record(TaskOutcome.SUCCEEDED, t);
            end = Math.max(end, t.finishMs);
        }
        return new Run(s, end + 5);
    }

    static long[] uniform(int n, long ms, int jitter, long seed) {
        Random r = new Random(seed);
        long[] d = new long[n];
        for (int i = 0; i < n; i++) {
            d[i] = ms + (jitter == 0 ? 0 : r.nextInt(jitter));
        }
        return d;
    }

    @Test
    void defaults_are_ratio_3_four_tasks_and_two_seconds() {
        assertEquals(3.0, rule.ratio);
        assertEquals(4, rule.minTasks);
        assertEquals(2000, rule.minExcessMs);
    }

    @Test
    void small_stage_held_up_by_one_skewed_partition_is_flagged() {
        long[] d = uniform(8, 300, 50, 1);
        d[0] = 6000;
        Run r = run(2, d);
        assertTrue(r.flaggedBy(rule));
        assertEquals(0, r.stats.slowest().partition);
    }

    @Test
    void big_stage_whose_last_tasks_are_far_behind_is_flagged() {
        long[] d = uniform(1000, 100, 20, 2);
        d[999] = 10_000; // starts in the last wave and runs long after the rest
        Run r = run(8, d);
        assertTrue(r.flaggedBy(rule));
        assertEquals(999, r.stats.slowest().partition);
    }

    @Test
    void slow_task_early_in_a_multi_wave_stage_delays_nothing_and_is_not_flagged() {
        long[] d = uniform(120, 100, 10, 3);
        d[0] = 2500; // 25x the median, 2.4 s longer, but the other slot works on meanwhile
        Run r = run(2, d);
        assertTrue(r.stats.maxMs() >= 3 * r.stats.p50Ms() && r.stats.maxMs() - r.stats.p50Ms() >= 2000,
                "the old max/median rule would flag it");
        assertFalse(r.flaggedBy(rule));
    }

    @Test
    void large_uniform_stage_is_not_flagged_although_its_slowest_task_grows_with_its_size() {
        Random random = new Random(4);
        long[] d = new long[5000];
        for (int i = 0; i < d.length; i++) {
            d[i] = (long) (1000 * Math.exp(random.nextGaussian() * 0.35)); // log-normal around 1 s
        }
        Run r = run(16, d);
        assertTrue(r.stats.maxMs() >= 3 * r.stats.p50Ms(), "max " + r.stats.maxMs() + " vs median "
                + r.stats.p50Ms() + ": the old rule would flag it");
        assertFalse(r.flaggedBy(rule));
    }

    @Test
    void stage_with_evenly_spread_tasks_is_not_a_straggler() {
        assertFalse(run(4, uniform(500, 4000, 2000, 5)).flaggedBy(rule));
    }

    @Test
    void small_stage_is_never_a_straggler() {
        Run r = run(3, new long[] {100, 100, 60_000});
        assertFalse(r.flaggedBy(rule));
    }

    @Test
    void short_tasks_are_not_stragglers_however_large_the_ratio() {
        long[] d = uniform(50, 10, 0, 6);
        d[49] = 900; // 90x the median but under 2 s longer
        assertFalse(run(4, d).flaggedBy(rule));
    }

    @Test
    void long_stage_with_moderate_spread_is_not_a_straggler() {
        long[] d = uniform(50, 60_000, 0, 7);
        d[49] = 150_000; // 90 s longer, but only 2.5x
        assertFalse(run(4, d).flaggedBy(rule));
    }

    @Test
    void thresholds_are_configurable() {
        long[] d = uniform(10, 1000, 0, 8);
        d[9] = 2500;
        Run r = run(10, d);
        assertFalse(r.flaggedBy(rule));
        assertTrue(r.flaggedBy(new StragglerRule(2.0, 4, 1000)));
    }
}
