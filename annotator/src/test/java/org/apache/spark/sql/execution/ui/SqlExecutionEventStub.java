package org.apache.spark.sql.execution.ui;

import org.apache.spark.scheduler.SparkListenerEvent;

/**
 * What the two SQL execution event stand-ins share: the execution id and the
 * event time, read through the accessors Spark's own classes have. Public, as
 * the annotator reads these accessors by reflection from another package.
 */
public abstract class SqlExecutionEventStub implements SparkListenerEvent {
    private final long executionId;
    private final long time;

    protected SqlExecutionEventStub(long executionId, long time) {
        this.executionId = executionId;
        this.time = time;
    }

    public long executionId() {
        return executionId;
    }

    public long time() {
        return time;
    }
}
