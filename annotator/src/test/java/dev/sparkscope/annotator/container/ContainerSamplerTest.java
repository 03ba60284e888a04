package dev.sparkscope.annotator.container;

import dev.sparkscope.annotator.core.FakeInflux;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The sampler reads its own key and the sink's: another product's bad setting never stops it. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ContainerSamplerTest {

    @TempDir
    Path root;

    private final Map<String, String> conf = new HashMap<>();

    private void write(String path, String text) throws IOException {
        Path p = root.resolve(path);
        Files.createDirectories(p.getParent());
        Files.write(p, text.getBytes(StandardCharsets.UTF_8));
    }

    /** A JVM in its own cgroup v2 namespace (its cgroup is the mount's root). */
    private void v2Container() throws IOException {
        write("proc/self/cgroup", "0::/\n");
        write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
        write("sys/fs/cgroup/memory.max", "536870912\n");
        write("sys/fs/cgroup/memory.current", "1000\n");
        write("sys/fs/cgroup/memory.stat", "anon 700\nfile 250\ninactive_file 100\n");
        write("sys/fs/cgroup/memory.events", "max 0\noom_kill 0\n");
    }

    @Test
    void a_bad_straggler_ratio_leaves_the_container_sampler_running() throws Exception {
        v2Container();
        try (FakeInflux influx = FakeInflux.answering(204)) {
            conf.put("spark.sparkscope.influx.url", influx.baseUrl());
            conf.put("spark.sparkscope.flushIntervalMs", "20");
            conf.put("spark.sparkscope.straggler.ratio", "0.5");
            conf.put("spark.sparkscope.enabled", "maybe");
            ContainerSampler sampler = ContainerSampler.start(conf::get, "7", "app-1", root);
            assertNotNull(sampler, "started despite the listener's bad keys");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (influx.lines().isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            sampler.stop();
            assertTrue(influx.lines().get(0).startsWith("sparkscope_container,applicationid=app-1,executorid=7 "),
                    influx.lines().toString());
        }
    }

    @Test
    void a_bad_period_of_its_own_stops_it() throws Exception {
        v2Container();
        conf.put(ContainerSampler.PERIOD_S, "0");
        assertNull(ContainerSampler.start(conf::get, "7", "app-1", root));
    }
}
