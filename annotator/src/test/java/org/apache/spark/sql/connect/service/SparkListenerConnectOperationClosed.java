package org.apache.spark.sql.connect.service;

/** Stands in for Spark 4's event of the same name; here without its jobTag accessor, as a changed Spark might be. */
public class SparkListenerConnectOperationClosed {
}
