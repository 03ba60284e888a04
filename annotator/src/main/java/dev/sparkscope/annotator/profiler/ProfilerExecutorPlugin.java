package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ApplicationIdTag;
import dev.sparkscope.annotator.core.SharedWriter;
import dev.sparkscope.annotator.core.SinkConfig;

import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;

import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The executor's side of the profiler. One thread asks the driver for work
 * every {@code pollSeconds} (5 s); another runs the profiles: on-demand requests first, and in the
 * gaps, when continuous profiling is on, one low-rate window after another.
 * A request that arrives during a continuous window ends that window early
 * (what it gathered is still written).
 */
public final class ProfilerExecutorPlugin implements ExecutorPlugin {

    private static final String STOP = "stop";

    private final LinkedBlockingQueue<String> work = new LinkedBlockingQueue<>();
    private volatile boolean stopping;
    private volatile ProfilerSession current;
    private volatile boolean currentIsContinuous;
    private PluginContext ctx;
    private ProfilerSettings settings;
    private SharedWriter.Handle writer;
    private SinkConfig config;
    private String appId;
    private String executorId;
    private Thread poller;
    private Thread profiler;

    @Override
    public void init(PluginContext ctx, Map<String, String> extraConf) {
        try {
            this.ctx = ctx;
            Function<String, String> conf = key -> ctx.conf().get(key, null);
            Setup setup = Setup.read(conf);
            settings = setup.settings;
            config = setup.sink;
            appId = ApplicationIdTag.resolve(conf);
            executorId = ctx.executorID();
            // Shared with the container sampler on this executor, if it runs.
            writer = SharedWriter.open(config, "sparkscope profiler", "profile line");
            profiler = daemon(this::profileLoop, "sparkscope-profiler");
            if (settings.control) {
                poller = daemon(this::pollLoop, "sparkscope-profiler-poll");
            }
        } catch (IllegalArgumentException e) {
            AnnotatorLog.warn("sparkscope profiler is off on executor " + (ctx == null ? "?" : ctx.executorID())
                    + ": " + e.getMessage() + ". Fix the setting (annotator README); the executor runs normally.");
        } catch (Throwable t) {
            AnnotatorLog.warn("sparkscope profiler is off on this executor: could not start: " + t);
        }
    }

    /** What an executor's profiler reads before it starts. */
    static final class Setup {
        final ProfilerSettings settings;
        final SinkConfig sink;

        private Setup(ProfilerSettings settings, SinkConfig sink) {
            this.settings = settings;
            this.sink = sink;
        }

        /**
         * The profiler's keys and the sink's, nothing else: another product's bad
         * setting (the listener's straggler ratio, say) leaves the profiler running.
         * Throws, naming the key, when one of these is bad.
         */
        static Setup read(Function<String, String> conf) {
            return new Setup(ProfilerSettings.parse(conf), SinkConfig.parse(conf));
        }
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    private void pollLoop() {
        boolean warned = false;
        while (!stopping) {
            try {
                Object reply = ctx.ask(ProfilerDriverPlugin.POLL + "\t" + executorId);
                String r = reply == null ? "" : reply.toString();
                if (r.startsWith(ProfilerDriverPlugin.RUN + "\t")) {
                    work.add(r);
                    ProfilerSession s = current;
                    if (s != null && currentIsContinuous) {
                        s.abort();
                    }
                }
                warned = false;
            } catch (Exception e) {
                if (!warned && !stopping) {
                    AnnotatorLog.warn("sparkscope profiler: the driver did not answer (" + e
                            + "); on-demand profiles wait until it does");
                    warned = true;
                }
            }
            sleep(settings.pollSeconds * 1000L);
        }
    }

    private void profileLoop() {
        while (!stopping) {
            String request;
            try {
                request = settings.continuous.equals("off") ? work.take() : work.poll(0, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (request == null) {
                runContinuousWindow();
            } else if (!request.equals(STOP)) {
                runRequest(request.split("\t", -1));
            }
        }
    }

    private void runRequest(String[] r) {
        String id = r[1];
        String mode = r[2];
        double seconds = Math.min(Double.parseDouble(r[3]), settings.maxSeconds);
        long interval = mode.equals("alloc") ? settings.allocIntervalBytes
                : mode.equals("lock") ? 10_000 : settings.intervalMs;
        report(id, "running", "", 0, "");
        try {
            ProfilerSession s = new ProfilerSession(appId, executorId);
            current = s;
            currentIsContinuous = false;
            ProfilerSession.Result res = s.run(mode, seconds, interval, settings.dumpS, settings.stageProfiles,
                    writer::enqueue);
            if (res.profiles == 0) {
                report(id, "failed", "", 0, "no samples in " + seconds + " s (an idle executor in cpu mode; "
                        + "try --mode wall)" + (res.note.isEmpty() ? "" : "; " + res.note));
            } else {
                report(id, "done", res.profileId, res.samples, res.note);
            }
        } catch (IllegalStateException e) {
            report(id, "failed", "", 0, e.getMessage());
            AnnotatorLog.warn("sparkscope profiler: profile " + id + " on executor " + executorId + " failed: "
                    + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            report(id, "failed", "", 0, e.toString());
        } finally {
            current = null;
        }
    }

    private void runContinuousWindow() {
        try {
            ProfilerSession s = new ProfilerSession(appId, executorId);
            current = s;
            currentIsContinuous = true;
            long interval = settings.continuous.equals("alloc") ? settings.allocIntervalBytes * 16
                    : settings.continuous.equals("lock") ? 1_000_000 : settings.continuousIntervalMs;
            s.run(settings.continuous, settings.continuousWindowS, interval, settings.dumpS, settings.stageProfiles,
                    writer::enqueue);
        } catch (IllegalStateException e) {
            AnnotatorLog.warn("sparkscope profiler: continuous profiling is off on executor " + executorId + ": "
                    + e.getMessage());
            settings = withoutContinuous();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stopping = true;
        } catch (RuntimeException e) {
            AnnotatorLog.warn("sparkscope profiler: a continuous window failed on executor " + executorId + ": " + e);
            sleep(settings.continuousWindowS * 1000L);
        } finally {
            current = null;
        }
    }

    private ProfilerSettings withoutContinuous() {
        return ProfilerSettings.parse(key -> key.equals(ProfilerSettings.CONTINUOUS) ? "off"
                : ctx.conf().get(key, null));
    }

    private void report(String id, String state, String profileId, long samples, String message) {
        try {
            ctx.send(ProfilerDriverPlugin.STATUS + "\t" + id + "\t" + state + "\t" + profileId + "\t" + samples
                    + "\t" + message.replace('\t', ' '));
        } catch (Exception e) {
            AnnotatorLog.warn("sparkscope profiler: could not tell the driver about profile " + id + ": " + e);
        }
    }

    private void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stopping = true;
        }
    }

    @Override
    public void shutdown() {
        stopping = true;
        ProfilerSession s = current;
        if (s != null) {
            s.abort();
        }
        work.add(STOP);
        if (poller != null) {
            poller.interrupt();
        }
        try {
            if (profiler != null) {
                // The session in flight notices the abort within one dump and writes what it has.
                profiler.join(settings == null ? 0 : (settings.dumpS + 1) * 1000L);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (writer != null) {
            writer.close(config.shutdownTimeoutMs);
        }
    }
}
