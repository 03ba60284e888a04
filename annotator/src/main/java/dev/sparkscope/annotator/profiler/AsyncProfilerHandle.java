package dev.sparkscope.annotator.profiler;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * async-profiler through reflection: the jar works without it on the
 * classpath (the annotator alone), and every way loading it can fail (class
 * missing, no native library for this OS or CPU, a library that refuses this
 * JVM) becomes one IllegalStateException with a reason a user can act on.
 */
final class AsyncProfilerHandle {

    private static final String CLASS = "one.profiler.AsyncProfiler";

    private AsyncProfilerHandle() {
    }

    static Object load() {
        try {
            Class<?> c = Class.forName(CLASS);
            return c.getMethod("getInstance").invoke(null);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException("async-profiler is not on the executor's classpath: ship "
                    + "sparkscope-annotator.jar as built (it bundles async-profiler) with --jars");
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            throw new IllegalStateException("async-profiler cannot load on " + System.getProperty("os.name") + "/"
                    + System.getProperty("os.arch") + ": " + cause + " (it ships native libraries for Linux x64 "
                    + "and arm64 and macOS)");
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new IllegalStateException("async-profiler cannot load: " + e);
        }
    }

    /** Runs one async-profiler command; its refusal comes back as IllegalStateException. */
    static String execute(Object profiler, String command) {
        try {
            Method m = profiler.getClass().getMethod("execute", String.class);
            Object out = m.invoke(profiler, command);
            return out == null ? "" : out.toString();
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            throw new IllegalStateException(cause.getMessage() == null ? cause.toString() : cause.getMessage());
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new IllegalStateException(e.toString());
        }
    }
}
