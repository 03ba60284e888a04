package dev.sparkscope.annotator.proctree;

import dev.sparkscope.annotator.core.ProcessTreePeaks;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The process tree read from a directory laid out like /proc: children files
 * per thread, or stat files when the kernel has no children files; and from
 * the real /proc, against the kernel's own VmRSS.
 */
class ProcessTreeTest {

    private static final long PAGE = 4096;

    @TempDir
    Path proc;

    private void write(String path, String text) throws IOException {
        Path p = proc.resolve(path);
        Files.createDirectories(p.getParent());
        Files.write(p, text.getBytes(StandardCharsets.UTF_8));
    }

    /** A process: its command, its resident pages, its parent (for stat) and its threads' children. */
    private void process(int pid, String comm, long residentPages, int ppid, String... childrenByThread)
            throws IOException {
        write(pid + "/comm", comm + "\n");
        write(pid + "/statm", (residentPages * 3) + " " + residentPages + " 100 10 0 500 0\n");
        write(pid + "/stat", pid + " (" + comm + ") S " + ppid + " " + pid + " " + pid + " 0 -1 4194560 0 0\n");
        for (int t = 0; t < childrenByThread.length; t++) {
            write(pid + "/task/" + (t == 0 ? pid : pid * 10 + t) + "/children", childrenByThread[t]);
        }
        if (childrenByThread.length == 0) {
            write(pid + "/task/" + pid + "/children", "");
        }
    }

    /**
     * An executor JVM (100) whose second thread started PySpark's daemon (200)
     * with two workers (201, 202), whose first thread runs a shell (300) that
     * ran a tool (301); and a process (999) outside the tree.
     */
    private void executorTree() throws IOException {
        process(100, "java", 50_000, 1, "300 ", "200\n", "");
        process(200, "python3", 5_000, 100, "201 202 ");
        process(201, "python3.11", 7_000, 200);
        process(202, "python3", 6_000, 200);
        process(300, "sh", 100, 100, "301 ");
        process(301, "a (weird) tool", 900, 300);
        process(999, "python3", 123_456, 1);
    }

    private static long[] bytes(long jvmPages, long pythonPages, long otherPages) {
        return new long[] {jvmPages * PAGE, pythonPages * PAGE, otherPages * PAGE};
    }

    @Test
    void the_jvm_its_python_workers_and_other_descendants_are_split_as_spark_splits_them() throws IOException {
        executorTree();
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        assertArrayEquals(bytes(50_000, 5_000 + 7_000 + 6_000, 100 + 900), tree.read());
    }

    @Test
    void without_children_files_the_parents_come_from_one_pass_over_stat() throws IOException {
        executorTree();
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, false);
        assertArrayEquals(bytes(50_000, 18_000, 1_000), tree.read());
    }

    @Test
    void a_child_that_exits_between_the_listing_and_its_reads_counts_nothing() throws IOException {
        executorTree();
        // 202 is still listed by its parent, but gone: no directory at all.
        deleteTree(proc.resolve("202"));
        // 300 exited after its comm was read: statm is gone, its child 301 with it (reparented away).
        Files.delete(proc.resolve("300/statm"));
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        assertArrayEquals(bytes(50_000, 5_000 + 7_000, 0), tree.read());
        assertArrayEquals(bytes(50_000, 5_000 + 7_000, 0), new ProcessTree(proc, "100", PAGE, false).read());
    }

    @Test
    void a_thread_that_ends_mid_read_loses_no_child_of_the_others() throws IOException {
        executorTree();
        Files.delete(proc.resolve("100/task/1001/children")); // thread 1001 (the daemon's parent) just ended
        assertArrayEquals(bytes(50_000, 0, 1_000), new ProcessTree(proc, "100", PAGE, true).read());
    }

    @Test
    void the_jvm_s_own_memory_unreadable_is_an_error_not_a_zero() throws IOException {
        executorTree();
        Files.delete(proc.resolve("100/statm"));
        assertThrows(IOException.class, () -> new ProcessTree(proc, "100", PAGE, true).read());
    }

    private void newestPid(int pid) throws IOException {
        write("loadavg", "0.52 0.58 0.59 2/467 " + pid + "\n");
    }

    @Test
    void while_no_pid_was_taken_the_known_descendants_are_read_again_without_a_walk() throws IOException {
        executorTree();
        newestPid(999);
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        assertArrayEquals(bytes(50_000, 18_000, 1_000), tree.read());
        assertEquals(1, tree.walks());
        // Sizes move, a worker execs into something else: read again, no walk.
        write("201/statm", "3 8000 1 1 0 1 0\n");
        write("202/comm", "R\n");
        assertArrayEquals(bytes(50_000, 5_000 + 8_000, 1_000 + 6_000), tree.read());
        assertEquals(1, tree.walks());
        // A new child listed while the newest pid is unchanged cannot be real; it is not looked for.
        process(400, "perl", 77, 100);
        write("100/task/100/children", "300 400 ");
        assertArrayEquals(bytes(50_000, 13_000, 7_000), tree.read());
        assertEquals(1, tree.walks());
        // A pid taken anywhere: the next read lists /proc and finds the new process by its parent, no walk.
        newestPid(1_000);
        assertArrayEquals(bytes(50_000, 13_000, 7_077), tree.read());
        assertEquals(1, tree.walks());
        assertEquals(1, tree.listings());
    }

    @Test
    void a_new_thread_moves_the_newest_pid_but_costs_a_listing_not_a_walk() throws IOException {
        executorTree();
        newestPid(999);
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        tree.read();
        newestPid(1_005); // the JVM started a thread: /proc lists no new process
        assertArrayEquals(bytes(50_000, 18_000, 1_000), tree.read());
        assertEquals(1, tree.walks());
        assertEquals(1, tree.listings());
    }

    @Test
    void new_processes_join_by_their_parent_even_listed_before_it_and_strangers_do_not() throws IOException {
        executorTree();
        newestPid(999);
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        tree.read();
        // After a wrap of the pid counter: a grandchild (12) with a lower pid than its parent (5000),
        // a new child of the Python daemon (7000), and a new process elsewhere (8000).
        process(5000, "bash", 10, 300);
        process(12, "python3", 20, 5000);
        process(7000, "python3", 30, 200);
        process(8000, "python3", 99_999, 1);
        newestPid(12);
        assertArrayEquals(bytes(50_000, 18_000 + 20 + 30, 1_000 + 10), tree.read());
        assertEquals(1, tree.walks());
        // and they are members now: read again while the newest pid stays
        write("12/statm", "3 25 1 1 0 1 0\n");
        assertArrayEquals(bytes(50_000, 18_000 + 25 + 30, 1_000 + 10), tree.read());
        assertEquals(1, tree.walks());
    }

    @Test
    void a_full_walk_comes_every_so_many_reads_whatever_the_newest_pid_says() throws IOException {
        executorTree();
        newestPid(999);
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        for (int i = 0; i < ProcessTree.FULL_WALK_EVERY; i++) {
            tree.read();
        }
        assertEquals(1, tree.walks());
        // A pid reused while the newest pid stayed (only after a wrap): found by the next full walk.
        process(400, "perl", 77, 100);
        write("100/task/100/children", "300 400 ");
        assertArrayEquals(bytes(50_000, 18_000, 1_077), tree.read());
        assertEquals(2, tree.walks());
    }

    @Test
    void a_descendant_gone_or_a_zombie_makes_the_next_read_walk() throws IOException {
        executorTree();
        newestPid(999);
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        tree.read();
        // 300 exits: its child 301 is reparented out of the tree (nobody here lists it).
        deleteTree(proc.resolve("300"));
        write("100/task/100/children", "");
        assertArrayEquals(bytes(50_000, 18_000, 0), tree.read());
        assertEquals(2, tree.walks());
        // 202 is a zombie (exited, not reaped): no pages; its children left with it.
        write("202/statm", "0 0 0 0 0 0 0\n");
        write("202/task/202/children", "");
        write("200/task/200/children", "201 ");
        assertArrayEquals(bytes(50_000, 12_000, 0), tree.read());
        assertEquals(3, tree.walks());
    }

    @Test
    void without_a_readable_loadavg_every_read_walks() throws IOException {
        executorTree();
        ProcessTree tree = new ProcessTree(proc, "100", PAGE, true);
        tree.read();
        process(400, "perl", 77, 100);
        write("100/task/100/children", "300 400 ");
        assertArrayEquals(bytes(50_000, 18_000, 1_077), tree.read());
        write("loadavg", "garbage\n");
        tree.read();
        assertEquals(3, tree.walks());
    }

    @Test
    void a_loop_in_a_damaged_tree_ends() throws IOException {
        process(100, "java", 10, 1, "200");
        process(200, "sh", 1, 100, "100 200");
        assertArrayEquals(bytes(10, 0, 1), new ProcessTree(proc, "100", PAGE, true).read());
    }

    @Test
    void locate_finds_this_process_its_children_files_and_the_kernel_s_page_size() throws IOException {
        executorTree();
        Files.createSymbolicLink(proc.resolve("self"), Paths.get("100"));
        ByteBuffer auxv = ByteBuffer.allocate(48).order(ByteOrder.nativeOrder());
        auxv.putLong(33).putLong(0x7fff0000L).putLong(6).putLong(16384).putLong(0).putLong(0);
        Files.write(proc.resolve("100/auxv"), auxv.array());
        String[] why = new String[1];
        ProcessTree tree = ProcessTree.locate(proc, why);
        assertNotNull(tree, why[0]);
        assertEquals("100", tree.pid());
        assertTrue(tree.readsChildrenFiles());
        assertEquals(50_000L * 16384, tree.read()[ProcessTreePeaks.JVM]);
    }

    @Test
    void locate_without_children_files_scans_stat_and_without_auxv_takes_4_kib_pages() throws IOException {
        process(100, "java", 10, 1);
        Files.delete(proc.resolve("100/task/100/children"));
        Files.createSymbolicLink(proc.resolve("self"), Paths.get("100"));
        ProcessTree tree = ProcessTree.locate(proc, new String[1]);
        assertNotNull(tree);
        assertFalse(tree.readsChildrenFiles());
        assertEquals(10 * 4096L, tree.read()[ProcessTreePeaks.JVM]);
    }

    @Test
    void a_machine_without_proc_says_why() {
        String[] why = new String[1];
        assertNull(ProcessTree.locate(proc.resolve("absent"), why));
        assertTrue(why[0].contains("not Linux"), why[0]);
    }

    @Test
    void the_parent_is_read_after_the_last_parenthesis_of_the_command() {
        assertEquals("42", ProcessTree.parentOf("7 (a) b (c) d) S 42 7 7 0"));
        assertNull(ProcessTree.parentOf("garbage"));
    }

    /** The kernel's VmRSS of a process, in bytes, from /proc/<pid>/status. */
    private static long vmRss(long pid) throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IOException("no VmRSS for " + pid);
    }

    private static long pid(Process p) throws IOException {
        // Java 8: no Process.pid(); the child is the only process whose parent is us and whose
        // command line is the one we started.
        String self = Files.readSymbolicLink(Paths.get("/proc/self")).toString();
        try (java.util.stream.Stream<Path> all = Files.list(Paths.get("/proc"))) {
            for (Path dir : (Iterable<Path>) all::iterator) {
                String name = dir.getFileName().toString();
                if (!name.matches("[0-9]+")) {
                    continue;
                }
                try {
                    String stat = new String(Files.readAllBytes(dir.resolve("stat")), StandardCharsets.UTF_8);
                    if (self.equals(ProcessTree.parentOf(stat)) && !stat.contains("(java)")) {
                        return Long.parseLong(name);
                    }
                } catch (IOException gone) {
                    // not ours
                }
            }
        }
        throw new IOException("child not found");
    }

    @Test
    void on_the_real_proc_each_size_is_the_kernel_s_vmrss() throws Exception {
        assumeTrue(Files.isDirectory(Paths.get("/proc/self/task")), "Linux only");
        assumeTrue(new java.io.File("/usr/bin/python3").canExecute(), "needs python3");
        // One tree read before, during and after the child, as the sampler reads: a child
        // started since the last read is found (it took a pid), one gone is counted no more.
        ProcessTree tree = ProcessTree.locate(Paths.get("/proc"), new String[1]);
        assertNotNull(tree);
        tree.read();
        assertEquals(0, tree.read()[ProcessTreePeaks.PYTHON]);
        // A Python child that holds 64 MiB (Python bucket); nothing else runs under this JVM.
        Process python = new ProcessBuilder("/usr/bin/python3", "-c",
                "import sys, time; b = bytearray(64 << 20); sys.stdout.write('ready\\n'); sys.stdout.flush(); "
                        + "time.sleep(60)").redirectErrorStream(true).start();
        try {
            assertEquals('r', python.getInputStream().read(), "the child started");
            long child = pid(python);
            long before = vmRss(Long.parseLong(tree.pid()));
            long[] sizes = tree.read();
            long after = vmRss(Long.parseLong(tree.pid()));
            // The child's memory is still: exactly the kernel's figure.
            assertEquals(vmRss(child), sizes[ProcessTreePeaks.PYTHON]);
            assertTrue(sizes[ProcessTreePeaks.PYTHON] > 64L << 20, "the 64 MiB the child holds");
            assertEquals(0, sizes[ProcessTreePeaks.OTHER]);
            // This JVM's moves as it runs: between the kernel's two readings around ours.
            assertTrue(Math.min(before, after) - (1 << 20) <= sizes[ProcessTreePeaks.JVM]
                    && sizes[ProcessTreePeaks.JVM] <= Math.max(before, after) + (1 << 20),
                    before + " <= " + sizes[ProcessTreePeaks.JVM] + " <= " + after);
        } finally {
            python.destroy();
            python.waitFor(10, TimeUnit.SECONDS);
        }
        // Gone: counted no more.
        assertEquals(0, tree.read()[ProcessTreePeaks.PYTHON]);
    }

    private static void deleteTree(Path p) throws IOException {
        if (Files.isDirectory(p)) {
            try (java.util.stream.Stream<Path> s = Files.list(p)) {
                for (Path c : (Iterable<Path>) s::iterator) {
                    deleteTree(c);
                }
            }
        }
        Files.delete(p);
    }
}
