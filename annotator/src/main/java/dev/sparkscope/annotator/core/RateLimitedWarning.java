package dev.sparkscope.annotator.core;

import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Logs the first occurrence of a problem at once and then at most one line
 * per interval, saying how many occurrences were not logged, so that an
 * unreachable InfluxDB costs a handful of log lines, not one per event.
 */
public final class RateLimitedWarning {

    private final Consumer<String> log;
    private final long intervalMs;
    private final LongSupplier clockMs;
    private long lastLoggedAt;
    private boolean loggedOnce;
    private long suppressed;

    public RateLimitedWarning(Consumer<String> log, long intervalMs, LongSupplier clockMs) {
        this.log = log;
        this.intervalMs = intervalMs;
        this.clockMs = clockMs;
    }

    /** Message is built only when it is logged. Returns whether it was logged. */
    public synchronized boolean warn(Supplier<String> message) {
        long now = clockMs.getAsLong();
        if (loggedOnce && now - lastLoggedAt < intervalMs) {
            suppressed++;
            return false;
        }
        String text = message.get();
        if (suppressed > 0) {
            text += " (" + suppressed + " similar warning" + (suppressed == 1 ? "" : "s")
                    + " not logged in the last " + ((now - lastLoggedAt) / 1000) + " s)";
        }
        suppressed = 0;
        loggedOnce = true;
        lastLoggedAt = now;
        log.accept(text);
        return true;
    }
}
