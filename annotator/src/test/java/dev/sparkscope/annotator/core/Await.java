package dev.sparkscope.annotator.core;

import java.util.concurrent.TimeUnit;

/** Waits in tests for what another thread does, with a deadline. */
final class Await {

    interface Condition {
        boolean holds() throws Exception;
    }

    private Await() {
    }

    static void until(Condition c) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.holds()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("condition not met within 20 s");
            }
            Thread.sleep(5);
        }
    }
}
