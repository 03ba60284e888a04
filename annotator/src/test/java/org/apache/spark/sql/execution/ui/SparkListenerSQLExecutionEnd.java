package org.apache.spark.sql.execution.ui;

import org.apache.spark.scheduler.SparkListenerEvent;

import scala.Option;

/** Test stand-in for Spark SQL's execution end event (see SparkListenerSQLExecutionStart). */
public class SparkListenerSQLExecutionEnd implements SparkListenerEvent {
    private final long executionId;
    private final long time;
    private final String errorMessage;

    public SparkListenerSQLExecutionEnd(long executionId, long time, String errorMessage) {
        this.executionId = executionId;
        this.time = time;
        this.errorMessage = errorMessage;
    }

    public long executionId() {
        return executionId;
    }

    public long time() {
        return time;
    }

    public Option<String> errorMessage() {
        return Option.apply(errorMessage);
    }
}
