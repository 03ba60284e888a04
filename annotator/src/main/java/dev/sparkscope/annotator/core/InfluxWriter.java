package dev.sparkscope.annotator.core;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Hands lines from Spark's listener-bus thread to InfluxDB without ever
 * making that thread wait: {@link #enqueue} only touches a queue bounded in
 * bytes (when full, the oldest lines are dropped and counted), and one
 * daemon thread batches, POSTs and retries. InfluxDB being down, slow or
 * answering errors costs lines, never Spark's time. Lines dropped while the
 * application runs are reported as they happen, at most once a minute.
 *
 * <p>One writer serves every part of the jar in a JVM (see SharedWriter):
 * each part writes through its own {@link Source}, which counts its lines
 * and words its warnings in its own name, so a reader of the log can tell
 * whose points were lost even though they travel in the same batches.
 */
public final class InfluxWriter {

    /** Tuning of the writer; {@link #from} takes the user's settings. */
    public static final class Settings {
        long queueMaxBytes = SinkConfig.DEFAULT_QUEUE_MAX_BYTES;
        int batchSize = 500;
        long flushIntervalMs = 1000;
        int maxAttempts = 3;
        /** How long a batch waits through a listener that cannot be reached (see send). */
        long outageWaitMs = SinkConfig.DEFAULT_OUTAGE_WAIT_MS;
        long initialBackoffMs = 250;
        long maxBackoffMs = 5000;
        int connectTimeoutMs = 1000;
        int readTimeoutMs = 5000;
        long warningIntervalMs = 60_000;

        public static Settings from(SinkConfig c) {
            Settings s = new Settings();
            s.queueMaxBytes = c.queueMaxBytes;
            s.batchSize = c.batchSize;
            s.flushIntervalMs = c.flushIntervalMs;
            s.maxAttempts = c.maxAttempts;
            s.outageWaitMs = c.outageWaitMs;
            s.connectTimeoutMs = c.connectTimeoutMs;
            s.readTimeoutMs = c.readTimeoutMs;
            return s;
        }
    }

    private static final long SHUTDOWN_BACKOFF_MS = 250;

    /**
     * One part's use of the writer: its name in the log ("sparkscope container
     * memory"), what its lines are called ("container sample"), its counts and
     * its own rate limits, so that one part's failures never silence another's.
     */
    public final class Source {
        private final String label;
        private final String unit;
        private final RateLimitedWarning failureWarning;
        private final RateLimitedWarning dropWarning;
        private final AtomicLong accepted = new AtomicLong();
        private final AtomicLong droppedQueueFull = new AtomicLong();
        private final AtomicLong written = new AtomicLong();
        private final AtomicLong linesGivenUp = new AtomicLong();
        private final AtomicLong discardedAtShutdown = new AtomicLong();
        private long droppedReported;

        Source(String label, String unit) {
            this.label = label;
            this.unit = unit;
            this.failureWarning = new RateLimitedWarning(warn, settings.warningIntervalMs, System::currentTimeMillis);
            this.dropWarning = new RateLimitedWarning(warn, settings.warningIntervalMs, System::currentTimeMillis);
        }

        /** Never blocks. When the queue is full the oldest lines make room and are counted as dropped. */
        public void enqueue(String line) {
            InfluxWriter.this.enqueue(this, line);
        }

        public String label() {
            return label;
        }

        long written() {
            return written.get();
        }

        long discardedAtShutdown() {
            return discardedAtShutdown.get();
        }

        private String lines(long n) {
            return n + " " + unit + (n == 1 ? "" : "s");
        }
    }

    /** A queued line and the part that wrote it. */
    private static final class Entry {
        final String line;
        final Source source;

        Entry(String line, Source source) {
            this.line = line;
            this.source = source;
        }
    }

    private final HttpLineSender sender;
    private final Settings settings;
    private final String endpoint;
    private final Consumer<String> warn;
    private final Consumer<String> info;
    private final LinkedBlockingQueue<Entry> queue = new LinkedBlockingQueue<>();
    /** Every part that ever wrote here, in the order they came: each gets its own summary at the end. */
    private final List<Source> sources = new CopyOnWriteArrayList<>();
    /** The lines of enqueue(String): the constructor's caller, when one part alone writes here. */
    private final Source defaultSource;
    /** Approximate memory held by the queue: see {@link #cost}. */
    private final AtomicLong queuedBytes = new AtomicLong();
    private final Thread thread;

    private final AtomicLong accepted = new AtomicLong();
    private final AtomicLong droppedQueueFull = new AtomicLong();
    private final AtomicLong written = new AtomicLong();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong batchesGivenUp = new AtomicLong();
    private final AtomicLong linesGivenUp = new AtomicLong();
    private final AtomicLong discardedAtShutdown = new AtomicLong();

    private volatile boolean stopping;
    private volatile long deadlineNanos;
    private final AtomicBoolean shutdownCalled = new AtomicBoolean();
    // Writer thread only: once a write fails during shutdown, the rest is not tried.
    private boolean abandonRest;

    public InfluxWriter(HttpLineSender sender, Settings settings, Consumer<String> warn, Consumer<String> info) {
        this(sender, settings, warn, info, "sparkscope annotator", "annotation line");
    }

    /** label, unit: how the log names enqueue(String)'s lines (see Source); null for none. */
    public InfluxWriter(HttpLineSender sender, Settings settings, Consumer<String> warn, Consumer<String> info,
                        String label, String unit) {
        this.sender = sender;
        this.settings = settings;
        this.endpoint = redact(sender.url().toString());
        this.warn = warn;
        this.info = info;
        this.thread = new Thread(this::run, "sparkscope-writer");
        this.thread.setDaemon(true);
        this.defaultSource = label == null ? null : source(label, unit);
    }

    /** A new part writing here, named in the log as label (its lines called unit). */
    public Source source(String label, String unit) {
        Source s = new Source(label, unit);
        sources.add(s);
        return s;
    }

    /** The endpoint, credentials hidden: for the parts' own log lines. */
    public String endpoint() {
        return endpoint;
    }

    public void start() {
        thread.start();
    }

    /** Never blocks. When the queue is full the oldest lines make room and are counted as dropped. */
    public void enqueue(String line) {
        enqueue(defaultSource, line);
    }

    private void enqueue(Source source, String line) {
        if (stopping) {
            discardedAtShutdown.incrementAndGet();
            source.discardedAtShutdown.incrementAndGet();
            return;
        }
        accepted.incrementAndGet();
        source.accepted.incrementAndGet();
        long cost = cost(line);
        if (cost > settings.queueMaxBytes) {
            droppedQueueFull.incrementAndGet();
            source.droppedQueueFull.incrementAndGet();
            return;
        }
        queue.offer(new Entry(line, source));
        // Only the writer thread takes lines out besides this loop, so it ends quickly.
        while (queuedBytes.addAndGet(cost) > settings.queueMaxBytes) {
            Entry oldest = queue.poll();
            cost = 0;
            if (oldest == null) {
                break;
            }
            queuedBytes.addAndGet(-cost(oldest.line));
            droppedQueueFull.incrementAndGet();
            oldest.source.droppedQueueFull.incrementAndGet();
        }
    }

    /** Memory a queued line holds, about: its characters (at most 2 bytes each) and the node around it. */
    static long cost(String line) {
        return 2L * line.length() + 64;
    }

    private Entry take(Entry entry) {
        if (entry != null) {
            queuedBytes.addAndGet(-cost(entry.line));
        }
        return entry;
    }

    long queuedBytes() {
        return queuedBytes.get();
    }

    /**
     * Sends what is queued, then stops, waiting at most {@code timeoutMs}.
     * Returns whether everything queued was sent before the deadline.
     */
    public boolean shutdown(long timeoutMs) {
        if (!shutdownCalled.compareAndSet(false, true)) {
            return false;
        }
        deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        stopping = true;
        thread.interrupt(); // wakes a waiting poll or backoff sleep; HTTP calls are bounded by their timeouts
        boolean finished;
        try {
            thread.join(Math.max(1, timeoutMs));
            finished = !thread.isAlive();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            finished = false;
        }
        if (!finished) {
            discardQueued();
        }
        logSummary(finished, timeoutMs);
        return finished && linesGivenUp.get() == 0 && discardedAtShutdown.get() == 0;
    }

    long accepted() {
        return accepted.get();
    }

    long droppedQueueFull() {
        return droppedQueueFull.get();
    }

    long written() {
        return written.get();
    }

    long requests() {
        return requests.get();
    }

    long batchesGivenUp() {
        return batchesGivenUp.get();
    }

    long linesGivenUp() {
        return linesGivenUp.get();
    }

    long discardedAtShutdown() {
        return discardedAtShutdown.get();
    }

    /** Lines waiting, oldest first (tests). */
    List<String> pending() {
        List<String> lines = new ArrayList<>();
        for (Entry e : queue) {
            lines.add(e.line);
        }
        return lines;
    }

    boolean isRunning() {
        return thread.isAlive();
    }

    private void run() {
        List<Entry> batch = new ArrayList<>(Math.min(settings.batchSize, 4096));
        while (true) {
            if (stopping && (queue.isEmpty() || pastDeadline() || abandonRest)) {
                break;
            }
            Thread.interrupted(); // a stale interrupt must not break the next wait or request
            try {
                reportDrops();
                Entry first = take(stopping ? queue.poll()
                        : queue.poll(settings.flushIntervalMs, TimeUnit.MILLISECONDS));
                if (first == null) {
                    continue;
                }
                batch.add(first);
                fillBatch(batch);
                send(batch);
            } catch (InterruptedException e) {
                // shutdown() woke the first poll (batch still empty): the loop re-checks the stop flag
            } catch (Throwable t) {
                linesGivenUp.addAndGet(batch.size());
                for (Map.Entry<Source, Integer> e : bySource(batch).entrySet()) {
                    Source s = e.getKey();
                    s.linesGivenUp.addAndGet(e.getValue());
                    if (!(t instanceof VirtualMachineError)) {
                        s.failureWarning.warn(() -> s.label + ": unexpected error in the InfluxDB writer, "
                                + s.lines(e.getValue()) + " lost: " + t);
                    }
                }
                if (t instanceof VirtualMachineError) {
                    throw (VirtualMachineError) t;
                }
            } finally {
                batch.clear();
            }
        }
        discardQueued();
    }

    private void discardQueued() {
        Entry e;
        while ((e = take(queue.poll())) != null) {
            discardedAtShutdown.incrementAndGet();
            e.source.discardedAtShutdown.incrementAndGet();
        }
    }

    /** How many lines of the batch each part wrote, in the order the parts first appear. */
    private static Map<Source, Integer> bySource(List<Entry> batch) {
        Map<Source, Integer> counts = new LinkedHashMap<>();
        for (Entry e : batch) {
            counts.merge(e.source, 1, Integer::sum);
        }
        return counts;
    }

    /** Lines dropped from the full queue since the last report: logged now, at most once a minute. */
    private void reportDrops() {
        for (Source s : sources) {
            long dropped = s.droppedQueueFull.get();
            if (dropped > s.droppedReported && !stopping) {
                boolean logged = s.dropWarning.warn(() -> s.label + ": " + s.lines(dropped - s.droppedReported)
                        + " dropped because the queue was full (" + SinkConfig.QUEUE_MAX_BYTES
                        + "=" + settings.queueMaxBytes + "; is InfluxDB keeping up?); " + dropped + " in all so far");
                if (logged) {
                    s.droppedReported = dropped;
                }
            }
        }
    }

    /** Takes more lines until the batch is full or the first line has waited flushIntervalMs. */
    private void fillBatch(List<Entry> batch) {
        long flushAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.flushIntervalMs);
        while (batch.size() < settings.batchSize) {
            int before = batch.size();
            queue.drainTo(batch, settings.batchSize - batch.size());
            for (int i = before; i < batch.size(); i++) {
                take(batch.get(i));
            }
            if (batch.size() >= settings.batchSize || stopping) {
                return;
            }
            long waitNanos = flushAt - System.nanoTime();
            if (waitNanos <= 0) {
                return;
            }
            Entry next;
            try {
                next = queue.poll(waitNanos, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                return; // shutdown() woke us: send what we have, then the rest
            }
            if (next == null) {
                return;
            }
            batch.add(take(next));
        }
    }

    private void send(List<Entry> batch) {
        StringBuilder sb = new StringBuilder(batch.size() * 160);
        for (Entry e : batch) {
            sb.append(e.line).append('\n');
        }
        Map<Source, Integer> bySource = bySource(batch);
        byte[] body = sb.toString().getBytes(StandardCharsets.UTF_8);
        String lastProblem = "";
        long outageSince = 0;
        // maxAttempts bounds the tries against a listener that answers errors. One
        // that cannot be reached (Telegraf restarting, a config change) is waited
        // for up to outageWaitMs while the application runs: the queue behind this
        // batch keeps its byte bound and drops (counted, logged) only when full.
        for (int attempt = 1; ; attempt++) {
            if (attempt > 1) {
                long backoff = Math.min(settings.maxBackoffMs, settings.initialBackoffMs << Math.min(20, attempt - 2));
                if (stopping) {
                    backoff = Math.min(backoff, SHUTDOWN_BACKOFF_MS); // Spark is waiting for us
                }
                if (stopping && remainingMs() < backoff) {
                    break;
                }
                sleep(backoff);
            }
            if (stopping && pastDeadline()) {
                break;
            }
            int connectTimeout = settings.connectTimeoutMs;
            int readTimeout = settings.readTimeoutMs;
            if (stopping) {
                int remaining = (int) Math.max(1, Math.min(Integer.MAX_VALUE, remainingMs()));
                connectTimeout = Math.min(connectTimeout, remaining);
                readTimeout = Math.min(readTimeout, remaining);
            }
            requests.incrementAndGet();
            try {
                Thread.interrupted();
                HttpLineSender.Response response = sender.post(body, connectTimeout, readTimeout);
                if (response.ok()) {
                    written.addAndGet(batch.size());
                    for (Map.Entry<Source, Integer> e : bySource.entrySet()) {
                        e.getKey().written.addAndGet(e.getValue());
                    }
                    return;
                }
                int rejected = rejectedLines(response, batch.size());
                if (rejected >= 0) {
                    // A partial write: InfluxDB and Telegraf keep the good lines of the batch.
                    written.addAndGet(batch.size() - rejected);
                    linesGivenUp.addAndGet(rejected);
                    // InfluxDB does not say which lines it refused: each part with lines in the
                    // batch is told the batch's count, and the refusals are charged in batch order.
                    int left = rejected;
                    for (Map.Entry<Source, Integer> e : bySource.entrySet()) {
                        int lost = Math.min(left, e.getValue());
                        left -= lost;
                        Source s = e.getKey();
                        s.linesGivenUp.addAndGet(lost);
                        s.written.addAndGet(e.getValue() - lost);
                        s.failureWarning.warn(() -> s.label + ": " + rejected + " of " + s.lines(batch.size())
                                + " were refused by " + endpoint + " (the rest was written): "
                                + describe(response) + ". Spark is not affected.");
                    }
                    return;
                }
                lastProblem = describe(response);
                if (!response.retryable() || attempt >= settings.maxAttempts) {
                    break;
                }
            } catch (IOException e) {
                lastProblem = describe(e);
                if (stopping || settings.outageWaitMs <= 0) {
                    if (attempt >= settings.maxAttempts) {
                        break;
                    }
                    continue;
                }
                long now = System.nanoTime();
                outageSince = outageSince == 0 ? now : outageSince;
                long waitedMs = TimeUnit.NANOSECONDS.toMillis(now - outageSince);
                if (waitedMs >= settings.outageWaitMs) {
                    break;
                }
                reportDrops();
                String problem = lastProblem;
                for (Map.Entry<Source, Integer> part : bySource.entrySet()) {
                    Source s = part.getKey();
                    s.failureWarning.warn(() -> s.label + ": " + endpoint + " " + problem + "; holding "
                            + s.lines(part.getValue()) + " and the queue (" + SinkConfig.QUEUE_MAX_BYTES
                            + "=" + settings.queueMaxBytes + ") and trying again for up to "
                            + (settings.outageWaitMs / 1000) + " s (" + SinkConfig.OUTAGE_WAIT_MS
                            + "). Spark is not affected.");
                }
            }
        }
        giveUp(bySource, lastProblem);
    }

    private static final Pattern DROPPED = Pattern.compile("dropped=(\\d+)");
    private static final Pattern OTHER_ERRORS = Pattern.compile("and (\\d+) other parse error");

    /**
     * For a 400 answer that refused only some lines of the batch: how many.
     * InfluxDB says "partial write: ... dropped=N"; Telegraf's listener keeps
     * the lines it could parse and answers "metric parse error: <first>
     * (and N other parse errors)". Returns -1 when the whole batch was refused.
     */
    static int rejectedLines(HttpLineSender.Response r, int batchSize) {
        boolean partial = r.body.contains("partial write") || r.body.contains("metric parse error");
        if (r.status != 400 || !partial) {
            return -1;
        }
        Matcher m = DROPPED.matcher(r.body);
        if (m.find()) {
            return (int) Math.min(batchSize, Long.parseLong(m.group(1)));
        }
        m = OTHER_ERRORS.matcher(r.body);
        if (m.find()) {
            return (int) Math.min(batchSize, 1 + Long.parseLong(m.group(1)));
        }
        return Math.min(1, batchSize);
    }

    private void giveUp(Map<Source, Integer> bySource, String problem) {
        if (stopping) {
            // InfluxDB failed while Spark is stopping: do not make Spark wait on the rest.
            abandonRest = true;
        }
        batchesGivenUp.incrementAndGet();
        for (Map.Entry<Source, Integer> e : bySource.entrySet()) {
            Source s = e.getKey();
            int lines = e.getValue();
            linesGivenUp.addAndGet(lines);
            s.linesGivenUp.addAndGet(lines);
            s.failureWarning.warn(() -> s.label + ": could not write " + s.lines(lines)
                    + " to InfluxDB at " + endpoint + ": " + problem
                    + ". Spark is not affected. So far " + batchesGivenUp.get() + " batch(es) ("
                    + s.linesGivenUp.get() + " of its lines) given up, " + s.droppedQueueFull.get()
                    + " lines dropped from the full queue; next warning in "
                    + (settings.warningIntervalMs / 1000) + " s at the earliest.");
        }
    }

    /** One line per part that wrote here: each reader of the log looks for its own. */
    private void logSummary(boolean finished, long timeoutMs) {
        for (Source s : sources) {
            long lost = s.linesGivenUp.get() + s.droppedQueueFull.get() + s.discardedAtShutdown.get();
            String counts = s.lines(s.written.get()) + " written to " + endpoint + ", "
                    + s.linesGivenUp.get() + " given up after failed writes, "
                    + s.droppedQueueFull.get() + " dropped from the full queue, "
                    + s.discardedAtShutdown.get() + " not sent at shutdown";
            if (!finished) {
                warn.accept(s.label + ": stopped waiting for InfluxDB after " + timeoutMs
                        + " ms (" + SinkConfig.SHUTDOWN_TIMEOUT_MS + "): " + counts + ".");
            } else if (lost > 0) {
                warn.accept(s.label + ": stopped: " + counts + ".");
            } else {
                info.accept(s.label + ": stopped: " + counts + ".");
            }
        }
    }

    private String describe(HttpLineSender.Response r) {
        String body = r.body.isEmpty() ? "" : ": " + r.body;
        if (r.status == 404 && r.body.contains("database not found")) {
            return "InfluxDB answered 404" + body + " (create the database, e.g. with ./sparkscope up, or set "
                    + SinkConfig.DATABASE + ")";
        }
        if (r.status == 401 || r.status == 403) {
            return "InfluxDB answered " + r.status + body + " (check " + SinkConfig.USERNAME + " and "
                    + SinkConfig.PASSWORD + ")";
        }
        return "InfluxDB answered HTTP " + r.status + body;
    }

    private String describe(IOException e) {
        String hint = " (is InfluxDB up? run ./sparkscope up, or check " + SinkConfig.URL_KEY + ")";
        if (e instanceof ConnectException) {
            return "not reachable (" + e.getMessage() + ")" + hint;
        }
        if (e instanceof SocketTimeoutException) {
            return "no answer in time (" + e.getMessage() + ")" + hint;
        }
        if (e instanceof UnknownHostException) {
            return "unknown host " + e.getMessage() + hint;
        }
        return e.getClass().getSimpleName() + ": " + e.getMessage() + hint;
    }

    private void sleep(long ms) {
        if (stopping) {
            ms = Math.min(ms, remainingMs());
        }
        if (ms > 0) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                // shutdown() started: carry on with the retry within its deadline
            }
        }
    }

    private boolean pastDeadline() {
        return System.nanoTime() - deadlineNanos >= 0;
    }

    private long remainingMs() {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    /** Hides credentials someone may have put in the URL. */
    public static String redact(String url) {
        return url.replaceFirst("//[^/@]*@", "//***@");
    }
}
