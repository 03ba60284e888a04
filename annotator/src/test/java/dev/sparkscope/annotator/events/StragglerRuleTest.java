package dev.sparkscope.annotator.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

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

    /** The durations with the one at index i set to ms. */
    static long[] slowAt(long[] durations, int i, long ms) {
        durations[i] = ms;
        return durations;
    }

    /** Stragglers: why, slots, task durations in partition order, and the partition that held the stage up. */
    static Stream<Arguments> stragglers() {
        return Stream.of(
                Arguments.of("small stage held up by one skewed partition", 2,
                        slowAt(uniform(8, 300, 50, 1), 0, 6000), 0),
                Arguments.of("big stage whose last task starts in the last wave and runs long after the rest", 8,
                        slowAt(uniform(1000, 100, 20, 2), 999, 10_000), 999));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("stragglers")
    void straggler_is_flagged_with_its_slowest_partition(String why, int slots, long[] durations, int slowest) {
        Run r = run(slots, durations);
        assertTrue(r.flaggedBy(rule));
        assertEquals(slowest, r.stats.slowest().partition);
    }

    /** Stages that are not stragglers: why, slots, task durations in partition order. */
    static Stream<Arguments> notStragglers() {
        return Stream.of(
                Arguments.of("stage with evenly spread tasks", 4, uniform(500, 4000, 2000, 5)),
                Arguments.of("small stage, however slow its slowest task", 3, new long[] {100, 100, 60_000}),
                Arguments.of("short tasks however large the ratio: 90x the median but under 2 s longer", 4,
                        slowAt(uniform(50, 10, 0, 6), 49, 900)),
                Arguments.of("long stage with moderate spread: 90 s longer but only 2.5x", 4,
                        slowAt(uniform(50, 60_000, 0, 7), 49, 150_000)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("notStragglers")
    void is_not_a_straggler(String why, int slots, long[] durations) {
        assertFalse(run(slots, durations).flaggedBy(rule));
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
    void thresholds_are_configurable() {
        long[] d = uniform(10, 1000, 0, 8);
        d[9] = 2500;
        Run r = run(10, d);
        assertFalse(r.flaggedBy(rule));
        assertTrue(r.flaggedBy(new StragglerRule(2.0, 4, 1000)));
    }
}
