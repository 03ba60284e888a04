package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class StageStatsTest {

    @Test
    void slowest_task_remembers_its_executor_and_host() {
        StageStats s = new StageStats(3, 0, 0);
        s.recordTask(100, 5, 0, "1", "host-a");
        s.recordTask(900, 1, 7, "2", "host-b");
        s.recordTask(200, 50, 3, "3", "host-c");
        assertEquals(900, s.maxMs());
        assertEquals("2", s.slowestExecutor());
        assertEquals("host-b", s.slowestHost());
        assertEquals(50, s.gcMaxMs());
        assertEquals(7, s.fetchWaitMaxMs());
    }

    @Test
    void failed_tasks_are_counted_but_kept_out_of_the_distribution() {
        StageStats s = new StageStats(1, 0, 0);
        s.recordTask(100, 0, 0, "1", "h");
        s.recordFailedTask();
        s.recordFailedTask();
        assertEquals(1, s.taskCount());
        assertEquals(2, s.failedTaskCount());
        assertEquals(100, s.maxMs());
    }

    @Test
    void percentiles_of_a_known_distribution_are_exact_below_128_ms() {
        StageStats s = new StageStats(1, 0, 0);
        for (int ms = 1; ms <= 100; ms++) {
            s.recordTask(ms, 0, 0, "1", "h");
        }
        assertEquals(50, s.p50Ms());
        assertEquals(75, s.p75Ms());
        assertEquals(95, s.p95Ms());
        assertEquals(100, s.maxMs());
        assertEquals(2.0, s.skewRatio(), 1e-9);
    }

    @Test
    void skew_ratio_of_zero_ms_tasks_stays_finite() {
        StageStats s = new StageStats(1, 0, 0);
        s.recordTask(0, 0, 0, "1", "h");
        s.recordTask(0, 0, 0, "1", "h");
        s.recordTask(30, 0, 0, "2", "h");
        assertEquals(30.0, s.skewRatio(), 1e-9);
    }

    @Test
    void stage_without_tasks_has_no_slowest_task() {
        StageStats s = new StageStats(1, 0, 0);
        assertEquals(0, s.taskCount());
        assertNull(s.slowestExecutor());
        assertEquals(0.0, s.skewRatio());
        assertTrue(s.allocatedBytes() == 0);
    }
}
