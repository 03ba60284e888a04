package dev.sparkscope.annotator.core;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Logging through SLF4J (which Spark 3.5 and 4.x both ship and route to
 * their log4j2 setup). Logging itself never throws into the caller.
 */
public final class AnnotatorLog {

    private static final Logger LOG = logger();

    private AnnotatorLog() {
    }

    public static void warn(String message) {
        try {
            if (LOG != null) {
                LOG.warn(message);
            } else {
                System.err.println("WARN " + message);
            }
        } catch (Throwable ignored) {
            // nothing sensible left to do
        }
    }

    public static void info(String message) {
        try {
            if (LOG != null) {
                LOG.info(message);
            }
        } catch (Throwable ignored) {
            // nothing sensible left to do
        }
    }

    private static Logger logger() {
        try {
            return LoggerFactory.getLogger("dev.sparkscope.annotator");
        } catch (Throwable t) {
            return null;
        }
    }
}
