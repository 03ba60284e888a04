package dev.sparkscope.annotator.streaming;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class StreamingQueriesTest {

    private final List<String> lines = new ArrayList<>();
    private final StreamingQueries queries = new StreamingQueries(lines::add, () -> "app-1", true);

    private static StreamingQueries.Progress batch(long id, long atMs, long triggerExecution, long addBatch) {
        StreamingQueries.Progress p = new StreamingQueries.Progress();
        p.id = "6f0c6c1e-0000-0000-0000-000000000001";
        p.runId = "run-1";
        p.name = "orders per minute";
        p.batchId = id;
        p.timestampMs = atMs;
        p.inputRows = 100;
        p.inputRate = 50.0;
        p.processingRate = 40.0;
        p.durationsMs.put("addBatch", addBatch);
        p.durationsMs.put("latestOffset", 3L);
        p.durationsMs.put("triggerExecution", triggerExecution);
        p.watermarkMs = atMs - 10_000;
        p.eventTimeMaxMs = atMs - 4_000;
        p.triggerMs = 1000L;
        return p;
    }

    private List<InfluxLineReader> points(String measurement) {
        List<InfluxLineReader> out = new ArrayList<>();
        for (String line : lines) {
            InfluxLineReader p = InfluxLineReader.read(line);
            if (p.measurement.equals(measurement)) {
                out.add(p);
            }
        }
        return out;
    }

    @Test
    void a_batch_is_one_point_per_query_with_rates_durations_and_event_time_lag() {
        queries.started("6f0c6c1e-0000-0000-0000-000000000001", "run-1", "orders per minute", 1_000);
        StreamingQueries.Progress p = batch(7, 60_000, 1_200, 1_150);
        p.operators.add(new StreamingQueries.Operator("stateStoreSave", 500, 20, 1 << 20, 3));
        p.operators.add(new StreamingQueries.Operator("dedupe", 70, 1, 4096, 0));
        queries.progress(p);
        InfluxLineReader point = points(StreamingQueries.PROGRESS).get(0);
        assertEquals("orders per minute", point.tags.get("query_name"));
        assertEquals(2, point.tags.size(), "applicationid and query: flat series");
        assertEquals("7i", point.fields.get("batch_id"));
        assertEquals("1200i", point.fields.get("batch_ms"));
        assertEquals("1000i", point.fields.get("trigger_ms"));
        assertEquals("1150i", point.fields.get("add_batch_ms"));
        assertEquals("3i", point.fields.get("latest_offset_ms"));
        assertEquals("4000i", point.fields.get("event_time_lag_ms"));
        assertEquals("570i", point.fields.get("state_rows"));
        assertEquals(60_000L * 1_000_000L, point.time);
        List<InfluxLineReader> state = points(StreamingQueries.STATE);
        assertEquals(2, state.size());
        assertEquals("0 stateStoreSave", state.get(0).tags.get("operator"));
        assertEquals("3i", state.get(0).fields.get("rows_dropped_by_watermark"));
        assertEquals("1 dedupe", state.get(1).tags.get("operator"));
    }

    @Test
    void rates_spark_cannot_compute_are_left_out_not_written_as_nan() {
        StreamingQueries.Progress p = batch(0, 1_000, 10, 5);
        p.inputRate = Double.NaN;
        p.processingRate = Double.POSITIVE_INFINITY;
        p.name = null;
        queries.progress(p);
        InfluxLineReader point = points(StreamingQueries.PROGRESS).get(0);
        assertFalse(point.fields.containsKey("input_rate"));
        assertFalse(point.fields.containsKey("processing_rate"));
        assertEquals("6f0c6c1e-0000-0000-0000-000000000001", point.tags.get("query_name"), "no name: its id");
    }

    @Test
    void the_end_names_the_batches_and_the_slowest_one_with_why() {
        queries.started("q", "run-1", "orders per minute", 1_000);
        queries.progress(batch(0, 2_000, 400, 350));
        queries.progress(batch(1, 3_000, 3_400, 3_300));
        queries.progress(batch(2, 7_000, 500, 450));
        queries.terminated("q", "run-1", 9_000, "org.apache.spark.SparkException: boom\n\tat x");
        InfluxLineReader end = points(StreamingQueries.QUERY).get(1);
        assertEquals("FAILED", end.tags.get("status"));
        assertEquals("3i", end.fields.get("batches"));
        assertEquals("1i", end.fields.get("slowest_batch_id"));
        assertEquals("3400i", end.fields.get("slowest_batch_ms"));
        assertTrue(end.fields.get("slowest_batch_why").contains("addBatch"), end.fields.get("slowest_batch_why"));
        assertTrue(end.fields.get("slowest_batch_why").contains("processing the batch"));
        assertEquals("8000i", end.fields.get("duration_ms"));
        assertTrue(end.fields.get("text").contains("FAILED: org.apache.spark.SparkException: boom"));
        assertEquals(1_000L * 1_000_000L, end.time / 1_000_000L * 1_000_000L, "stamped with its start");
    }

    @Test
    void each_end_is_also_stamped_at_the_moment_it_came_failed_or_not() {
        queries.started("q1", "run-1", "orders", 1_000);
        queries.started("q2", "run-2", "payments", 1_000);
        long dayLater = 1_000 + 26 * 3_600_000L;
        queries.terminated("q1", "run-1", dayLater, "java.lang.IllegalStateException: offsets out of range");
        queries.terminated("q2", "run-2", dayLater + 5, null);
        List<InfluxLineReader> ends = points(StreamingQueries.END);
        assertEquals(2, ends.size());
        InfluxLineReader failed = ends.get(0);
        InfluxLineReader stopped = ends.get(1);
        assertEquals(dayLater, failed.time / 1_000_000L, "stamped at its end, not its start a day before");
        assertEquals(dayLater + 5, stopped.time / 1_000_000L);
        assertEquals("1i", failed.fields.get("failed"));
        assertEquals("0i", stopped.fields.get("failed"), "a clean stop is written too: 0, seen and quiet");
        assertEquals("orders", failed.tags.get("query_name"));
        assertEquals("1000i", failed.fields.get("start_time_ms"));
        assertTrue(failed.fields.get("exception").startsWith("java.lang.IllegalStateException: offsets"));
        assertNull(stopped.fields.get("exception"));
        assertEquals(2, failed.tags.size(), "applicationid and query, as its batches: one series per query");
        // The annotation stays stamped at the start, where the graphs and the report read it.
        assertEquals(1_000L, points(StreamingQueries.QUERY).get(2).time / 1_000_000L);
    }

    @Test
    void a_query_stopped_cleanly_is_finished_and_an_unknown_one_still_ends() {
        queries.terminated("q", "never-started", 5_000, null);
        InfluxLineReader end = points(StreamingQueries.QUERY).get(0);
        assertEquals("FINISHED", end.tags.get("status"));
        assertNull(end.fields.get("batches"));
    }

    @Test
    void duration_keys_become_snake_case_fields() {
        assertEquals("wal_commit_ms", StreamingQueries.durationField("walCommit"));
        assertEquals("query_planning_ms", StreamingQueries.durationField("queryPlanning"));
    }
}
