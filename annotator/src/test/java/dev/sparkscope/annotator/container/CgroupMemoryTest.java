package dev.sparkscope.annotator.container;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * File trees laid out as the kernel lays them out (cgroup-v1/memory.rst,
 * cgroup-v2.rst; /proc/self/mountinfo as proc(5) documents it). cgroup v2
 * with the memory controller cannot run on the test machines (they are
 * hybrid: memory in v1), so v2 is proven here on such trees; v1 is also
 * read for real by the Python suite (tests/test_containers.py).
 */
class CgroupMemoryTest {

    @TempDir
    Path root;

    private void write(String path, String text) throws IOException {
        Path p = root.resolve(path);
        Files.createDirectories(p.getParent());
        Files.write(p, text.getBytes(StandardCharsets.UTF_8));
    }

    private static final String HYBRID_MOUNTS =
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
            + "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
            + "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
            + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    private void v1Cgroup(String dir, long limit, long hierarchical, long usage) throws IOException {
        write(dir + "/memory.limit_in_bytes", limit + "\n");
        write(dir + "/memory.usage_in_bytes", usage + "\n");
        write(dir + "/memory.failcnt", "17\n");
        write(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
        write(dir + "/memory.stat", "cache 300\nrss 500\ninactive_file 100\nhierarchical_memory_limit " + hierarchical
                + "\ntotal_cache 3000\ntotal_rss 5000\ntotal_inactive_file 1000\n");
    }

    @Test
    void v1_on_a_hybrid_host_reads_the_memory_controllers_own_tree() throws IOException {
        write("proc/self/cgroup", "9:name=systemd:/\n4:memory:/yarn/container_01\n1:cpu:/\n0::/\n");
        write("proc/self/mountinfo", HYBRID_MOUNTS);
        v1Cgroup("sys/fs/cgroup/memory/yarn/container_01", 671088640, 9223372036854771712L, 9000);
        String[] why = new String[1];
        CgroupMemory m = CgroupMemory.locate(root, why);
        assertNotNull(m, why[0]);
        assertEquals(1, m.version());
        CgroupMemory.Sample s = m.sample();
        assertEquals(671088640L, s.limitBytes);
        assertEquals(9000, s.usageBytes);
        assertEquals(8000, s.workingSetBytes, "usage minus the hierarchy's inactive file cache");
        assertEquals(5000, s.anonBytes);
        assertEquals(3000, s.fileBytes);
        assertEquals(17, s.limitHits);
        assertEquals(2, s.oomKills);
        assertEquals(-1, s.pressureSomeAvg10, 0.0);
    }

    @Test
    void v1_takes_a_parents_smaller_limit_and_reads_no_limit_as_none() throws IOException {
        write("proc/self/cgroup", "4:memory:/a/b\n");
        write("proc/self/mountinfo", HYBRID_MOUNTS);
        v1Cgroup("sys/fs/cgroup/memory/a/b", 9223372036854771712L, 1L << 30, 10);
        assertEquals(1L << 30, CgroupMemory.locate(root, new String[1]).sample().limitBytes);
        v1Cgroup("sys/fs/cgroup/memory/a/b", 9223372036854771712L, 9223372036854771712L, 10);
        assertEquals(-1, CgroupMemory.locate(root, new String[1]).sample().limitBytes);
    }

    @Test
    void v1_in_a_container_without_a_cgroup_namespace_reads_its_mount() throws IOException {
        // Docker without cgroupns: /proc/self/cgroup names the host's path, and the
        // memory mount's root is that same path.
        write("proc/self/cgroup", "4:memory:/docker/abc123\n");
        write("proc/self/mountinfo",
                "35 31 0:32 /docker/abc123 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n");
        v1Cgroup("sys/fs/cgroup/memory", 1L << 29, 9223372036854771712L, 10);
        CgroupMemory m = CgroupMemory.locate(root, new String[1]);
        assertEquals(root.resolve("sys/fs/cgroup/memory"), m.dir());
        assertEquals(1L << 29, m.sample().limitBytes);
    }

    private void v2Cgroup(String dir, String max, long current) throws IOException {
        write(dir + "/memory.max", max + "\n");
        write(dir + "/memory.current", current + "\n");
        write(dir + "/memory.stat", "anon 700\nfile 250\nkernel 30\nactive_file 150\ninactive_file 100\n");
        write(dir + "/memory.events", "low 0\nhigh 0\nmax 41\noom 3\noom_kill 1\noom_group_kill 0\n");
        write(dir + "/memory.pressure", "some avg10=12.50 avg60=3.00 avg300=0.70 total=123456\n"
                + "full avg10=5.00 avg60=1.00 avg300=0.20 total=65432\n");
    }

    @Test
    void v2_in_a_pod_reads_the_pods_limit_from_an_ancestor() throws IOException {
        // The kubelet sets the limit on the pod's cgroup and on the container's; a
        // container with no limit of its own is bound by the pod's.
        String pod = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice";
        write("proc/self/cgroup", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
                + "cri-containerd-abc.scope\n");
        write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
        write("sys/fs/cgroup/kubepods.slice/memory.max", "max\n");
        write(pod + "/memory.max", "805306368\n");
        v2Cgroup(pod + "/cri-containerd-abc.scope", "max", 1000);
        CgroupMemory m = CgroupMemory.locate(root, new String[1]);
        assertEquals(2, m.version());
        CgroupMemory.Sample s = m.sample();
        assertEquals(805306368L, s.limitBytes);
        assertEquals(1000, s.usageBytes);
        assertEquals(900, s.workingSetBytes);
        assertEquals(700, s.anonBytes);
        assertEquals(250, s.fileBytes);
        assertEquals(41, s.limitHits);
        assertEquals(1, s.oomKills);
        assertEquals(12.5, s.pressureSomeAvg10, 1e-9);
    }

    @Test
    void v2_with_a_cgroup_namespace_sees_its_own_cgroup_as_the_root() throws IOException {
        write("proc/self/cgroup", "0::/\n");
        write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n");
        v2Cgroup("sys/fs/cgroup", "536870912", 10);
        CgroupMemory.Sample s = CgroupMemory.locate(root, new String[1]).sample();
        assertEquals(536870912L, s.limitBytes);
        assertEquals(0, s.workingSetBytes, "never below zero when the cache is larger than usage");
    }

    @Test
    void mount_points_with_spaces_are_unescaped_as_mountinfo_writes_them() throws IOException {
        assertEquals("/sys/fs/my cgroup", CgroupMemory.unescape("/sys/fs/my\\040cgroup"));
        write("proc/self/cgroup", "0::/\n");
        write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n");
        v2Cgroup("sys/fs/my cgroup", "max", 10);
        CgroupMemory.Sample s = CgroupMemory.locate(root, new String[1]).sample();
        assertEquals(-1, s.limitBytes);
    }

    @Test
    void no_memory_controller_is_said_and_not_guessed() throws IOException {
        write("proc/self/cgroup", "1:cpu:/\n0::/\n");
        write("proc/self/mountinfo", "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
        write("sys/fs/cgroup/unified/cgroup.controllers", "\n");
        String[] why = new String[1];
        assertNull(CgroupMemory.locate(root, why));
        assertTrue(why[0].contains("no memory cgroup"), why[0]);
        String[] missing = new String[1];
        assertNull(CgroupMemory.locate(root.resolve("nothing-here"), missing));
        assertTrue(missing[0].contains("cannot read"), missing[0]);
    }

    @Test
    void a_sample_is_one_line_with_the_executor_and_only_the_fields_the_kernel_gave() throws IOException {
        write("proc/self/cgroup", "4:memory:/x\n");
        write("proc/self/mountinfo", HYBRID_MOUNTS);
        v1Cgroup("sys/fs/cgroup/memory/x", 9223372036854771712L, 9223372036854771712L, 9000);
        InfluxLineReader p = InfluxLineReader.read(
                CgroupMemory.locate(root, new String[1]).sample().point("app-1", "7", 1000L).toString());
        assertEquals(CgroupMemory.MEASUREMENT, p.measurement);
        assertEquals("app-1", p.tags.get("applicationid"));
        assertEquals("7", p.tags.get("executorid"));
        assertNull(p.fields.get("limit_bytes"), "no limit: no field, never a huge number");
        assertNull(p.fields.get("pressure_some_avg10"));
        assertEquals("2i", p.fields.get("oom_kills"));
        assertEquals("8000i", p.fields.get("working_set_bytes"));
    }
}
