package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** async-profiler's collapsed output (as 4.2 prints it with the threads option) regrouped by stage. */
class ProfileStacksTest {

    private static final String DUMP = String.join("\n",
            "[Executor task launch worker for task 3.0 in stage 1.0 (TID 4) tid=101];Thread.run;Burn.burnCpu 7",
            "[Executor task launch worker for task 5.0 in stage 1.0 (TID 6) tid=102];Thread.run;Burn.burnCpu 3",
            "[Executor task launch worker for task 0.0 in stage 2.1 (TID 9) tid=103];Thread.run;Other.work 2",
            "[Executor task launch worker-3 tid=104];Thread.run;LinkedBlockingQueue.take;Unsafe.park 5",
            "[shuffle-client-4-1 tid=105];Thread.run;epoll_wait 4",
            "[GC Thread#0 tid=106];clone3;G1ParTask::work 2",
            "garbage without a count",
            "");

    @Test
    void samplesAreGroupedByTheStageInTheTaskThreadsName() {
        ProfileStacks stacks = new ProfileStacks(false, 1000);
        stacks.add(DUMP);
        Map<String, Long> totals = stacks.groupTotals();
        assertEquals(10L, totals.get("stage 1.0"));
        assertEquals(2L, totals.get("stage 2.1"));
        assertEquals(5L, totals.get(ProfileStacks.IDLE_TASK_THREADS));
        assertEquals(6L, totals.get(ProfileStacks.OTHER));
        assertEquals(23, stacks.samples);
        assertEquals(1, stacks.droppedLines);
        // Two task threads of one stage are one stack; service threads keep their pool's name.
        assertEquals(Collections.singletonMap("Thread.run;Burn.burnCpu", 10L), stacks.stacks("stage 1.0"));
        assertTrue(stacks.stacks(null).containsKey(ProfileStacks.OTHER + ";shuffle-client-#-#;Thread.run;epoll_wait"));
        assertTrue(stacks.stacks(null).containsKey(ProfileStacks.OTHER + ";GC Thread#;clone3;G1ParTask::work"));
    }

    @Test
    void wallSamplesAreSplitIntoRunningAndWaitingByTheirInnermostFrame() {
        ProfileStacks stacks = new ProfileStacks(true, 1000);
        stacks.add(DUMP);
        Map<String, Long> stage = stacks.stacks("stage 1.0");
        assertEquals(Collections.singletonMap("running;Thread.run;Burn.burnCpu", 10L), stage);
        assertTrue(stacks.stacks(ProfileStacks.IDLE_TASK_THREADS)
                .containsKey("waiting;Thread.run;LinkedBlockingQueue.take;Unsafe.park"));
        assertTrue(ProfileStacks.isWaiting("Thread.run;FileInputStream.readBytes;__libc_read"));
        assertTrue(ProfileStacks.isWaiting("Thread.run;Thread.sleep;do_nanosleep_[k]"));  // kernel frames skipped
        assertFalse(ProfileStacks.isWaiting("Thread.run;Burn.burnCpu;irq_exit_[k]"));
    }

    @Test
    void newStacksPastTheCapAreCountedNotKept() {
        ProfileStacks stacks = new ProfileStacks(false, 2);
        for (int i = 0; i < 50; i++) {
            stacks.addLine("[Executor task launch worker for task 1.0 in stage 7.0 (TID 1) tid=1];f" + i + " 1");
        }
        assertEquals(50, stacks.samples);
        assertTrue(stacks.stacks(null).size() <= 3, stacks.stacks(null).toString());
        long sum = 0;
        for (long v : stacks.stacks(null).values()) {
            sum += v;
        }
        assertEquals(50, sum);
    }

    @Test
    void nestedSetTotalsAreExactAfterFoldingNarrowFrames() {
        ProfileStacks stacks = new ProfileStacks(false, 1000);
        stacks.add(DUMP);
        List<NestedSet.Row> rows = NestedSet.rows(stacks.stacks(null), "root", 0.1, 1_000_000);
        assertEquals(23_000_000L, rows.get(0).value);
        assertEquals(0, rows.get(0).level);
        assertEquals("stage 1.0", rows.get(1).label);  // widest first
        long leaves = 0;
        for (NestedSet.Row r : rows) {
            leaves += r.self;
        }
        assertEquals(rows.get(0).value, leaves);  // every sample is some frame's self time
        assertEquals("Burn.burnCpu", NestedSet.widestLeaf(rows));
    }

    @Test
    void profileLinesCarryIdsAsFieldsAndParseAsLineProtocol() {
        Map<String, Long> two = new HashMap<>();
        two.put("a;b", 3L);
        two.put("a;c \"quoted\"", 1L);
        List<NestedSet.Row> rows = NestedSet.rows(two, "root", 0, 1);
        List<String> lines = ProfileLines.lines("app 1", "7", "cpu", 1_700_000_000_000L, 30, "stage 1.0", 1, rows,
                4, "ns");
        assertEquals(rows.size() + 1, lines.size());
        assertTrue(lines.get(0).startsWith("sparkscope_flame,applicationid=app\\ 1,executorid=7,kind=cpu level=0i,"));
        assertTrue(lines.get(0).endsWith(" " + (1_700_000_000_000L * 1_000_000L + ProfileLines.SLOT_NS)));
        assertTrue(lines.get(0).contains("profile=\"2023-11-14 22:13:20 exec 7 cpu 30s stage 1.0\""));
        assertTrue(lines.get(3).contains("label=\"c \\\"quoted\\\"\""), lines.get(3));
        for (String line : lines) {
            InfluxLineReader.read(line);  // throws on anything a strict reader refuses
        }
        assertEquals("c \"quoted\"", InfluxLineReader.read(lines.get(3)).fields.get("label"));
    }
}
