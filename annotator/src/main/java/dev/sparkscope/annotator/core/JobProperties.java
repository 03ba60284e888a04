package dev.sparkscope.annotator.core;

import java.util.Properties;

/**
 * Reading the local properties Spark attaches to a job or stage
 * (spark.sql.execution.id, spark.job.description, ...): the annotations and
 * the memory peaks both tie their points to a SQL query through them.
 */
public final class JobProperties {

    public static final String SQL_EXECUTION_ID = "spark.sql.execution.id";

    private JobProperties() {
    }

    /** The property, null when the properties, or the value, are absent or empty. */
    public static String property(Properties p, String key) {
        if (p == null) {
            return null;
        }
        String v = p.getProperty(key);
        return v == null || v.isEmpty() ? null : v;
    }

    /** A whole number, or null when absent or not one. */
    public static Long parseLong(String s) {
        if (s == null) {
            return null;
        }
        try {
            return Long.parseLong(s.trim());
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
