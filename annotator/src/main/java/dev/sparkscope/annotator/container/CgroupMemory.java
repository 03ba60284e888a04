package dev.sparkscope.annotator.container;

import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Schema;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The memory cgroup this JVM sits in (its container on Kubernetes, YARN with
 * cgroups, Docker), read as the OOM killer and the kubelet judge it: the
 * limit, usage, the working set (usage minus inactive file cache, what
 * Kubernetes compares with the limit), anonymous and file memory, how often
 * usage hit the limit, and OOM kills. cgroup v1 (the memory controller's own
 * hierarchy) and v2 (the unified one) are both read, from the files the
 * kernel documents (Documentation/admin-guide/cgroup-v1/memory.rst and
 * cgroup-v2.rst).
 *
 * <p>Paths are found from {@code /proc/self/cgroup} and
 * {@code /proc/self/mountinfo}, so it works inside a container without
 * privileges (with or without a cgroup namespace) and on a host. Every path
 * is under {@code root} ("/" in production; a directory laid out like it in
 * tests).
 */
final class CgroupMemory {

    /** Limits at or above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages, about 2^63). */
    static final long UNLIMITED = 1L << 60;

    /** One reading; -1 where the kernel does not say (e.g. v1 has no pressure). */
    static final class Sample {
        int version;
        long limitBytes = -1;  // -1: no limit
        long usageBytes;
        long workingSetBytes;
        long anonBytes;
        long fileBytes;
        long limitHits = -1;  // v1 memory.failcnt; v2 memory.events "max"
        long oomKills = -1;  // v1 memory.oom_control, v2 memory.events "oom_kill"
        double pressureSomeAvg10 = -1;  // v2 memory.pressure, % of time some task stalled on memory

        Point point(String applicationId, String executorId, long timeMs) {
            Point p = Point.measurement(MEASUREMENT)
                    .tag(Schema.APPLICATION, applicationId)
                    .tag(Schema.EXECUTOR, executorId)
                    .field(Schema.Container.CGROUP_VERSION, (long) version)
                    .field(Schema.Container.USAGE_BYTES, usageBytes)
                    .field(Schema.Container.WORKING_SET_BYTES, workingSetBytes)
                    .field(Schema.Container.ANON_BYTES, anonBytes)
                    .field(Schema.Container.FILE_BYTES, fileBytes)
                    .timeMs(timeMs);
            if (limitBytes >= 0) {
                p.field(Schema.Container.LIMIT_BYTES, limitBytes);
            }
            if (limitHits >= 0) {
                p.field(Schema.Container.LIMIT_HITS, limitHits);
            }
            if (oomKills >= 0) {
                p.field(Schema.Container.OOM_KILLS, oomKills);
            }
            if (pressureSomeAvg10 >= 0) {
                p.field(Schema.Container.PRESSURE_SOME_AVG10, pressureSomeAvg10);
            }
            return p;
        }
    }

    static final String MEASUREMENT = Schema.Container.NAME;

    private final int version;
    private final Path dir;
    private final Path mount;  // v2: ancestors up to here carry limits too

    private CgroupMemory(int version, Path dir, Path mount) {
        this.version = version;
        this.dir = dir;
        this.mount = mount;
    }

    int version() {
        return version;
    }

    Path dir() {
        return dir;
    }

    /**
     * The memory cgroup of this process, or null when there is none to read
     * (no memory controller mounted, a kernel without cgroups): the reason is
     * in {@code why[0]}.
     */
    static CgroupMemory locate(Path root, String[] why) {
        try {
            List<String> cgroups = Files.readAllLines(root.resolve("proc/self/cgroup"), StandardCharsets.UTF_8);
            List<String> mounts = Files.readAllLines(root.resolve("proc/self/mountinfo"), StandardCharsets.UTF_8);
            String v1Path = null;
            String v2Path = null;
            for (String line : cgroups) {
                String[] f = line.split(":", 3);
                if (f.length < 3) {
                    continue;
                }
                if (f[0].equals("0") && f[1].isEmpty()) {
                    v2Path = f[2];
                }
                for (String controller : f[1].split(",")) {
                    if (controller.equals("memory")) {
                        v1Path = f[2];
                    }
                }
            }
            // A hybrid host (v1 controllers, an empty v2 tree) keeps memory in v1.
            if (v1Path != null) {
                CgroupMemory m = resolve(root, mounts, v1Path, 1);
                if (m != null) {
                    return m;
                }
            }
            if (v2Path != null) {
                CgroupMemory m = resolve(root, mounts, v2Path, 2);
                if (m != null) {
                    return m;
                }
            }
            why[0] = "no memory cgroup is mounted where /proc/self/cgroup says this process is";
        } catch (IOException | RuntimeException e) {
            why[0] = "cannot read /proc/self/cgroup or mountinfo: " + e;
        }
        return null;
    }

    private static CgroupMemory resolve(Path root, List<String> mounts, String path, int version) {
        for (String line : mounts) {
            int dash = line.indexOf(" - ");
            if (dash < 0) {
                continue;
            }
            String[] left = line.substring(0, dash).split(" ");
            String[] right = line.substring(dash + 3).split(" ");
            if (left.length < 5 || right.length < 3) {
                continue;
            }
            boolean match = version == 1
                    ? right[0].equals("cgroup") && hasOption(right[2], "memory")
                    : right[0].equals("cgroup2");
            if (!match) {
                continue;
            }
            String mountRoot = unescape(left[3]);
            Path mountPoint = root.resolve(relative(unescape(left[4])));
            // Without a cgroup namespace a container sees the host's path, and its
            // mount's root is that same path: what is left is relative to the mount.
            String rel = path;
            if (!mountRoot.equals("/") && (path.equals(mountRoot) || path.startsWith(mountRoot + "/"))) {
                rel = path.substring(mountRoot.length());
            }
            Path dir = mountPoint.resolve(relative(rel));
            String probe = version == 1 ? "memory.usage_in_bytes" : "memory.current";
            if (!Files.isRegularFile(dir.resolve(probe))) {
                dir = mountPoint;  // a path from outside our namespace: the mount is our cgroup
            }
            if (Files.isRegularFile(dir.resolve(probe))) {
                return new CgroupMemory(version, dir, mountPoint);
            }
        }
        return null;
    }

    private static boolean hasOption(String options, String name) {
        for (String o : options.split(",")) {
            if (o.equals(name)) {
                return true;
            }
        }
        return false;
    }

    private static String relative(String absolute) {
        String s = absolute;
        while (s.startsWith("/")) {
            s = s.substring(1);
        }
        return s;
    }

    /** mountinfo writes space, tab, newline and backslash as octal escapes (\040). */
    static String unescape(String s) {
        StringBuilder out = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && isOctal(s, i + 1)) {
                out.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    private static boolean isOctal(String s, int from) {
        if (from + 3 > s.length()) {
            return false;
        }
        for (int i = from; i < from + 3; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '7') {
                return false;
            }
        }
        return true;
    }

    Sample sample() throws IOException {
        Sample s = new Sample();
        s.version = version;
        Map<String, Long> stat = keyed(dir.resolve("memory.stat"));
        if (version == 1) {
            s.usageBytes = number(dir.resolve("memory.usage_in_bytes"));
            long limit = number(dir.resolve("memory.limit_in_bytes"));
            Long hierarchical = stat.get("hierarchical_memory_limit");
            if (hierarchical != null) {
                limit = Math.min(limit, hierarchical);
            }
            s.limitBytes = limit >= UNLIMITED ? -1 : limit;
            long inactiveFile = first(stat, "total_inactive_file", "inactive_file");
            s.workingSetBytes = Math.max(0, s.usageBytes - inactiveFile);
            s.anonBytes = first(stat, "total_rss", "rss");
            s.fileBytes = first(stat, "total_cache", "cache");
            s.limitHits = optionalNumber(dir.resolve("memory.failcnt"));
            Map<String, Long> oom = keyed(dir.resolve("memory.oom_control"));
            s.oomKills = oom.getOrDefault("oom_kill", -1L);
        } else {
            s.usageBytes = number(dir.resolve("memory.current"));
            long limit = -1;
            // The nearest limit up the tree binds: a pod's limit sits on the pod's cgroup.
            for (Path d = dir; d != null && d.startsWith(mount); d = d.getParent()) {
                Path max = d.resolve("memory.max");
                if (Files.isRegularFile(max)) {
                    String text = new String(Files.readAllBytes(max), StandardCharsets.US_ASCII).trim();
                    if (!text.equals("max") && !text.isEmpty()) {
                        long v = Long.parseLong(text);
                        limit = limit < 0 ? v : Math.min(limit, v);
                    }
                }
                if (d.equals(mount)) {
                    break;
                }
            }
            s.limitBytes = limit >= UNLIMITED ? -1 : limit;
            s.workingSetBytes = Math.max(0, s.usageBytes - first(stat, "inactive_file"));
            s.anonBytes = first(stat, "anon");
            s.fileBytes = first(stat, "file");
            Map<String, Long> events = keyed(dir.resolve("memory.events"));
            s.limitHits = events.getOrDefault("max", -1L);
            s.oomKills = events.getOrDefault("oom_kill", -1L);
            s.pressureSomeAvg10 = pressure(dir.resolve("memory.pressure"));
        }
        return s;
    }

    private static long first(Map<String, Long> stat, String... keys) {
        for (String k : keys) {
            Long v = stat.get(k);
            if (v != null) {
                return v;
            }
        }
        return 0;
    }

    private static long number(Path file) throws IOException {
        return Long.parseLong(new String(Files.readAllBytes(file), StandardCharsets.US_ASCII).trim());
    }

    private static long optionalNumber(Path file) {
        try {
            return number(file);
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
    }

    /** "key value" lines (memory.stat, memory.events, memory.oom_control); missing file: empty. */
    static Map<String, Long> keyed(Path file) {
        Map<String, Long> out = new HashMap<>();
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.US_ASCII);
        } catch (IOException e) {
            return out;
        }
        for (String line : lines) {
            String[] kv = line.trim().split("\\s+");
            if (kv.length == 2) {
                try {
                    out.put(kv[0], Long.parseLong(kv[1]));
                } catch (NumberFormatException ignored) {
                    // a key this reader does not use
                }
            }
        }
        return out;
    }

    /** memory.pressure's "some avg10=1.23 avg60=... total=..." (PSI); -1 when absent. */
    static double pressure(Path file) {
        try {
            for (String line : Files.readAllLines(file, StandardCharsets.US_ASCII)) {
                if (line.startsWith("some ")) {
                    for (String part : line.split(" ")) {
                        if (part.startsWith("avg10=")) {
                            return Double.parseDouble(part.substring(6));
                        }
                    }
                }
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }
}
