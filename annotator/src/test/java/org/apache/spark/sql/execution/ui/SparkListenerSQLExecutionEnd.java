package org.apache.spark.sql.execution.ui;

import scala.Option;

/** Test stand-in for Spark SQL's execution end event (see SparkListenerSQLExecutionStart). */
public class SparkListenerSQLExecutionEnd extends SqlExecutionEventStub {
    private final String errorMessage;

    public SparkListenerSQLExecutionEnd(long executionId, long time, String errorMessage) {
        super(executionId, time);
        this.errorMessage = errorMessage;
    }

    public Option<String> errorMessage() {
        return Option.apply(errorMessage);
    }
}
