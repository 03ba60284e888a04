package org.apache.spark.sql.execution.ui;

import org.apache.spark.scheduler.SparkListenerEvent;

/**
 * Test stand-in with the name and accessors of Spark SQL's event (spark-sql
 * is not on the test classpath): the annotator finds it by class name only.
 */
public class SparkListenerSQLExecutionStart implements SparkListenerEvent {
    private final long executionId;
    private final long time;
    private final String description;

    public SparkListenerSQLExecutionStart(long executionId, long time, String description) {
        this.executionId = executionId;
        this.time = time;
        this.description = description;
    }

    public long executionId() {
        return executionId;
    }

    public long time() {
        return time;
    }

    public String description() {
        if (description == null) {
            throw new IllegalStateException("broken event");
        }
        return description;
    }
}
