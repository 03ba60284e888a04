package dev.sparkscope.annotator.core;

/**
 * How a part of the annotator starts its own thread beside Spark: a daemon (it
 * never keeps a JVM alive), and, when it cannot start, one WARN line that says
 * why and that Spark runs on. The container and process-tree samplers share it.
 */
public final class Background {

    private Background() {
    }

    /** r on a started daemon thread of this name. */
    public static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** The WARN line of a part that is off: a bad setting (IllegalArgumentException) or anything else. */
    public static void off(String component, String executorId, Throwable why) {
        if (why instanceof IllegalArgumentException) {
            AnnotatorLog.warn(component + " is off on " + executorId + ": " + why.getMessage()
                    + ". Fix the setting (annotator README); Spark runs normally.");
        } else {
            AnnotatorLog.warn(component + " is off on " + executorId + ": could not start: " + why);
        }
    }
}
