package dev.sparkscope.annotator.profiler;

import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * async-profiler's collapsed output with thread frames ("[name tid=N];a;b;c count")
 * regrouped by what a Spark user asks about: the stage a task thread was
 * running, then (wall mode) whether the sample was running or waiting, then the
 * stack. Threads outside tasks are grouped by their name with the numbers
 * taken out ("shuffle-client-#-#", "GC Thread#"), so that a pool reads as one.
 *
 * Spark names a task thread "Executor task launch worker for task 3.0 in stage
 * 1.0 (TID 4)" while it runs a task, so the stage is read from the name the
 * thread had when the samples were dumped; a profile is dumped every few
 * seconds to keep that close to the truth.
 */
final class ProfileStacks {

    static final String OTHER = "JVM and Spark service threads";
    static final String IDLE_TASK_THREADS = "idle task threads";
    static final String RUNNING = "running";
    static final String WAITING = "waiting";

    private static final Pattern THREAD_FRAME = Pattern.compile("^\\[(.*?)(?: tid=\\d+)?]$");
    private static final Pattern STAGE = Pattern.compile("in stage (\\d+\\.\\d+)");
    /** Numbers in a thread name, with a "#" before them: "GC Thread#0" and "shuffle-client-4-1" read as one pool. */
    private static final Pattern DIGITS = Pattern.compile("#?\\d+");
    /**
     * Leaf frames of a thread that is off CPU: blocked in a syscall, parked,
     * sleeping, waiting on a monitor or a condition. Wall-clock samples whose
     * innermost frame matches are shown under "waiting".
     */
    private static final Pattern WAIT_LEAF = Pattern.compile(
            "(futex|_wait|wait_|epoll|poll$|select$|nanosleep|sleep|park|Object\\.wait|"
                    + "libc_read|__read|read0|readBytes|socketRead|recv|accept|pread|"
                    + "libc_write|__write|fsync|Unsafe\\.park|pthread_cond|sigtimedwait)", Pattern.CASE_INSENSITIVE);

    /** stage ("stage 1.0", or a group of other threads) -> regrouped stack -> samples. */
    final Map<String, Map<String, Long>> byGroup = new HashMap<>();
    long samples;
    private final boolean splitWaiting;
    private final int maxStacks;
    long droppedLines;

    ProfileStacks(boolean splitWaiting, int maxStacks) {
        this.splitWaiting = splitWaiting;
        this.maxStacks = maxStacks;
    }

    /** Adds one dump of collapsed text. Lines that do not parse are counted, not fatal. */
    void add(String collapsed) {
        int start = 0;
        while (start < collapsed.length()) {
            int end = collapsed.indexOf('\n', start);
            if (end < 0) {
                end = collapsed.length();
            }
            addLine(collapsed.substring(start, end));
            start = end + 1;
        }
    }

    void addLine(String line) {
        int space = line.lastIndexOf(' ');
        if (space <= 0) {
            if (!line.trim().isEmpty()) {
                droppedLines++;
            }
            return;
        }
        long count;
        try {
            count = Long.parseLong(line.substring(space + 1).trim());
        } catch (NumberFormatException e) {
            droppedLines++;
            return;
        }
        String stack = line.substring(0, space);
        String group = OTHER;
        String threadName = null;
        if (stack.startsWith("[")) {
            int semi = stack.indexOf("];");
            int close = semi >= 0 ? semi + 1 : stack.length();
            Matcher m = THREAD_FRAME.matcher(stack.substring(0, close));
            if (m.matches()) {
                threadName = m.group(1);
            }
            stack = semi >= 0 ? stack.substring(semi + 2) : "";
        }
        if (threadName != null) {
            Matcher stage = STAGE.matcher(threadName);
            if (stage.find()) {
                group = "stage " + stage.group(1);
                threadName = null;
            } else if (threadName.startsWith("Executor task launch worker")) {
                group = IDLE_TASK_THREADS;
                threadName = null;
            }
        }
        StringBuilder key = new StringBuilder();
        if (threadName != null) {
            key.append(DIGITS.matcher(threadName).replaceAll("#")).append(';');
        }
        if (splitWaiting) {
            key.append(isWaiting(stack) ? WAITING : RUNNING).append(';');
        }
        key.append(stack);
        Map<String, Long> stacks = byGroup.computeIfAbsent(group, g -> new HashMap<>());
        String k = key.toString();
        if (!stacks.containsKey(k) && distinctStacks() >= maxStacks) {
            // Bounded memory for a long window: a new stack past the cap is
            // counted under its group alone.
            k = key.length() > 0 && threadName != null ? DIGITS.matcher(threadName).replaceAll("#") : "(more stacks)";
        }
        stacks.merge(k, count, Long::sum);
        samples += count;
    }

    private int distinctStacks() {
        int n = 0;
        for (Map<String, Long> m : byGroup.values()) {
            n += m.size();
        }
        return n;
    }

    static boolean isWaiting(String stack) {
        // The innermost frame that is not a kernel frame ("_[k]") decides.
        String[] frames = stack.split(";");
        for (int i = frames.length - 1; i >= 0; i--) {
            if (!frames[i].endsWith("_[k]")) {
                return WAIT_LEAF.matcher(frames[i]).find();
            }
        }
        return false;
    }

    /** Stacks of one group, or all groups under their group frame (group == null). */
    Map<String, Long> stacks(String group) {
        Map<String, Long> out = new HashMap<>();
        for (Map.Entry<String, Map<String, Long>> g : byGroup.entrySet()) {
            if (group != null && !group.equals(g.getKey())) {
                continue;
            }
            for (Map.Entry<String, Long> s : g.getValue().entrySet()) {
                String k = group != null ? s.getKey() : g.getKey() + ";" + s.getKey();
                out.merge(k, s.getValue(), Long::sum);
            }
        }
        return out;
    }

    /** Samples per group, for picking the stages worth a profile of their own. */
    Map<String, Long> groupTotals() {
        Map<String, Long> out = new HashMap<>();
        for (Map.Entry<String, Map<String, Long>> g : byGroup.entrySet()) {
            long sum = 0;
            for (long v : g.getValue().values()) {
                sum += v;
            }
            out.put(g.getKey(), sum);
        }
        return out;
    }
}
