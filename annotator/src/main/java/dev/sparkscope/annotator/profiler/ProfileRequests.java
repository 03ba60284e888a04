package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.Json;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The driver's book of profile requests: queued until the executor asks for
 * work, then running, then done or failed. Bounded: old finished requests
 * are forgotten, and executors that stopped asking are dropped.
 */
final class ProfileRequests {

    static final int MAX_KEPT = 200;
    /** An executor that has not polled for this many of its poll periods is gone. */
    static final int POLLS_MISSED = 3;

    static final class Request {
        final String id;
        final String executorId;
        final String mode;
        final double seconds;
        volatile String state = "queued";
        volatile String message = "";
        volatile String profileId = "";
        volatile long samples;

        Request(String id, String executorId, String mode, double seconds) {
            this.id = id;
            this.executorId = executorId;
            this.mode = mode;
            this.seconds = seconds;
        }

        String json() {
            return "{\"id\":" + Json.quote(id) + ",\"executor\":" + Json.quote(executorId) + ",\"mode\":"
                    + Json.quote(mode) + ",\"seconds\":" + seconds + ",\"state\":" + Json.quote(state)
                    + ",\"message\":" + Json.quote(message) + ",\"profile\":" + Json.quote(profileId)
                    + ",\"samples\":" + samples + "}";
        }
    }

    private final AtomicLong ids = new AtomicLong();
    private final Map<String, Request> byId = new LinkedHashMap<>();
    private final Map<String, Deque<Request>> queued = new TreeMap<>();
    private final Map<String, Long> lastPoll = new TreeMap<>();

    synchronized Request add(String executorId, String mode, double seconds, long nowMs) {
        Request r = new Request(Long.toString(ids.incrementAndGet()), executorId, mode, seconds);
        byId.put(r.id, r);
        queued.computeIfAbsent(executorId, e -> new ArrayDeque<>()).add(r);
        forgetOld();
        return r;
    }

    synchronized Request get(String id) {
        return byId.get(id);
    }

    /** An executor asks for work: the next request for it, or null. */
    synchronized Request poll(String executorId, long nowMs) {
        lastPoll.put(executorId, nowMs);
        Deque<Request> q = queued.get(executorId);
        Request r = q == null ? null : q.poll();
        if (r != null) {
            r.state = "running";
        }
        return r;
    }

    synchronized void update(String id, String state, String message, String profileId, long samples) {
        Request r = byId.get(id);
        if (r != null) {
            r.state = state;
            r.message = message;
            r.profileId = profileId;
            r.samples = samples;
        }
    }

    /** Executors that polled recently: the ones a request can reach. */
    synchronized List<String> liveExecutors(long nowMs, long pollMs) {
        List<String> live = new ArrayList<>();
        for (Iterator<Map.Entry<String, Long>> it = lastPoll.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Long> e = it.next();
            if (nowMs - e.getValue() > POLLS_MISSED * pollMs + 2000) {
                it.remove();
                Deque<Request> q = queued.remove(e.getKey());
                if (q != null) {
                    for (Request r : q) {
                        r.state = "failed";
                        r.message = "executor " + e.getKey() + " went away before it could start the profile";
                    }
                }
            } else {
                live.add(e.getKey());
            }
        }
        return live;
    }

    private void forgetOld() {
        Iterator<Request> it = byId.values().iterator();
        while (byId.size() > MAX_KEPT && it.hasNext()) {
            Request r = it.next();
            if (!r.state.equals("queued") && !r.state.equals("running")) {
                it.remove();
            }
        }
    }
}
