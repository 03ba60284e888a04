package dev.sparkscope.annotator.streaming;

import dev.sparkscope.annotator.core.BoundedMap;
import dev.sparkscope.annotator.core.DurationText;
import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Schema;
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

    static final String PROGRESS = Schema.Streaming.NAME;
    static final String STATE = Schema.StreamingState.NAME;
    static final String QUERY = Schema.StreamingQuery.NAME;
    static final String END = Schema.StreamingEnd.NAME;
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
                    .field(Schema.StreamingQuery.TEXT, "streaming query " + Text.oneLine(label(name, id)) + " started")
                    .toLine());
        }
    }

    void progress(Progress p) {
        String query = label(p.name, p.id);
        Long batchMs = p.durationsMs.get("triggerExecution");
        Point point = Point.measurement(PROGRESS)
                .tag(Schema.APPLICATION, applicationId.get())
                .tag(Schema.Streaming.QUERY_NAME, query)
                .field(Schema.Streaming.QUERY_ID, p.id)
                .field(Schema.Streaming.RUN_ID, p.runId)
                .field(Schema.Streaming.BATCH_ID, p.batchId)
                .field(Schema.Streaming.INPUT_ROWS, p.inputRows)
                .field(Schema.Streaming.BATCH_MS, batchMs)
                .field(Schema.Streaming.TRIGGER_MS, p.triggerMs)
                .field(Schema.Streaming.WATERMARK_MS, p.watermarkMs)
                .field(Schema.Streaming.EVENT_TIME_MAX_MS, p.eventTimeMaxMs)
                .field(Schema.Streaming.EVENT_TIME_LAG_MS,
                        p.eventTimeMaxMs == null ? null : p.timestampMs - p.eventTimeMaxMs)
                .field(Schema.Streaming.BACKLOG, p.backlog)
                .timeMs(p.timestampMs);
        if (!Double.isNaN(p.inputRate) && !Double.isInfinite(p.inputRate)) {
            point.field(Schema.Streaming.INPUT_RATE, p.inputRate);
        }
        if (!Double.isNaN(p.processingRate) && !Double.isInfinite(p.processingRate)) {
            point.field(Schema.Streaming.PROCESSING_RATE, p.processingRate);
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
            point.field(Schema.Streaming.STATE_ROWS, stateRows).field(Schema.Streaming.STATE_MEMORY_BYTES, stateBytes);
        }
        out.accept(point.toLine());
        for (int i = 0; i < p.operators.size(); i++) {
            Operator o = p.operators.get(i);
            out.accept(Point.measurement(STATE)
                    .tag(Schema.APPLICATION, applicationId.get())
                    .tag(Schema.StreamingState.QUERY_NAME, query)
                    .tag(Schema.StreamingState.OPERATOR, i + " " + o.name)
                    .field(Schema.StreamingState.BATCH_ID, p.batchId)
                    .field(Schema.StreamingState.ROWS_TOTAL, o.rowsTotal)
                    .field(Schema.StreamingState.ROWS_UPDATED, o.rowsUpdated)
                    .field(Schema.StreamingState.MEMORY_BYTES, o.memoryBytes)
                    .field(Schema.StreamingState.ROWS_DROPPED_BY_WATERMARK, o.droppedByWatermark)
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
                .field(Schema.StreamingQuery.END_TIME_MS, timeMs)
                .field(Schema.StreamingQuery.DURATION_MS, q != null ? Long.valueOf(timeMs - q.startMs) : null)
                .field(Schema.StreamingQuery.EXCEPTION, failed ? Text.clip(exception, Text.MAX_DESCRIPTION)
                        : null)
                .field(Schema.StreamingQuery.TEXT, text);
        if (q != null) {
            p.field(Schema.StreamingQuery.BATCHES, q.batches);
            if (q.slowestBatch >= 0) {
                p.field(Schema.StreamingQuery.SLOWEST_BATCH_ID, q.slowestBatch)
                        .field(Schema.StreamingQuery.SLOWEST_BATCH_MS, q.slowestMs)
                        .field(Schema.StreamingQuery.SLOWEST_BATCH_WHY, q.slowestWhy);
            }
        }
        out.accept(p.toLine());
        // failed is 0 or 1, not a status tag: a rule sums it per query, so a query that stopped
        // cleanly is seen (0) rather than absent. Tagged by query as its batches are: one series each.
        out.accept(Point.measurement(END)
                .tag(Schema.APPLICATION, applicationId.get())
                .tag(Schema.StreamingEnd.QUERY_NAME, label(name, id))
                .field(Schema.StreamingEnd.QUERY_ID, id)
                .field(Schema.StreamingEnd.RUN_ID, runId)
                .field(Schema.StreamingEnd.FAILED, failed ? 1L : 0L)
                .field(Schema.StreamingEnd.EXCEPTION, failed ? Text.clip(exception, Text.MAX_DESCRIPTION)
                        : null)
                .field(Schema.StreamingEnd.START_TIME_MS, q != null ? Long.valueOf(q.startMs) : null)
                .timeNs(Stamps.stamp(timeMs, runId == null ? 0 : runId.hashCode()))
                .toLine());
    }

    private Point event(String status, long timeMs, String id, String runId, String name) {
        return Point.measurement(QUERY)
                .tag(Schema.APPLICATION, applicationId.get())
                .tag(Schema.STATUS, status)
                .field(Schema.StreamingQuery.QUERY_ID, id)
                .field(Schema.StreamingQuery.RUN_ID, runId)
                .field(Schema.StreamingQuery.NAME_FIELD, name)
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
        return b.append(Schema.Streaming.SUFFIX_MS).toString().toLowerCase(Locale.ROOT);
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
