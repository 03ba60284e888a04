package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.junit.jupiter.api.Test;

class StragglerRuleTest {

    private final StragglerRule rule = StragglerRule.defaults();

    @Test
    void defaults_are_ratio_3_four_tasks_and_two_seconds() {
        assertEquals(3.0, rule.ratio);
        assertEquals(4, rule.minTasks);
        assertEquals(2000, rule.minExcessMs);
    }

    @Test
    void stage_with_one_slow_task_among_many_is_flagged_straggler() {
        StageStats s = stage(200, 1000, 30);
        s.recordTask(9000, 0, 0, "7", "slow-host");
        assertTrue(rule.isStraggler(s));
        assertEquals("7", s.slowestExecutor());
    }

    @Test
    void stage_with_evenly_spread_tasks_is_not_a_straggler() {
        Random r = new Random(5);
        StageStats s = new StageStats(1, 0, 0);
        for (int i = 0; i < 500; i++) {
            s.recordTask(4000 + r.nextInt(2000), 0, 0, "1", "h");
        }
        assertFalse(rule.isStraggler(s));
    }

    @Test
    void small_stage_is_never_a_straggler() {
        StageStats s = stage(2, 100, 0);
        s.recordTask(60_000, 0, 0, "1", "h");
        assertEquals(3, s.taskCount());
        assertFalse(rule.isStraggler(s));
    }

    @Test
    void short_tasks_are_not_stragglers_however_large_the_ratio() {
        StageStats s = stage(50, 10, 0);
        s.recordTask(900, 0, 0, "1", "h"); // 90x the median but under 2 s longer
        assertFalse(rule.isStraggler(s));
    }

    @Test
    void long_stage_with_moderate_spread_is_not_a_straggler() {
        StageStats s = stage(50, 60_000, 0);
        s.recordTask(150_000, 0, 0, "1", "h"); // 90 s longer, but only 2.5x
        assertFalse(rule.isStraggler(s));
    }

    @Test
    void thresholds_are_configurable() {
        StageStats s = stage(10, 1000, 0);
        s.recordTask(2500, 0, 0, "1", "h");
        assertFalse(rule.isStraggler(s));
        assertTrue(new StragglerRule(2.0, 4, 1000).isStraggler(s));
    }

    /** n tasks of about base ms (plus up to jitter ms). */
    private static StageStats stage(int n, long base, int jitter) {
        Random r = new Random(n);
        StageStats s = new StageStats(1, 0, 0);
        for (int i = 0; i < n; i++) {
            s.recordTask(base + (jitter == 0 ? 0 : r.nextInt(jitter)), 0, 0, "1", "h");
        }
        return s;
    }
}
