package dev.sparkscope.annotator.proctree;

import dev.sparkscope.annotator.core.ProcessTreePeaks;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The resident memory of one JVM's process tree, read from /proc without
 * starting a process: Spark's ProcfsMetricsGetter forks {@code pgrep -P} for
 * every process of the tree at every poll, which cost 0.4-1.1 % of Spark's CPU
 * (docs/performance.md).
 *
 * <p>The same split as Spark's: JVM (the JVM process itself), Python (its
 * descendants whose command contains "python": PySpark's daemon and workers)
 * and other (every other descendant). One difference: Spark counts a
 * descendant whose command contains "java" as JVM; here it is "other", as the
 * JVM is the one process the executor is.
 *
 * <p>Descendants: from {@code /proc/<pid>/task/<tid>/children} of every thread
 * (a child belongs to the thread that forked it) where the kernel offers it
 * (CONFIG_PROC_CHILDREN, Linux 4.2+ in every common distribution), else from
 * one pass over {@code /proc/<pid>/stat} building the parent map.
 *
 * <p>Resident memory: {@code /proc/<pid>/statm}'s second number (pages) times
 * the page size. The kernel computes it with the same counters as VmRSS in
 * {@code /proc/<pid>/status} (get_mm_rss: anonymous + file + shared memory
 * pages), so it equals VmRSS exactly; statm is seven numbers where status is
 * some fifty formatted lines, and reading {@code /proc/<pid>/stat} (Spark's
 * source) walks every thread of the JVM to sum their CPU times. The command
 * comes from {@code /proc/<pid>/comm} (the same 15 characters as stat's).
 *
 * <p>A process that exits between the listing and its reads is skipped with
 * its subtree (it holds no memory any more); only the JVM's own statm must
 * read. Not thread-safe: one sampler thread reads.
 *
 * <p>The walk over every thread's children file is most of a read's cost (an
 * executor has about a hundred threads), so it is skipped while the tree's
 * membership cannot have changed. A process joins the tree only by being
 * created, and every process or thread created in this pid namespace (or a
 * namespace under it) takes a new pid, which {@code /proc/loadavg}'s last field
 * names (the newest pid). So while that field reads as at the last walk, the
 * descendants are the ones the walk found, less those that exited: each of
 * them is read again (command and size), and the first that is gone or a
 * zombie (no resident pages: it exited and its children were reparented out
 * of the tree) makes this read walk again. Without a readable loadavg every
 * read walks.
 *
 * <p>When the newest pid has moved, it was mostly a thread (a JVM starts
 * threads all the time; the bench saw the driver's walk of a local cluster
 * cost 45-90 ms a short run). /proc's listing names processes only, never
 * threads, so the read lists it and looks at the processes that were not
 * listed last time: one whose parent is the JVM or a descendant joins the tree
 * (its stat's parent field; repeated until no more join, for a child listed
 * before its parent). A pid reused by a new process within one polling period
 * (only after the kernel's pid counter wrapped) would be missed that way, so
 * every {@link #FULL_WALK_EVERY}th read walks in full anyway.
 */
final class ProcessTree {

    /** A tree larger than this is cut (a fork bomb under an executor must not stall the sampler). */
    static final int MAX_PROCESSES = 4096;
    static final long DEFAULT_PAGE_SIZE = 4096;
    /** A full walk at least this often (reads), whatever the newest pid says: 1 min at the 2 s polling. */
    static final int FULL_WALK_EVERY = 30;
    /** AT_PAGESZ in the ELF auxiliary vector (/proc/self/auxv). */
    private static final long AT_PAGESZ = 6;

    private final Path proc;
    private final String pid;
    private final long pageSize;
    private final boolean childrenFiles;
    /** The newest pid at the start of the last walk, or null (walk every time). */
    private String newestAtWalk;
    /** The descendants the last walk found, in the order it found them. */
    private List<String> members = new ArrayList<>();
    /** The processes /proc listed at the last walk or listing; null: list at the next walk. */
    private Set<String> listed;
    private int readsSinceWalk;
    private long walks;
    private long listings;

    ProcessTree(Path proc, String pid, long pageSize, boolean childrenFiles) {
        this.proc = proc;
        this.pid = pid;
        this.pageSize = pageSize;
        this.childrenFiles = childrenFiles;
    }

    /**
     * This JVM's tree under proc (normally /proc), or null with why[0] saying
     * why not: no /proc (not Linux), or a /proc without statm.
     */
    static ProcessTree locate(Path proc, String[] why) {
        Path self = proc.resolve("self");
        String pid;
        try {
            pid = Files.readSymbolicLink(self).getFileName().toString();
        } catch (IOException | UnsupportedOperationException e) {
            why[0] = "no " + self + " (not Linux, or /proc not mounted): process-tree memory is not measured";
            return null;
        }
        if (!Files.isReadable(proc.resolve(pid).resolve("statm"))) {
            why[0] = proc.resolve(pid).resolve("statm") + " is not readable: process-tree memory is not measured";
            return null;
        }
        boolean children = Files.isReadable(proc.resolve(pid).resolve("task").resolve(pid).resolve("children"));
        return new ProcessTree(proc, pid, pageSize(proc.resolve(pid).resolve("auxv")), children);
    }

    /** The page size the kernel gave this process (AT_PAGESZ); 4096 when auxv cannot be read. */
    static long pageSize(Path auxv) {
        try {
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(auxv)).order(ByteOrder.nativeOrder());
            boolean wide = !"32".equals(System.getProperty("sun.arch.data.model"));
            int word = wide ? 8 : 4;
            while (b.remaining() >= 2 * word) {
                long type = wide ? b.getLong() : b.getInt() & 0xffffffffL;
                long value = wide ? b.getLong() : b.getInt() & 0xffffffffL;
                if (type == AT_PAGESZ && value > 0) {
                    return value;
                }
                if (type == 0) {
                    break;
                }
            }
        } catch (IOException | RuntimeException ignored) {
            // the usual size below
        }
        return DEFAULT_PAGE_SIZE;
    }

    String pid() {
        return pid;
    }

    boolean readsChildrenFiles() {
        return childrenFiles;
    }

    /**
     * Bytes resident now: {JVM, Python, other} (ProcessTreePeaks' order).
     * Throws IOException when the JVM's own statm cannot be read.
     */
    long[] read() throws IOException {
        long[] sizes = new long[ProcessTreePeaks.SIZES];
        sizes[ProcessTreePeaks.JVM] = resident(pid);
        String newest = newestPid();
        if (newest != null && ++readsSinceWalk < FULL_WALK_EVERY) {
            if (newest.equals(newestAtWalk) && readMembers(sizes)) {
                return sizes;
            }
            if (!newest.equals(newestAtWalk) && joinNewProcesses()) {
                newestAtWalk = newest;
                if (readMembers(sizes)) {
                    return sizes;
                }
            }
        }
        sizes[ProcessTreePeaks.PYTHON] = 0;
        sizes[ProcessTreePeaks.OTHER] = 0;
        listed = listProcesses();
        walk(sizes);
        newestAtWalk = newest;
        readsSinceWalk = 0;
        return sizes;
    }

    /** How many reads walked the threads' children (tests). */
    long walks() {
        return walks;
    }

    /** How many reads listed /proc for new processes instead of walking (tests). */
    long listings() {
        return listings;
    }

    /**
     * Adds to members each process /proc lists now and did not list before
     * whose parent is in the tree. False when /proc cannot be listed, or was
     * not at the last walk (then the read walks).
     */
    private boolean joinNewProcesses() {
        Set<String> now = listed == null ? null : listProcesses();
        if (now == null) {
            return false;
        }
        listings++;
        Set<String> inTree = new HashSet<>(members);
        inTree.add(pid);
        List<String> fresh = new ArrayList<>();
        for (String p : now) {
            if (!listed.contains(p)) {
                fresh.add(p);
            }
        }
        listed = now;
        Map<String, String> parentOf = new HashMap<>();
        for (String p : fresh) {
            try {
                String ppid = parentOf(readText(proc.resolve(p).resolve("stat")));
                if (ppid != null) {
                    parentOf.put(p, ppid);
                }
            } catch (IOException gone) {
                // exited since the listing: nothing to count
            }
        }
        boolean joined = true;
        while (joined && members.size() < MAX_PROCESSES) {
            joined = false;
            for (Map.Entry<String, String> e : parentOf.entrySet()) {
                if (!inTree.contains(e.getKey()) && inTree.contains(e.getValue())) {
                    inTree.add(e.getKey());
                    members.add(e.getKey());
                    joined = true;
                }
            }
        }
        return true;
    }

    /** The processes (not threads) /proc lists now; null when it cannot be listed. */
    private Set<String> listProcesses() {
        Set<String> out = new HashSet<>();
        try (DirectoryStream<Path> all = Files.newDirectoryStream(proc)) {
            for (Path dir : all) {
                String name = dir.getFileName().toString();
                if (!name.isEmpty() && Character.isDigit(name.charAt(0))) {
                    out.add(name);
                }
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
        return out;
    }

    /** Each known descendant's size into sizes; false as soon as one is gone (the tree must be walked). */
    private boolean readMembers(long[] sizes) {
        for (String member : members) {
            try {
                long rss = resident(member);
                if (rss == 0) {
                    return false;
                }
                add(sizes, readText(proc.resolve(member).resolve("comm")), rss);
            } catch (IOException gone) {
                return false;
            }
        }
        return true;
    }

    private static void add(long[] sizes, String command, long rss) {
        sizes[command.toLowerCase(Locale.ROOT).contains("python") ? ProcessTreePeaks.PYTHON
                : ProcessTreePeaks.OTHER] += rss;
    }

    private void walk(long[] sizes) {
        walks++;
        List<String> found = new ArrayList<>();
        Map<String, List<String>> parents = childrenFiles ? null : childrenByParent();
        Set<String> seen = new HashSet<>();
        seen.add(pid);
        Deque<String> todo = new ArrayDeque<>(children(pid, parents));
        while (!todo.isEmpty() && seen.size() < MAX_PROCESSES) {
            String child = todo.poll();
            if (!seen.add(child)) {
                continue;
            }
            try {
                String command = readText(proc.resolve(child).resolve("comm"));
                long rss = resident(child);
                add(sizes, command, rss);
                found.add(child);
                todo.addAll(children(child, parents));
            } catch (IOException gone) {
                // Exited since it was listed (NoSuchFileException, or ESRCH on a read):
                // it and whatever it had started hold nothing any more, or were reparented.
            }
        }
        members = found;
    }

    /** /proc/loadavg's last field, the newest pid of this namespace; null when it cannot be read. */
    private String newestPid() {
        try {
            String text = readText(proc.resolve("loadavg")).trim();
            int space = text.lastIndexOf(' ');
            String last = text.substring(space + 1);
            return space > 0 && !last.isEmpty() && Character.isDigit(last.charAt(0)) ? last : null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** statm's resident pages, in bytes. */
    private long resident(String p) throws IOException {
        String statm = readText(proc.resolve(p).resolve("statm"));
        String[] numbers = statm.trim().split("\\s+");
        if (numbers.length < 2) {
            throw new IOException(proc.resolve(p).resolve("statm") + " has no resident size: " + statm);
        }
        try {
            return Long.parseLong(numbers[1]) * pageSize;
        } catch (NumberFormatException e) {
            throw new IOException(proc.resolve(p).resolve("statm") + " has no resident size: " + statm);
        }
    }

    private List<String> children(String p, Map<String, List<String>> parents) {
        if (parents != null) {
            List<String> c = parents.get(p);
            return c != null ? c : new ArrayList<>();
        }
        List<String> out = new ArrayList<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(proc.resolve(p).resolve("task"))) {
            for (Path task : tasks) {
                try {
                    for (String child : readText(task.resolve("children")).trim().split("\\s+")) {
                        if (!child.isEmpty()) {
                            out.add(child);
                        }
                    }
                } catch (IOException threadGone) {
                    // a thread that ended since the listing: its children went to another thread
                }
            }
        } catch (IOException | RuntimeException processGone) {
            // the process ended: nothing under it
        }
        return out;
    }

    /** Without children files: every process's parent, from one pass over /proc/[0-9]+/stat. */
    private Map<String, List<String>> childrenByParent() {
        Map<String, List<String>> byParent = new HashMap<>();
        try (DirectoryStream<Path> all = Files.newDirectoryStream(proc)) {
            for (Path dir : all) {
                String name = dir.getFileName().toString();
                if (name.isEmpty() || !Character.isDigit(name.charAt(0))) {
                    continue;
                }
                try {
                    String ppid = parentOf(readText(dir.resolve("stat")));
                    if (ppid != null) {
                        byParent.computeIfAbsent(ppid, k -> new ArrayList<>()).add(name);
                    }
                } catch (IOException gone) {
                    // exited during the pass
                }
            }
        } catch (IOException | RuntimeException e) {
            // no listing: no descendants seen this time
        }
        return byParent;
    }

    /** stat's fourth field; the command (second) may hold spaces and parentheses, so read after the last ')'. */
    static String parentOf(String stat) {
        int close = stat.lastIndexOf(')');
        if (close < 0) {
            return null;
        }
        String[] rest = stat.substring(close + 1).trim().split("\\s+");
        return rest.length >= 2 ? rest[1] : null;
    }

    private static String readText(Path p) throws IOException {
        return new String(Files.readAllBytes(p), StandardCharsets.UTF_8);
    }
}
