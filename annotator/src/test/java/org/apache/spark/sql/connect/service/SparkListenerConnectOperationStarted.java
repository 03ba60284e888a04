package org.apache.spark.sql.connect.service;

/**
 * Stands in for Spark 4's event of the same name (spark-connect is not on the
 * annotator's classpath): the accessors the annotator reads, by reflection.
 */
public class SparkListenerConnectOperationStarted {
    private final String jobTag;
    private final String userId;
    private final String sessionId;
    private final String operationId;

    public SparkListenerConnectOperationStarted(String jobTag, String userId, String sessionId, String operationId) {
        this.jobTag = jobTag;
        this.userId = userId;
        this.sessionId = sessionId;
        this.operationId = operationId;
    }

    public String jobTag() {
        return jobTag;
    }

    public String userId() {
        return userId;
    }

    public String sessionId() {
        return sessionId;
    }

    public String operationId() {
        return operationId;
    }
}
