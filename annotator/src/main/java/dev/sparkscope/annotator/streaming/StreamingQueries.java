package dev.sparkscope.annotator.streaming;

import dev.sparkscope.annotator.core.BoundedMap;
import dev.sparkscope.annotator.core.DurationText;
import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Stamps;
import dev.sparkscope.annotator.core.Status;
import dev.sparkscope.annotator.core.Text;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Structured Streaming queries as points: each micro-batch's progress
 * ({@link #PROGRESS}), each stateful operator's state ({@link #STATE}), and
 * each query's start and end as an annotation ({@link #QUERY}, stamped with
 * its start like the annotator's other entities), and each end once more
 * stamped at the moment it came ({@link #END}): a query that fails days after
 * it started is then found by a look at the last minutes, as an alert does.
 *
 * <p>Series stay flat however long a query runs: the tags are the
 * application, the query (its name, else its id) and, for state, the
 * operator's position and name; batch ids and run ids are fields.
 *
 * <p>Takes plain values, not Spark classes ({@link StreamingEvents} reads
 * those), so it is tested without Spark. Called from one thread.
 */
public final class StreamingQueries {

    static final String PROGRESS = "sparkscope_streaming";
    static final String STATE = "sparkscope_streaming_state";
    static final String QUERY = "sparkscope_streaming_query";
    static final String END = "sparkscope_streaming_end";
    static final int MAX_OPEN = 1000;

    /** One stateful operator of a batch. */
    static final class Operator {
        final String name;
        final long rowsTotal;
        final long rowsUpdated;
        final long memoryBytes;
        final long droppedByWatermark;

        Operator(String name, long rowsTotal, long rowsUpdated, long memoryBytes, long droppedByWatermark) {
            this.name = name;
            this.rowsTotal = rowsTotal;
            this.rowsUpdated = rowsUpdated;
            this.memoryBytes = memoryBytes;
            this.droppedByWatermark = droppedByWatermark;
        }
    }

    /** One micro-batch's progress, as StreamingQueryProgress gives it. */
    static final class Progress {
        String id;
        String runId;
        String name;
        long batchId;
        long timestampMs;
        long inputRows;
        double inputRate = Double.NaN;
        double processingRate = Double.NaN;
        Map<String, Long> durationsMs = new LinkedHashMap<>();
        Long watermarkMs;
        Long eventTimeMaxMs;
        Long backlog;  // the sources' largest offsetsBehindLatest (Kafka), if any says
        Long triggerMs;  // the query's processing-time trigger, when known
        List<Operator> operators = new ArrayList<>();
    }

    private static final class Open {
        final long startMs;
        final String name;
        long batches;
        long slowestMs = -1;
        long slowestBatch = -1;
        String slowestWhy;

        Open(long startMs, String name) {
            this.startMs = startMs;
            this.name = name;
        }
    }

    private final Consumer<String> out;
    private final Supplier<String> applicationId;
    private final boolean runningPoints;
    private final BoundedMap<String, Open> open = new BoundedMap<>(MAX_OPEN);

    public StreamingQueries(Consumer<String> out, Supplier<String> applicationId, boolean runningPoints) {
        this.out = out;
        this.applicationId = applicationId;
        this.runningPoints = runningPoints;
    }

    static String label(String name, String id) {
        return name != null && !name.trim().isEmpty() ? name : id;
    }

    void started(String id, String runId, String name, long timeMs) {
        open.put(runId, new Open(timeMs, name));
        if (runningPoints) {
            out.accept(event(Status.RUNNING, timeMs, id, runId, name)
                    .field("text", "streaming query " + Text.oneLine(label(name, id)) + " started")
                    .toLine());
        }
    }

    void progress(Progress p) {
        String query = label(p.name, p.id);
        Long batchMs = p.durationsMs.get("triggerExecution");
        Point point = Point.measurement(PROGRESS)
                .tag("applicationid", applicationId.get())
                .tag("query_name", query)
                .field("query_id", p.id)
                .field("run_id", p.runId)
                .field("batch_id", p.batchId)
                .field("input_rows", p.inputRows)
                .field("batch_ms", batchMs)
                .field("trigger_ms", p.triggerMs)
                .field("watermark_ms", p.watermarkMs)
                .field("event_time_max_ms", p.eventTimeMaxMs)
                .field("event_time_lag_ms", p.eventTimeMaxMs == null ? null : p.timestampMs - p.eventTimeMaxMs)
                .field("backlog", p.backlog)
                .timeMs(p.timestampMs);
        if (!Double.isNaN(p.inputRate) && !Double.isInfinite(p.inputRate)) {
            point.field("input_rate", p.inputRate);
        }
        if (!Double.isNaN(p.processingRate) && !Double.isInfinite(p.processingRate)) {
            point.field("processing_rate", p.processingRate);
        }
        for (Map.Entry<String, Long> d : p.durationsMs.entrySet()) {
            if (!d.getKey().equals("triggerExecution") && d.getValue() != null) {
                point.field(durationField(d.getKey()), d.getValue());
            }
        }
        long stateRows = 0;
        long stateBytes = 0;
        for (Operator o : p.operators) {
            stateRows += o.rowsTotal;
            stateBytes += o.memoryBytes;
        }
        if (!p.operators.isEmpty()) {
            point.field("state_rows", stateRows).field("state_memory_bytes", stateBytes);
        }
        out.accept(point.toLine());
        for (int i = 0; i < p.operators.size(); i++) {
            Operator o = p.operators.get(i);
            out.accept(Point.measurement(STATE)
                    .tag("applicationid", applicationId.get())
                    .tag("query_name", query)
                    .tag("operator", i + " " + o.name)
                    .field("batch_id", p.batchId)
                    .field("rows_total", o.rowsTotal)
                    .field("rows_updated", o.rowsUpdated)
                    .field("memory_bytes", o.memoryBytes)
                    .field("rows_dropped_by_watermark", o.droppedByWatermark)
                    .timeMs(p.timestampMs)
                    .toLine());
        }
        Open q = open.get(p.runId);
        if (q != null) {
            q.batches++;
            if (batchMs != null && batchMs > q.slowestMs) {
                q.slowestMs = batchMs;
                q.slowestBatch = p.batchId;
                q.slowestWhy = why(p.durationsMs);
            }
        }
    }

    void terminated(String id, String runId, long timeMs, String exception) {
        Open q = open.remove(runId);
        boolean failed = exception != null && !exception.trim().isEmpty();
        String status = failed ? Status.FAILED : Status.FINISHED;
        long start = q != null ? q.startMs : timeMs;
        String name = q != null ? q.name : null;
        String text = "streaming query " + Text.oneLine(label(name, id))
                + (failed ? " FAILED: " + Text.oneLine(exception) : " stopped")
                + (q != null ? " after " + q.batches + " batches" : "");
        Point p = event(status, start, id, runId, name)
                .field("end_time_ms", timeMs)
                .field("duration_ms", q != null ? Long.valueOf(timeMs - q.startMs) : null)
                .field("exception", failed ? Text.clip(exception, Text.MAX_DESCRIPTION)
                        : null)
                .field("text", text);
        if (q != null) {
            p.field("batches", q.batches);
            if (q.slowestBatch >= 0) {
                p.field("slowest_batch_id", q.slowestBatch)
                        .field("slowest_batch_ms", q.slowestMs)
                        .field("slowest_batch_why", q.slowestWhy);
            }
        }
        out.accept(p.toLine());
        // failed is 0 or 1, not a status tag: a rule sums it per query, so a query that stopped
        // cleanly is seen (0) rather than absent. Tagged by query as its batches are: one series each.
        out.accept(Point.measurement(END)
                .tag("applicationid", applicationId.get())
                .tag("query_name", label(name, id))
                .field("query_id", id)
                .field("run_id", runId)
                .field("failed", failed ? 1L : 0L)
                .field("exception", failed ? Text.clip(exception, Text.MAX_DESCRIPTION)
                        : null)
                .field("start_time_ms", q != null ? Long.valueOf(q.startMs) : null)
                .timeNs(Stamps.stamp(timeMs, runId == null ? 0 : runId.hashCode()))
                .toLine());
    }

    private Point event(String status, long timeMs, String id, String runId, String name) {
        return Point.measurement(QUERY)
                .tag("applicationid", applicationId.get())
                .tag("status", status)
                .field("query_id", id)
                .field("run_id", runId)
                .field("name", name)
                .timeNs(Stamps.stamp(timeMs, runId == null ? 0 : runId.hashCode()));
    }

    /** durationMs keys (addBatch, getBatch, latestOffset, queryPlanning, walCommit, commitOffsets) as fields. */
    static String durationField(String key) {
        StringBuilder b = new StringBuilder();
        for (char c : key.toCharArray()) {
            if (Character.isUpperCase(c)) {
                b.append('_').append(Character.toLowerCase(c));
            } else if (Character.isLetterOrDigit(c)) {
                b.append(c);
            } else {
                b.append('_');
            }
        }
        return b.append("_ms").toString().toLowerCase(Locale.ROOT);
    }

    /** The part of a batch that took longest, named for what it is. */
    static String why(Map<String, Long> durations) {
        String worst = null;
        long most = -1;
        for (Map.Entry<String, Long> d : durations.entrySet()) {
            if (!d.getKey().equals("triggerExecution") && d.getValue() != null && d.getValue() > most) {
                most = d.getValue();
                worst = d.getKey();
            }
        }
        if (worst == null) {
            return null;
        }
        String what;
        switch (worst) {
            case "addBatch":
                what = "processing the batch (the query's work and the sink)";
                break;
            case "getBatch":
            case "latestOffset":
            case "getOffset":
                what = "reading the source";
                break;
            case "queryPlanning":
                what = "planning the query";
                break;
            case "walCommit":
            case "commitOffsets":
                what = "writing the checkpoint";
                break;
            default:
                what = worst;
        }
        return worst + " " + DurationText.of(most) + ": " + what;
    }
}
