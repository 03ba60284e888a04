package dev.sparkscope.annotator.profiler;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * One profile of this JVM: async-profiler runs for the requested time and is
 * dumped every few seconds (so each sample's stage is read from the task
 * thread's name close to when it was taken); the dumps are regrouped by stage
 * and written as one profile for the whole window plus one per busiest stage.
 *
 * async-profiler is loaded only when a profile is asked for; if it cannot be
 * (no native library for this platform, a JVM that refuses it) the request
 * fails with that reason and the executor carries on.
 */
final class ProfilerSession {

    /** What a finished session reports back to whoever asked. */
    static final class Result {
        final String profileId;
        final long samples;
        final int profiles;
        final String note;

        Result(String profileId, long samples, int profiles, String note) {
            this.profileId = profileId;
            this.samples = samples;
            this.profiles = profiles;
            this.note = note;
        }
    }

    static final double MIN_SHARE = 0.0005;
    static final int MAX_STACKS = 50_000;

    /** The profiler is process-wide: one session at a time. */
    private static final Object RUNNING = new Object();

    private final String appId;
    private final String executorId;
    private volatile boolean aborted;

    ProfilerSession(String appId, String executorId) {
        this.appId = appId;
        this.executorId = executorId;
    }

    void abort() {
        aborted = true;
    }

    /**
     * Profiles for {@code seconds} and hands the line protocol to {@code sink}.
     * Throws IllegalStateException with a user-facing reason when the profiler
     * cannot run here.
     */
    Result run(String mode, double seconds, long interval, int dumpS, int stageProfiles, Consumer<String> sink)
            throws InterruptedException {
        synchronized (RUNNING) {
            Object profiler = AsyncProfilerHandle.load();
            long startMs = System.currentTimeMillis();
            long deadline = System.nanoTime() + (long) (seconds * 1e9);
            ProfileStacks stacks = new ProfileStacks(mode.equals("wall"), MAX_STACKS);
            String event = mode;
            String note = "";
            boolean alloc = mode.equals("alloc") || mode.equals("lock");
            String intervalArg = alloc ? Long.toString(interval) : interval + "ms";
            try {
                while (!aborted) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        AsyncProfilerHandle.execute(profiler, "start,event=" + event + ",interval=" + intervalArg
                                + ",threads");
                    } catch (IllegalStateException e) {
                        if (!event.equals("cpu")) {
                            throw e;
                        }
                        // No perf events here (perf_event_paranoid, a container): CPU time
                        // per thread from a POSIX timer instead, which needs no privileges.
                        event = "itimer";
                        note = "perf events unavailable (" + e.getMessage() + "), sampled with itimer";
                        AsyncProfilerHandle.execute(profiler, "start,event=itimer,interval=" + intervalArg
                                + ",threads");
                    }
                    long chunk = Math.min(left, dumpS * 1_000_000_000L);
                    Thread.sleep(Math.max(1, chunk / 1_000_000));
                    AsyncProfilerHandle.execute(profiler, "stop");
                    stacks.add(AsyncProfilerHandle.execute(profiler, alloc ? "collapsed=total,threads"
                            : "collapsed,threads"));
                }
            } finally {
                try {
                    AsyncProfilerHandle.execute(profiler, "stop");
                } catch (IllegalStateException ignored) {
                    // not running: the normal case
                }
            }
            double took = (System.currentTimeMillis() - startMs) / 1000.0;
            double shown = Math.round(took * 10) / 10.0;
            String unit = mode.equals("alloc") ? "bytes" : "ns";
            long scale = alloc ? 1 : interval * 1_000_000L;
            List<String> lines = new ArrayList<>();
            String root = "executor " + executorId + " " + mode;
            List<NestedSet.Row> all = NestedSet.rows(stacks.stacks(null), root, MIN_SHARE, scale);
            lines.addAll(ProfileLines.lines(appId, executorId, mode, startMs, shown, "", 0, all, stacks.samples, unit));
            int profiles = all.isEmpty() ? 0 : 1;
            int slot = 1;
            List<Map.Entry<String, Long>> groups = new ArrayList<>(stacks.groupTotals().entrySet());
            groups.sort((a, b) -> Long.compare(b.getValue(), a.getValue()));
            for (Map.Entry<String, Long> g : groups) {
                if (slot > stageProfiles || slot * ProfileLines.SLOT_NS >= took * 1e9) {
                    break;
                }
                if (!g.getKey().startsWith("stage ")) {
                    continue;
                }
                List<NestedSet.Row> rows = NestedSet.rows(stacks.stacks(g.getKey()), g.getKey() + " on executor "
                        + executorId + " " + mode, MIN_SHARE, scale);
                lines.addAll(ProfileLines.lines(appId, executorId, mode, startMs, shown, g.getKey(), slot, rows,
                        g.getValue(), unit));
                slot++;
                profiles++;
            }
            for (String line : lines) {
                sink.accept(line);
            }
            if (stacks.droppedLines > 0) {
                note = (note.isEmpty() ? "" : note + "; ") + stacks.droppedLines + " profiler lines not understood";
            }
            return new Result(ProfileLines.profileId(executorId, mode, startMs, shown, ""), stacks.samples,
                    profiles, note);
        }
    }
}
