package dev.sparkscope.annotator.streaming;

import dev.sparkscope.annotator.core.BoundedMap;
import dev.sparkscope.annotator.core.ScalaOption;

import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Reads Structured Streaming's query events from Spark's listener bus, where
 * StreamingQueryListenerBus posts every QueryStartedEvent, QueryProgressEvent
 * and QueryTerminatedEvent (so event logs hold them too): no
 * StreamingQueryListener of our own and no spark.sql.streaming setting is
 * needed. By reflection, since spark-sql may be absent and the classes moved
 * module in Spark 4 (sql/api) while keeping their names and accessors.
 * Anything unexpected turns this reader off with one warning; Spark goes on.
 */
public final class StreamingEvents {

    static final String PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$";
    static final String STARTED = PREFIX + "QueryStartedEvent";
    static final String PROGRESS = PREFIX + "QueryProgressEvent";
    static final String TERMINATED = PREFIX + "QueryTerminatedEvent";

    private final StreamingQueries queries;
    private final Consumer<String> warn;
    private final Map<String, Long> triggers = new BoundedMap<>(StreamingQueries.MAX_OPEN);
    private boolean broken;

    public StreamingEvents(StreamingQueries queries, Consumer<String> warn) {
        this.queries = queries;
        this.warn = warn;
    }

    /** Returns whether the event was a streaming query event. */
    public boolean handle(Object event) {
        String name = event.getClass().getName();
        if (!name.startsWith(PREFIX)) {
            return false;
        }
        if (broken) {
            return true;
        }
        try {
            if (name.equals(STARTED)) {
                String ts = string(call(event, "timestamp"));
                queries.started(string(call(event, "id")), string(call(event, "runId")), string(call(event, "name")),
                        ts != null ? Instant.parse(ts).toEpochMilli() : System.currentTimeMillis());
            } else if (name.equals(PROGRESS)) {
                queries.progress(read(call(event, "progress")));
            } else if (name.equals(TERMINATED)) {
                String id = string(call(event, "id"));
                queries.terminated(id, string(call(event, "runId")), System.currentTimeMillis(),
                        ScalaOption.string(call(event, "exception")));
                triggers.remove(id);
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            broken = true;
            warn.accept("sparkscope annotator: streaming query events are not recorded (this Spark's "
                    + name + " is not what the annotator reads: " + e + ")");
        }
        return true;
    }

    private StreamingQueries.Progress read(Object progress) throws ReflectiveOperationException {
        StreamingQueries.Progress p = new StreamingQueries.Progress();
        p.id = string(call(progress, "id"));
        p.runId = string(call(progress, "runId"));
        p.name = string(call(progress, "name"));
        p.batchId = ((Number) call(progress, "batchId")).longValue();
        p.timestampMs = Instant.parse(string(call(progress, "timestamp"))).toEpochMilli();
        p.inputRows = ((Number) call(progress, "numInputRows")).longValue();
        p.inputRate = ((Number) call(progress, "inputRowsPerSecond")).doubleValue();
        p.processingRate = ((Number) call(progress, "processedRowsPerSecond")).doubleValue();
        Object durations = call(progress, "durationMs");
        if (durations instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) durations).entrySet()) {
                if (e.getValue() instanceof Number) {
                    p.durationsMs.put(String.valueOf(e.getKey()), ((Number) e.getValue()).longValue());
                }
            }
        }
        Object eventTime = call(progress, "eventTime");
        if (eventTime instanceof Map) {
            Long watermark = instant(((Map<?, ?>) eventTime).get("watermark"));
            p.watermarkMs = watermark != null && watermark > 0 ? watermark : null;  // the epoch: none yet
            p.eventTimeMaxMs = instant(((Map<?, ?>) eventTime).get("max"));
        }
        Object operators = call(progress, "stateOperators");
        for (int i = 0; operators != null && i < Array.getLength(operators); i++) {
            Object o = Array.get(operators, i);
            p.operators.add(new StreamingQueries.Operator(string(call(o, "operatorName")),
                    number(o, "numRowsTotal"), number(o, "numRowsUpdated"), number(o, "memoryUsedBytes"),
                    number(o, "numRowsDroppedByWatermark")));
        }
        p.backlog = offsetsBehindLatest(call(progress, "sources"));
        if (!triggers.containsKey(p.id)) {
            triggers.put(p.id, triggerOf(p.id));
        }
        p.triggerMs = triggers.get(p.id);
        return p;
    }

    /**
     * The largest maxOffsetsBehindLatest of the sources (SourceProgress[]),
     * or null when none reports it. Kafka's source puts it in its progress
     * metrics (a map of strings: "maxOffsetsBehindLatest" : "1500", next to
     * min, avg and, on some platforms, estimatedTotalBytesBehindLatest);
     * other sources leave the map empty. Offsets are longs: parsed as such,
     * since a double would round offsets past 2^53.
     */
    Long offsetsBehindLatest(Object sources) throws ReflectiveOperationException {
        Long most = null;
        for (int i = 0; sources != null && i < Array.getLength(sources); i++) {
            Object metrics = call(Array.get(sources, i), "metrics");
            Object behind = metrics instanceof Map ? ((Map<?, ?>) metrics).get("maxOffsetsBehindLatest") : null;
            Long b = behind == null ? null : wholeNumber(behind.toString().trim());
            if (b != null) {
                most = most == null ? b : Math.max(most, b);
            }
        }
        return most;
    }

    private static Long wholeNumber(String text) {
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException notLong) {
            try {
                double d = Double.parseDouble(text);  // "1500.0": a source that writes it as a double
                return Double.isNaN(d) || Double.isInfinite(d) ? null : Long.valueOf((long) d);
            } catch (NumberFormatException ignored) {
                return null;  // a source's own metric in a form we do not read
            }
        }
    }

    /**
     * The query's processing-time trigger interval (0: as fast as it can), or
     * null where it cannot be read: the progress does not carry it, so it is
     * asked of the running query (SparkSession's StreamingQueryManager, the
     * query's StreamExecution). Once per query; any failure is just "unknown".
     */
    static Long triggerOf(String id) {
        try {
            Class<?> sessionClass = Class.forName("org.apache.spark.sql.SparkSession");
            Object session = ScalaOption.get(sessionClass.getMethod("getDefaultSession").invoke(null));
            if (session == null) {
                return null;
            }
            Object manager = session.getClass().getMethod("streams").invoke(session);
            Object query = manager.getClass().getMethod("get", java.util.UUID.class)
                    .invoke(manager, java.util.UUID.fromString(id));
            if (query == null) {
                return null;
            }
            Object execution = query.getClass().getMethod("streamingQuery").invoke(query);
            Object trigger = execution.getClass().getMethod("trigger").invoke(execution);
            Object interval = trigger.getClass().getMethod("intervalMs").invoke(trigger);
            return interval instanceof Number ? ((Number) interval).longValue() : null;
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            return null;
        }
    }

    private final Map<String, Method> methods = new HashMap<>();

    private Object call(Object target, String method) throws ReflectiveOperationException {
        String key = target.getClass().getName() + "#" + method;
        Method m = methods.get(key);
        if (m == null) {
            m = target.getClass().getMethod(method);
            methods.put(key, m);
        }
        return m.invoke(target);
    }

    private long number(Object target, String method) {
        try {
            Object v = call(target, method);
            return v instanceof Number ? ((Number) v).longValue() : 0;
        } catch (ReflectiveOperationException e) {
            return 0;  // a counter this Spark version does not have
        }
    }

    private static String string(Object value) {
        return value == null ? null : value.toString();
    }

    private static Long instant(Object iso) {
        if (iso == null) {
            return null;
        }
        try {
            return Instant.parse(iso.toString()).toEpochMilli();
        } catch (RuntimeException e) {
            return null;
        }
    }
}
