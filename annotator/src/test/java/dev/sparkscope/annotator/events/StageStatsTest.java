package dev.sparkscope.annotator.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

class StageStatsTest {

    private static StageStats.Task task(long ms, long gc, long fetchWait, String executor, String host) {
        StageStats.Task t = AnnotationRecorderTest.task(ms, ms, 0, executor);
        t.gcMs = gc;
        t.fetchWaitMs = fetchWait;
        t.host = host;
        return t;
    }

    /** The stage after these tasks ended with this outcome, in order. */
    private static StageStats ended(StageStats s, TaskOutcome outcome, StageStats.Task... tasks) {
        for (StageStats.Task t : tasks) {
            s.record(outcome, t);
        }
        return s;
    }

    @Test
    void slowest_task_keeps_its_own_gc_and_fetch_wait_not_the_stage_maxima() {
        StageStats s = ended(new StageStats(3, 0, 0), TaskOutcome.SUCCEEDED,
                task(100, 5, 0, "1", "host-a"), task(900, 1, 7, "2", "host-b"), task(200, 50, 30, "3", "host-c"));
        assertEquals(900, s.maxMs());
        assertEquals("2", s.slowest().executorId);
        assertEquals("host-b", s.slowest().host);
        assertEquals(1, s.slowest().gcMs);
        assertEquals(7, s.slowest().fetchWaitMs);
    }

    @Test
    void failed_killed_and_resubmitted_tasks_are_counted_apart_and_kept_out_of_the_distribution() {
        StageStats s = ended(new StageStats(1, 0, 0), TaskOutcome.SUCCEEDED, task(100, 0, 0, "1", "h"));
        ended(s, TaskOutcome.FAILED, task(5000, 0, 0, "1", "h"), task(5000, 0, 0, "1", "h"));
        ended(s, TaskOutcome.KILLED, task(7000, 0, 0, "1", "h"));
        ended(s, TaskOutcome.RESUBMITTED, task(100, 0, 0, "1", "h"));
        assertEquals(1, s.taskCount());
        assertEquals(2, s.failedTaskCount());
        assertEquals(1, s.killedTaskCount());
        assertEquals(1, s.resubmittedTaskCount());
        assertEquals(100, s.maxMs());
    }

    @Test
    void the_time_95_percent_of_tasks_were_done_is_the_finish_of_that_success() {
        StageStats s = new StageStats(1, 0, 0, "s", 40, null, null, null);
        for (int i = 1; i <= 40; i++) {
            s.record(TaskOutcome.SUCCEEDED, AnnotationRecorderTest.task(10, i * 100L, i, "1"));
        }
        assertEquals(3800L, s.finishOf95PercentMs()); // the 38th of 40
    }

    @Test
    void percentiles_of_a_known_distribution_are_exact_below_128_ms() {
        StageStats s = new StageStats(1, 0, 0);
        for (int ms = 1; ms <= 100; ms++) {
            s.record(TaskOutcome.SUCCEEDED, task(ms, 0, 0, "1", "h"));
        }
        assertEquals(50, s.p50Ms());
        assertEquals(75, s.p75Ms());
        assertEquals(95, s.p95Ms());
        assertEquals(100, s.maxMs());
        assertEquals(2.0, s.skewRatio(), 1e-9);
    }

    @Test
    void skew_ratio_of_zero_ms_tasks_stays_finite() {
        StageStats s = ended(new StageStats(1, 0, 0), TaskOutcome.SUCCEEDED,
                task(0, 0, 0, "1", "h"), task(0, 0, 0, "1", "h"), task(30, 0, 0, "2", "h"));
        assertEquals(30.0, s.skewRatio(), 1e-9);
    }

    @Test
    void stage_without_tasks_has_no_slowest_task() {
        StageStats s = new StageStats(1, 0, 0);
        assertEquals(0, s.taskCount());
        assertNull(s.slowest());
        assertNull(s.finishOf95PercentMs());
        assertEquals(0.0, s.skewRatio());
        assertEquals(0, s.allocatedBytes());
    }
}
