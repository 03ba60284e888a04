package dev.sparkscope.annotator.events;

import dev.sparkscope.annotator.core.InfluxLineReader;
import dev.sparkscope.annotator.core.Text;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

/** From lifecycle calls to the lines Grafana's annotation queries read. */
class AnnotationRecorderTest {

    private static final long MS = 1_000_000L;
    private static final String APP_ID = "app-20260101-0001";
    private final List<String> lines = new ArrayList<>();
    private final List<String> warnings = new ArrayList<>();

    private AnnotationRecorder recorder(boolean runningPoints, int maxStages) {
        return new AnnotationRecorder(lines::add, () -> APP_ID, runningPoints,
                StragglerRule.defaults(), maxStages, warnings::add);
    }

    static StageStats.Task task(long durationMs, long finishMs, int partition, String executor) {
        StageStats.Task t = new StageStats.Task();
        t.durationMs = durationMs;
        t.finishMs = finishMs;
        t.partition = partition;
        t.executorId = executor;
        t.host = "10.0.0." + executor;
        return t;
    }

    private InfluxLineReader line(int i) {
        return InfluxLineReader.read(lines.get(i));
    }

    /** Asserts line i to the letter: measurement, its tag after applicationid, its fields, its time (ns). */
    private void assertLine(int i, String measurement, String tag, String fields, long timeNs) {
        assertEquals(measurement + ",applicationid=" + APP_ID + "," + tag + " " + fields + " " + timeNs, lines.get(i));
    }

    @Test
    void finished_query_is_one_point_at_its_start_with_its_id_as_a_field() {
        AnnotationRecorder r = recorder(false, 10);
        r.queryStarted(3, 1_000, "SELECT \"a\", b\nFROM t");
        r.queryEnded(3, 13_300, null);
        assertEquals(1, lines.size());
        assertLine(0, "sparkscope_query", "status=SUCCEEDED", "execution_id=3i,description=\"SELECT \\\"a\\\", b\nFROM t\","
                + "end_time_ms=13300i,duration_ms=12300i,text=\"query 3: SELECT \\\"a\\\", b FROM t (12.3 s)\"", 1000 * MS + 3);
    }

    @Test
    void failed_query_carries_its_error() {
        AnnotationRecorder r = recorder(false, 10);
        r.queryStarted(4, 1_000, "q");
        r.queryEnded(4, 1_500, "AnalysisException: no such table\n at stack");
        InfluxLineReader p = line(0);
        assertEquals("FAILED", p.tags.get("status"));
        assertEquals("AnalysisException: no such table\n at stack", p.fields.get("error"));
        assertEquals("query 4 FAILED: q (500 ms): AnalysisException: no such table", p.fields.get("text"));
    }

    @Test
    void running_points_carry_ids_but_not_the_description_again() {
        AnnotationRecorder r = recorder(true, 10);
        r.jobStarted(5, 2_000, "nightly load", null, null, "etl", 3L, new int[0]);
        assertLine(0, "sparkscope_job", "status=RUNNING",
                "job_id=5i,execution_id=3i,text=\"job 5 running [group etl]: nightly load\"", 2000 * MS + 5);
        r.jobEnded(5, 3_000, true, null);
        assertLine(1, "sparkscope_job", "status=SUCCEEDED", "job_id=5i,task_ms=0i,task_count=0i,job_group=\"etl\","
                + "description=\"nightly load\","
                + "execution_id=3i,end_time_ms=3000i,duration_ms=1000i,text=\"job 5 [group etl]: nightly load (1.0 s)\"",
                2000 * MS + 5);
    }

    @Test
    void tags_are_only_what_dashboards_select_by_so_series_do_not_grow_with_ids() {
        AnnotationRecorder r = recorder(true, 10);
        Set<String> series = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            r.queryStarted(i, i * 1000L, "q" + i);
            r.jobStarted(i, i * 1000L, null, null, "stage " + i, "group-" + java.util.UUID.randomUUID(),
                    (long) i, new int[] {i});
            r.stageSubmitted(i, 0, "s", 1, i * 1000L);
            r.taskEnded(i, 0, TaskOutcome.SUCCEEDED, task(10, i * 1000L + 10, 0, "1"));
            r.stageCompleted(i, 0, "s", 1, i * 1000L, i * 1000L + 11, null, 0);
            r.jobEnded(i, i * 1000L + 12, true, null);
            r.queryEnded(i, i * 1000L + 13, null);
            r.executorAdded(i * 1000L, Integer.toString(i), "h", 1);
        }
        for (String l : lines) {
            series.add(l.substring(0, l.indexOf(' ')));
        }
        // query, job, stage: RUNNING and SUCCEEDED (stages with straggler=false); executors: added
        assertEquals(7, series.size(), series.toString());
        assertEquals(0, r.stageOwnersHeld(), "nothing is kept for ended jobs");
        assertEquals(0, r.trackedStages());
    }

    @Test
    void entities_starting_in_the_same_millisecond_get_distinct_timestamps() {
        AnnotationRecorder r = recorder(false, 100);
        Set<String> keys = new HashSet<>();
        for (int s = 0; s < 50; s++) {
            r.stageSubmitted(s, 0, "parallel", 1, 7_000);
            r.stageCompleted(s, 0, "parallel", 1, 7_000L, 8_000L, null, 0);
            r.stageSubmitted(s, 1, "retry", 1, 7_000);
            r.stageCompleted(s, 1, "retry", 1, 7_000L, 8_000L, null, 0);
        }
        for (String l : lines) {
            InfluxLineReader p = InfluxLineReader.read(l);
            assertEquals(7_000, p.time / MS, "start millisecond kept");
            keys.add(p.tags + " " + p.time);
        }
        assertEquals(100, keys.size(), "no point overwrites another");
    }

    @Test
    void job_sums_its_tasks_time_and_names_its_connect_user_as_a_tag_and_session_and_operation_as_fields() {
        AnnotationRecorder r = recorder(false, 10);
        ConnectOwner.Operations ops = new ConnectOwner.Operations();
        String session = "6f1c3c53-9d1e-4b4a-a2a4-6b0c8d0e6a11";
        String operation = "0b6c2a5e-1f3d-4c55-9a43-0a7e5d2f9c10";
        String tag = "SparkConnect_OperationTag_User_al_ice_Session_" + session + "_Operation_" + operation;
        // Read from the tag alone (no start event seen): the user keeps its underscore.
        ConnectOwner parsed = ops.ofJob("spark-session-1," + tag + ",nightly");
        assertEquals("al_ice", parsed.user);
        assertEquals(session, parsed.session);
        assertEquals(operation, parsed.operation);
        // From the operation's start event when it was seen: its ids as given.
        ops.started(tag, "al_ice", session, operation);
        assertEquals(1, ops.held());
        r.jobStarted(9, 100, "q", null, null, null, null, new int[] {3}, ops.ofJob(tag));
        assertEquals(null, ops.ofJob("spark-session-1,other"));
        ops.closed(tag);
        assertEquals(0, ops.held());
        r.jobStarted(10, 100, "plain", null, null, null, null, new int[] {4});
        r.stageSubmitted(3, 0, "collect", 2, 110);
        StageStats.Task a = task(40, 160, 0, "1");
        StageStats.Task b = task(65, 180, 1, "2");
        r.taskEnded(3, 0, TaskOutcome.SUCCEEDED, a);
        r.taskEnded(3, 0, TaskOutcome.FAILED, b);
        StageStats.Task other = task(900, 990, 0, "1");
        r.taskEnded(4, 0, TaskOutcome.SUCCEEDED, other); // stage 4 never submitted: still its job's
        r.stageCompleted(3, 0, "collect", 2, 110L, 190L, null, 0);
        r.jobEnded(9, 200, true, null);
        r.jobEnded(10, 1000, true, null);
        InfluxLineReader job = line(1);
        assertEquals("al_ice", job.tags.get("connect_user"));
        job.assertFields("task_ms", "105i", "task_count", "2i", "connect_session", session,
                "connect_operation", operation);
        InfluxLineReader plain = line(2);
        assertFalse(plain.tags.containsKey("connect_user"));
        assertFalse(plain.fields.containsKey("connect_session"));
        plain.assertFields("task_ms", "900i", "task_count", "1i");
    }

    @Test
    void job_without_description_is_named_after_its_sql_query_then_its_last_stage() {
        AnnotationRecorder r = recorder(false, 10);
        r.queryStarted(8, 100, "SELECT count(*) FROM sales");
        r.jobStarted(1, 200, null, null, "count at Sales.scala:12", null, 8L, new int[] {3, 4});
        r.jobStarted(2, 300, null, null, "reduce at SparkPi.scala:38", null, null, new int[] {5});
        r.jobStarted(3, 300, "", "collect at job.py:9", "collect at NativeMethodAccessorImpl.java:0", null, null,
                new int[0]);
        r.jobEnded(1, 400, true, null);
        r.jobEnded(2, 400, true, null);
        r.jobEnded(3, 400, true, null);
        assertEquals("SELECT count(*) FROM sales", line(0).fields.get("description"));
        assertEquals("reduce at SparkPi.scala:38", line(1).fields.get("description"));
        assertEquals("collect at job.py:9", line(2).fields.get("description"));
    }

    @Test
    void stage_names_the_job_and_query_it_belongs_to() {
        AnnotationRecorder r = recorder(false, 10);
        r.jobStarted(4, 100, "nightly skewed join", null, null, null, 2L, new int[] {6, 7});
        r.stageSubmitted(7, 0, "sum at job.py:26", 2, 150);
        r.stageCompleted(7, 0, "sum at job.py:26", 2, 150L, 250L, null, 0);
        InfluxLineReader p = line(0);
        p.assertFields("job_id", "4i", "execution_id", "2i", "job_description", "nightly skewed join");
        assertTrue(p.fields.get("text").startsWith("stage 7.0: sum at job.py:26 [job 4: nightly skewed join] (100 ms"),
                p.fields.get("text"));
    }

    @Test
    void stage_with_one_slow_task_is_flagged_straggler_with_that_tasks_own_details() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(7, 1, "count at job.py:12", 8, 10_000);
        for (int i = 0; i < 7; i++) {
            StageStats.Task t = task(400 + i, 10_500 + i, i + 1, "1");
            t.inputBytes = 1000;
            t.gcMs = 80; // a busier GC elsewhere must not be reported for the slowest task
            r.taskEnded(7, 1, TaskOutcome.SUCCEEDED, t);
        }
        StageStats.Task slow = task(5400, 15_900, 0, "2");
        slow.inputBytes = 10_000;
        slow.gcMs = 12;
        slow.fetchWaitMs = 40;
        r.taskEnded(7, 1, TaskOutcome.SUCCEEDED, slow);
        r.stageCompleted(7, 1, "count at job.py:12", 8, 10_000L, 16_000L, null, 99_999);
        InfluxLineReader p = line(0);
        assertEquals("sparkscope_stage", p.measurement);
        assertEquals(10_000 * MS + 7 * 16 + 1, p.time);
        assertEquals("SUCCEEDED", p.tags.get("status"));
        assertEquals("true", p.tags.get("straggler"));
        p.assertFields("stage_id", "7i", "attempt", "1i", "duration_ms", "6000i", "task_count_seen", "8i",
                "task_max_ms", "5400i", "task_p50_ms", "402i", // 400..403 share a 4 ms bucket: midpoint
                "slowest_partition", "0i", "slowest_executor", "2", "slowest_host", "10.0.0.2", "slowest_gc_ms", "12i",
                "slowest_fetch_wait_ms", "40i", "slowest_input_bytes", "10000i", "task_mean_input_bytes", "2125i");
        assertEquals("stage 7.1: count at job.py:12 (6.0 s, 8 tasks, median task 402 ms); STRAGGLER: slowest task "
                + "5.4 s = 13.4x the median, partition 0 on executor 2 (host 10.0.0.2), read 9.8 KiB = 4.7x the "
                + "average task, GC 12 ms, fetch wait 40 ms", p.fields.get("text"));
        assertEquals(0, r.trackedStages(), "stage state is freed at completion");
    }

    @Test
    void even_stage_is_not_a_straggler() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(1, 0, "map", 8, 0);
        for (int i = 0; i < 8; i++) {
            r.taskEnded(1, 0, TaskOutcome.SUCCEEDED, task(3000 + 10 * i, 3000 + 10 * i, i, "1"));
        }
        r.stageCompleted(1, 0, "map", 8, 0L, 4000L, null, 5000);
        InfluxLineReader p = line(0);
        assertEquals("false", p.tags.get("straggler"));
        assertFalse(p.fields.get("text").contains("STRAGGLER"));
    }

    @Test
    void resubmitted_and_killed_tasks_are_neither_successes_nor_failures() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(2, 0, "map", 4, 0);
        for (int i = 0; i < 4; i++) {
            r.taskEnded(2, 0, TaskOutcome.SUCCEEDED, task(100, 100, i, "1"));
        }
        r.taskEnded(2, 0, TaskOutcome.RESUBMITTED, task(100, 100, 0, "1")); // executor 1 lost its output
        r.taskEnded(2, 0, TaskOutcome.SUCCEEDED, task(120, 300, 0, "2"));   // the re-run
        r.taskEnded(2, 0, TaskOutcome.KILLED, task(900, 300, 3, "2"));      // losing speculative copy
        r.stageCompleted(2, 0, "map", 4, 0L, 300L, null, 0);
        InfluxLineReader p = line(0);
        p.assertFields("task_count_seen", "5i", "task_resubmitted_count", "1i", "task_killed_count", "1i",
                "task_failed_count", "0i", "task_max_ms", "120i");
    }

    @Test
    void failed_stage_has_failure_reason_and_is_never_a_straggler() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(2, 0, "map", 4, 0);
        for (int i = 0; i < 4; i++) {
            r.taskEnded(2, 0, TaskOutcome.SUCCEEDED, task(i == 0 ? 60_000 : 10, 60_000, i, "1"));
        }
        r.taskEnded(2, 0, TaskOutcome.FAILED, task(5, 5, 1, "1"));
        r.stageCompleted(2, 0, "map", 4, 0L, 61_000L, "Task failed\nstack", 0);
        InfluxLineReader p = line(0);
        assertEquals("FAILED", p.tags.get("status"));
        assertEquals("false", p.tags.get("straggler"));
        p.assertFields("failure_reason", "Task failed\nstack", "task_failed_count", "1i");
    }

    @Test
    void cancelled_job_and_stage_are_cancelled_not_failed() {
        AnnotationRecorder r = recorder(false, 10);
        r.jobStarted(3, 0, "long", null, null, "g", null, new int[] {1});
        r.stageSubmitted(1, 0, "map", 4, 0);
        r.stageCompleted(1, 0, "map", 4, 0L, 50L, "Job 3 cancelled part of cancelled job group g", 0);
        r.jobEnded(3, 60, false, "Job 3 cancelled part of cancelled job group g");
        assertEquals("CANCELLED", line(0).tags.get("status"));
        assertEquals("CANCELLED", line(1).tags.get("status"));
        assertTrue(line(1).fields.get("text").startsWith("job 3 CANCELLED [group g]: long"), line(1).fields.get("text"));
    }

    @Test
    void work_still_open_when_the_application_ends_gets_a_cancelled_point_with_its_statistics_so_far() {
        AnnotationRecorder r = recorder(true, 10);
        r.applicationStarted(0, "stream", "u", "3.5.9");
        r.queryStarted(1, 100, "streaming batch");
        r.jobStarted(2, 200, null, null, "start at Stream.scala:3", null, 1L, new int[] {4});
        r.stageSubmitted(4, 0, "start at Stream.scala:3", 8, 300);
        for (int i = 0; i < 7; i++) {
            r.taskEnded(4, 0, TaskOutcome.SUCCEEDED, task(50, 400, i, "1"));
        }
        lines.clear();
        r.applicationEnded(9_000, null);
        List<String> kinds = new ArrayList<>();
        for (String l : lines) {
            InfluxLineReader p = InfluxLineReader.read(l);
            kinds.add(p.measurement + "/" + p.tags.get("status"));
            if (!p.measurement.equals("sparkscope_application")) {
                assertEquals("9000i", p.fields.get("end_time_ms"), l);
            }
        }
        assertEquals(java.util.Arrays.asList("sparkscope_stage/CANCELLED", "sparkscope_job/CANCELLED",
                "sparkscope_query/CANCELLED", "sparkscope_application/FINISHED"), kinds);
        line(0).assertFields("task_count_seen", "7i", "duration_ms", "8700i");
        assertEquals("streaming batch", line(1).fields.get("description"));
        assertEquals(0, r.trackedStages());
        lines.clear();
        r.applicationEnded(10_000, null);
        assertEquals(1, lines.size(), "nothing is cancelled twice");
    }

    @Test
    void stage_without_finished_tasks_omits_task_statistics() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageCompleted(9, 0, "never submitted", 3, null, null, null, 42_000);
        InfluxLineReader p = line(0);
        assertEquals(42_000, p.time / MS);
        p.assertFields("task_count_seen", "0i", "task_max_ms", null, "skew_ratio", null);
    }

    @Test
    void tracked_stages_are_capped_and_the_oldest_is_dropped_with_one_warning() {
        AnnotationRecorder r = recorder(false, 3);
        for (int s = 0; s < 10; s++) {
            r.stageSubmitted(s, 0, "s" + s, 1, s);
        }
        assertEquals(3, r.trackedStages());
        assertEquals(1, warnings.size());
        assertTrue(warnings.get(0).contains(EventsConfig.MAX_TRACKED_STAGES));
        r.taskEnded(0, 0, TaskOutcome.SUCCEEDED, task(100, 100, 0, "1")); // evicted stage: ignored
        r.taskEnded(9, 0, TaskOutcome.SUCCEEDED, task(100, 100, 0, "1"));
        r.stageCompleted(9, 0, "s9", 1, 9L, 200L, null, 0);
        assertEquals("1i", line(0).fields.get("task_count_seen"));
        assertEquals(2, r.trackedStages());
    }

    @Test
    void late_task_of_a_completed_stage_creates_no_state() {
        AnnotationRecorder r = recorder(false, 10);
        r.stageSubmitted(1, 0, "s", 1, 0);
        r.stageCompleted(1, 0, "s", 1, 0L, 10L, null, 10);
        r.taskEnded(1, 0, TaskOutcome.FAILED, task(5, 5, 0, "1"));
        assertEquals(0, r.trackedStages());
    }

    @Test
    void application_point_spans_the_whole_run() {
        AnnotationRecorder r = recorder(true, 10);
        r.applicationStarted(1_000, "etl nightly", "alice", "3.5.9");
        r.applicationEnded(64_000, null);
        String app = "app_name=\"etl nightly\",spark_user=\"alice\",spark_version=\"3.5.9\",";
        assertLine(0, "sparkscope_application", "job=etl\\ nightly,status=RUNNING",
                app + "text=\"application etl nightly started\"", 1000 * MS);
        assertLine(1, "sparkscope_application", "job=etl\\ nightly,status=FINISHED", app + "end_time_ms=64000i,duration_ms=63000i,"
                + "text=\"application etl nightly finished after 1 min 3 s\"", 1000 * MS);
    }

    @Test
    void the_job_named_in_the_settings_is_the_tag_of_both_points_of_the_run_on_one_line() {
        AnnotationRecorder r = recorder(true, 10);
        r.applicationStarted(1_000, "etl 2026-11-27", "etl,nightly\n =x", "alice", "3.5.9");
        r.applicationEnded(2_000, null);
        for (String line : lines) {
            assertTrue(line.startsWith("sparkscope_application,applicationid=" + APP_ID
                    + ",job=etl\\,nightly\\ \\=x,status="), line);
            assertTrue(line.contains("app_name=\"etl 2026-11-27\""), line);
        }
    }

    @Test
    void without_a_job_set_the_application_name_is_the_job() {
        AnnotationRecorder r = recorder(true, 10);
        r.applicationStarted(1_000, "etl nightly", null, "alice", "3.5.9");
        r.applicationStarted(1_000, "etl nightly", "  ", "alice", "3.5.9");
        assertTrue(lines.get(0).contains(",job=etl\\ nightly,status=RUNNING "), lines.get(0));
        assertTrue(lines.get(1).contains(",job=etl\\ nightly,status=RUNNING "), lines.get(1));
    }

    @Test
    void executor_events_are_points_at_their_time_with_the_id_as_a_field() {
        AnnotationRecorder r = recorder(true, 10);
        r.executorAdded(5_000, "1", "10.0.0.9", 4);
        r.executorRemoved(9_000, "1", "Executor killed, \"idle\"");
        assertLine(0, "sparkscope_executor", "event=added", "executor_id=\"1\",host=\"10.0.0.9\",cores=4i,"
                + "text=\"executor 1 added on 10.0.0.9 (4 cores)\"", 5000 * MS + 1);
        assertLine(1, "sparkscope_executor", "event=removed", "executor_id=\"1\",reason=\"Executor killed, \\\"idle\\\"\","
                + "cause=\"other\",text=\"executor 1 removed: Executor killed, \\\"idle\\\"\"", 9000 * MS + 1);
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
        InfluxLineReader p = line(0);
        String d = p.fields.get("description");
        assertTrue(d.length() <= Text.MAX_DESCRIPTION, "length " + d.length());
        assertTrue(d.endsWith("…"));
        assertFalse(Character.isHighSurrogate(d.charAt(d.length() - 2)));
        assertTrue(p.fields.get("text").length() < 400);
    }
}
