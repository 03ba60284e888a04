package dev.sparkscope.annotator.events;

import dev.sparkscope.annotator.core.ScalaOption;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.function.Consumer;

/**
 * Reads Spark SQL's execution start/end events by reflection: they live in
 * spark-sql, which an application may not have on its classpath, and their
 * constructors change between Spark versions, while the accessors used here
 * (executionId, time, description, errorMessage) are stable from 3.4 to 4.x.
 */
public final class SqlExecutionEvents {

    static final String START_CLASS = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart";
    static final String END_CLASS = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd";

    private final Consumer<String> warn;
    private boolean broken;

    private Class<?> startType;
    private Method startId;
    private Method startTime;
    private Method startDescription;

    private Class<?> endType;
    private Method endId;
    private Method endTime;
    private Method endError; // null before Spark 3.4

    public SqlExecutionEvents(Consumer<String> warn) {
        this.warn = warn;
    }

    /** Returns whether the event was a SQL execution start or end (and so needs no other handling). */
    public boolean handle(Object event, AnnotationRecorder recorder) {
        Class<?> type = event.getClass();
        String name = type.getName();
        boolean isStart = name.equals(START_CLASS);
        boolean isEnd = !isStart && name.equals(END_CLASS);
        if (!isStart && !isEnd) {
            return false;
        }
        if (broken) {
            return true;
        }
        long id;
        long time;
        String text;
        try {
            if (isStart) {
                if (type != startType) {
                    startId = type.getMethod("executionId");
                    startTime = type.getMethod("time");
                    startDescription = type.getMethod("description");
                    startType = type;
                }
                id = ((Number) startId.invoke(event)).longValue();
                time = ((Number) startTime.invoke(event)).longValue();
                text = (String) startDescription.invoke(event);
            } else {
                if (type != endType) {
                    endId = type.getMethod("executionId");
                    endTime = type.getMethod("time");
                    endError = optionalMethod(type, "errorMessage");
                    endType = type;
                }
                id = ((Number) endId.invoke(event)).longValue();
                time = ((Number) endTime.invoke(event)).longValue();
                text = endError == null ? null : ScalaOption.string(endError.invoke(event));
            }
        } catch (NoSuchMethodException | IllegalAccessException | ClassCastException | LinkageError e) {
            // The event's shape differs from what this jar knows: it will not change in this JVM.
            broken = true;
            startType = null;
            endType = null;
            warn.accept("sparkscope annotator: SQL query annotations are off: this Spark version's "
                    + name + " does not look as expected (" + e + "); jobs and stages are still annotated");
            return true;
        } catch (InvocationTargetException e) {
            // One event's accessor failed: that event is lost, the next ones are read as usual.
            if (e.getCause() instanceof VirtualMachineError) {
                throw (VirtualMachineError) e.getCause();
            }
            throw new IllegalStateException("reading " + type.getSimpleName() + " failed", e.getCause());
        }
        // Failures past this point are about one event and reach the listener's rate-limited warning.
        if (isStart) {
            recorder.queryStarted(id, time, text);
        } else {
            recorder.queryEnded(id, time, text);
        }
        return true;
    }

    private static Method optionalMethod(Class<?> type, String name) {
        try {
            return type.getMethod(name);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }
}
