package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** From lifecycle calls to the lines Grafana's annotation queries read. */
class AnnotationRecorderTest {

    private final List<String> lines = new ArrayList<>();
    private final List<String> warnings = new ArrayList<>();

    private AnnotationRecorder recorder(boolean runningPoints, int maxStages) {
        return new AnnotationRecorder(lines::add, () -> "app-20260101-0001", runningPoints,
                StragglerRule.defaults(), maxStages, warnings::add);
    }

    @Test
    void finished_query_is_one_point_at_its_start_with_end_time_and_duration() {
        AnnotationRecorder r = recorder(false, 10);
        r.queryStarted(3, 1_000, "SELECT \"a\", b\nFROM t");
        r.queryEnded(3, 13_300, null);
        assertEquals(1, lines.size());
        assertEquals("sparkscope_query,applicationid=app-20260101-0001,execution_id=3,status=SUCCEEDED "
                + "description=\"SELECT \\\"a\\\", b\\\\nFROM t\",end_time_ms=13300i,duration_ms=12300i,"
                + "text=\"query 3: SELECT \\\"a\\\", b FROM t (12.3 s)\" 1000", lines.get(0));
    }

    @Test
    void failed_query_carries_its_error() {
        AnnotationRecorder r = recorder(false, 10);
        r.queryStarted(4, 1_000, "q");
        r.queryEnded(4, 1_500, "AnalysisException: no such table\n at stack");
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        assertEquals("FAILED", p.tags.get("status"));
        assertEquals("AnalysisException: no such table\\n at stack", p.fields.get("error"));
        assertEquals("query 4 FAILED: q (500 ms): AnalysisException: no such table", p.fields.get("text"));
    }

    @Test
    void running_points_are_written_at_start_when_enabled() {
        AnnotationRecorder r = recorder(true, 10);
        r.jobStarted(5, 2_000, "nightly load", "etl", 3L);
        assertEquals(1, lines.size());
        assertEquals("sparkscope_job,applicationid=app-20260101-0001,job_group=etl,job_id=5,status=RUNNING "
                + "description=\"nightly load\",execution_id=3i,text=\"job 5 running [group etl]: nightly load\" 2000",
                lines.get(0));
        r.jobEnded(5, 3_000, true, null);
        assertEquals("sparkscope_job,applicationid=app-20260101-0001,job_group=etl,job_id=5,status=SUCCEEDED "
                + "description=\"nightly load\",execution_id=3i,end_time_ms=3000i,duration_ms=1000i,"
                + "text=\"job 5 [group etl]: nightly load (1.0 s)\" 2000", lines.get(1));
    }

    @Test
    void job_without_group_or_description_omits_them() {
        AnnotationRecorder r = recorder(false, 10);
        r.jobStarted(6, 2_000, null, null, null);
        r.jobEnded(6, 2_250, false, "boom");
        assertEquals("sparkscope_job,applicationid=app-20260101-0001,job_id=6,status=FAILED "
                + "end_time_ms=2250i,duration_ms=250i,error=\"boom\",text=\"job 6 FAILED: (no description) (250 ms): boom\" 2000",
                lines.get(0));
    }

    @Test
    void stage_with_one_slow_task_is_flagged_straggler_with_where_it_ran() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(7, 1, "count at job.py:12", 8, 10_000);
        for (int i = 0; i < 7; i++) {
            r.taskEnded(7, 1, true, 400 + i, 10 + i, 2, "1", "10.0.0.1");
        }
        r.taskEnded(7, 1, true, 5400, 90, 40, "2", "10.0.0.2");
        r.stageCompleted(7, 1, "count at job.py:12", 8, 10_000L, 16_000L, null, 99_999);
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        assertEquals("sparkscope_stage", p.measurement);
        assertEquals(10_000, p.time);
        assertEquals("7", p.tags.get("stage_id"));
        assertEquals("1", p.tags.get("attempt"));
        assertEquals("SUCCEEDED", p.tags.get("status"));
        assertEquals("true", p.tags.get("straggler"));
        assertEquals("16000i", p.fields.get("end_time_ms"));
        assertEquals("6000i", p.fields.get("duration_ms"));
        assertEquals("8i", p.fields.get("task_count_seen"));
        assertEquals("5400i", p.fields.get("task_max_ms"));
        assertEquals("402i", p.fields.get("task_p50_ms")); // 400..403 share a 4 ms bucket: midpoint
        assertEquals("90i", p.fields.get("gc_max_ms"));
        assertEquals("40i", p.fields.get("fetch_wait_max_ms"));
        assertEquals("13.43", p.fields.get("skew_ratio"));
        assertEquals("2", p.fields.get("slowest_executor"));
        assertEquals("10.0.0.2", p.fields.get("slowest_host"));
        assertEquals("stage 7.1: count at job.py:12 (6.0 s, 8 tasks, median task 402 ms); STRAGGLER: slowest task "
                + "5.4 s = 13.4x the median, on executor 2 (host 10.0.0.2)", p.fields.get("text"));
        assertEquals(0, r.trackedStages(), "stage state is freed at completion");
    }

    @Test
    void even_stage_is_not_a_straggler() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(1, 0, "map", 8, 0);
        for (int i = 0; i < 8; i++) {
            r.taskEnded(1, 0, true, 3000 + 10 * i, 0, 0, "1", "h");
        }
        r.stageCompleted(1, 0, "map", 8, 0L, 4000L, null, 5000);
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        assertEquals("false", p.tags.get("straggler"));
        assertFalse(p.fields.get("text").contains("STRAGGLER"));
    }

    @Test
    void failed_stage_has_failure_reason_and_is_never_a_straggler() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(2, 0, "map", 4, 0);
        for (int i = 0; i < 4; i++) {
            r.taskEnded(2, 0, true, i == 0 ? 60_000 : 10, 0, 0, "1", "h");
        }
        r.taskEnded(2, 0, false, 5, 0, 0, "1", "h");
        r.stageCompleted(2, 0, "map", 4, 0L, 61_000L, "Task failed\nstack", 0);
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        assertEquals("FAILED", p.tags.get("status"));
        assertEquals("false", p.tags.get("straggler"));
        assertEquals("Task failed\\nstack", p.fields.get("failure_reason"));
        assertEquals("1i", p.fields.get("task_failed_count"));
    }

    @Test
    void stage_without_finished_tasks_omits_task_statistics() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageCompleted(9, 0, "never submitted", 3, null, null, null, 42_000);
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        assertEquals(42_000, p.time);
        assertEquals("0i", p.fields.get("task_count_seen"));
        assertNull(p.fields.get("task_max_ms"));
        assertNull(p.fields.get("skew_ratio"));
    }

    @Test
    void tracked_stages_are_capped_and_the_oldest_is_dropped_with_one_warning() {
        AnnotationRecorder r = recorder(false, 3);
        for (int s = 0; s < 10; s++) {
            r.stageSubmitted(s, 0, "s" + s, 1, s);
        }
        assertEquals(3, r.trackedStages());
        assertEquals(1, warnings.size());
        assertTrue(warnings.get(0).contains(AnnotatorConfig.MAX_TRACKED_STAGES));
        r.taskEnded(0, 0, true, 100, 0, 0, "1", "h"); // evicted stage: ignored
        r.taskEnded(9, 0, true, 100, 0, 0, "1", "h");
        r.stageCompleted(9, 0, "s9", 1, 9L, 200L, null, 0);
        assertEquals("1i", InfluxLineReader.read(lines.get(0)).fields.get("task_count_seen"));
        assertEquals(2, r.trackedStages());
    }

    @Test
    void late_task_of_a_completed_stage_creates_no_state() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(1, 0, "s", 1, 0);
        r.stageCompleted(1, 0, "s", 1, 0L, 10L, null, 10);
        r.taskEnded(1, 0, false, 5, 0, 0, "1", "h");
        assertEquals(0, r.trackedStages());
    }

    @Test
    void application_point_spans_the_whole_run() {
        AnnotationRecorder r = recorder(true, 10);
        r.applicationStarted(1_000, "etl nightly", "alice", "3.5.9");
        r.applicationEnded(64_000, null);
        assertEquals("sparkscope_application,applicationid=app-20260101-0001,status=RUNNING app_name=\"etl nightly\","
                + "spark_user=\"alice\",spark_version=\"3.5.9\",text=\"application etl nightly started\" 1000", lines.get(0));
        assertEquals("sparkscope_application,applicationid=app-20260101-0001,status=FINISHED app_name=\"etl nightly\","
                + "spark_user=\"alice\",spark_version=\"3.5.9\",end_time_ms=64000i,duration_ms=63000i,"
                + "text=\"application etl nightly finished after 1 min 3 s\" 1000", lines.get(1));
    }

    @Test
    void executor_events_are_points_at_their_time() {
        AnnotationRecorder r = recorder(true, 10);
        r.executorAdded(5_000, "1", "10.0.0.9", 4);
        r.executorRemoved(9_000, "1", "Executor killed, \"idle\"");
        assertEquals("sparkscope_executor,applicationid=app-20260101-0001,event=added,executor_id=1 "
                + "host=\"10.0.0.9\",cores=4i,text=\"executor 1 added on 10.0.0.9 (4 cores)\" 5000", lines.get(0));
        assertEquals("sparkscope_executor,applicationid=app-20260101-0001,event=removed,executor_id=1 "
                + "reason=\"Executor killed, \\\"idle\\\"\",text=\"executor 1 removed: Executor killed, \\\"idle\\\"\" 9000",
                lines.get(1));
    }

    @Test
    void long_descriptions_are_cut_without_splitting_characters() {
        AnnotationRecorder r = recorder(false, 10);
        StringBuilder sql = new StringBuilder();
        while (sql.length() < 5000) {
            sql.append("😀 SELECT ");
        }
        r.queryStarted(1, 0, sql.toString());
        r.queryEnded(1, 1, null);
        InfluxLineReader p = InfluxLineReader.read(lines.get(0));
        String d = p.fields.get("description");
        assertTrue(d.length() <= AnnotationRecorder.MAX_DESCRIPTION, "length " + d.length());
        assertTrue(d.endsWith("…"));
        assertFalse(Character.isHighSurrogate(d.charAt(d.length() - 2)));
        assertTrue(p.fields.get("text").length() < 400);
    }
}
