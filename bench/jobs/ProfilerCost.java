package dev.sparkscope.annotator;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the profiler plugin's session costs the work it samples, in one JVM:
 * a fixed CPU-bound workload (two threads hashing and allocating) runs
 * alternately without and with a ProfilerSession (async-profiler, dumps
 * every 2 s, regrouped and turned into line protocol as in an executor),
 * in ABBA order. The figure is the process CPU time the workload took
 * (which another process on the machine disturbs less than wall time).
 *
 * Run by bench/profiler_cost.py; prints one JSON line per run.
 */
public final class ProfilerCost {

    static volatile long sink;

    static long work(long seed, long iterations) {
        long h = seed;
        for (long i = 0; i < iterations; i++) {
            h = (h * 31 + i) % 1_000_000_007L;
            if ((i & 1023) == 0) {
                sink += Long.toString(h).hashCode();  // some allocation and calls, as real code has
            }
        }
        return h;
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    static void workload(long iterations) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            final long seed = t;
            Thread th = new Thread(() -> sink += work(seed, iterations),
                    "Executor task launch worker for task " + t + ".0 in stage 1.0 (TID " + t + ")");
            th.start();
            threads.add(th);
        }
        for (Thread th : threads) {
            th.join();
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        long intervalMs = Long.parseLong(args[1]);
        int rounds = Integer.parseInt(args[2]);
        long iterations = Long.parseLong(args[3]);
        workload(iterations / 4);  // JIT warm-up
        for (int round = 1; round <= rounds; round++) {
            boolean[] order = round % 2 == 1 ? new boolean[] {false, true} : new boolean[] {true, false};
            for (boolean on : order) {
                ProfilerSession session = new ProfilerSession("bench", "1");
                AtomicLong lines = new AtomicLong();
                AtomicLong samples = new AtomicLong();
                Thread profiler = null;
                // From before the profiler starts until it has written its
                // last profile: the session's own work is part of the cost.
                long cpu0 = cpuNanos();
                long t0 = System.nanoTime();
                if (on) {
                    profiler = new Thread(() -> {
                        try {
                            samples.set(session.run(mode, 3600, intervalMs, 2, 8, l -> lines.incrementAndGet()).samples);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }, "sparkscope-profiler");
                    profiler.start();
                }
                long work0 = System.nanoTime();
                workload(iterations);
                double workWall = (System.nanoTime() - work0) / 1e9;
                if (profiler != null) {
                    session.abort();
                    profiler.join();
                }
                double[] took = {(cpuNanos() - cpu0) / 1e9, workWall};
                System.out.println("{\"round\": " + round + ", \"profiled\": " + on + ", \"cpu_s\": " + took[0]
                        + ", \"wall_s\": " + took[1] + ", \"samples\": " + samples.get() + ", \"lines\": "
                        + lines.get() + "}");
            }
        }
    }
}
