package org.apache.spark.sql.execution.ui;

/**
 * Test stand-in with the name and accessors of Spark SQL's event (spark-sql
 * is not on the test classpath): the annotator finds it by class name only.
 */
public class SparkListenerSQLExecutionStart extends SqlExecutionEventStub {
    private final String description;

    public SparkListenerSQLExecutionStart(long executionId, long time, String description) {
        super(executionId, time);
        this.description = description;
    }

    public String description() {
        if (description == null) {
            throw new IllegalStateException("broken event");
        }
        return description;
    }
}
