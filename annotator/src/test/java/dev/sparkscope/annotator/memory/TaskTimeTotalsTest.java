package dev.sparkscope.annotator.memory;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

class TaskTimeTotalsTest {

    private final List<String> lines = new ArrayList<>();
    private final TaskTimeTotals totals = new TaskTimeTotals(lines::add, () -> "app-1");

    private List<InfluxLineReader> points(String counter) {
        List<InfluxLineReader> out = new ArrayList<>();
        for (String line : lines) {
            InfluxLineReader p = InfluxLineReader.read(line);
            if (p.measurement.equals(TaskTimeTotals.PREFIX + counter)) {
                out.add(p);
            }
        }
        return out;
    }

    @Test
    void events_write_the_running_totals_once_a_period_and_the_end_writes_the_last() {
        totals.tick(10_000); // the first event: a point of zeros to start the rates from
        totals.taskSucceeded(500, 400_000_000L, 20, 3, 7, 9_000);
        totals.tick(12_000); // within the period: nothing
        totals.taskSucceeded(500, 100_000_000L, 0, 3, 0, 1_000);
        totals.tick(15_000);
        totals.taskSucceeded(250, 0, 0, 0, 0, 0);
        totals.applicationEnded(15_000); // same millisecond as the last point: moved on by one
        totals.tick(30_000); // after the end: nothing more

        List<InfluxLineReader> run = points("runTime.count");
        assertEquals(3, run.size(), lines.toString());
        assertEquals(Arrays.asList("0", "1000", "1250"),
                Arrays.asList(run.get(0).fields.get("value"), run.get(1).fields.get("value"),
                        run.get(2).fields.get("value")));
        assertEquals(Arrays.asList(10_000_000_000L, 15_000_000_000L, 15_001_000_000L),
                Arrays.asList(run.get(0).time, run.get(1).time, run.get(2).time));
        assertEquals("500000000", points("cpuTime.count").get(2).fields.get("value"));
        assertEquals("10000", points("shuffleWriteTime.count").get(2).fields.get("value"));
        assertEquals(3 * TaskTimeTotals.COUNTERS.size(), lines.size());
    }

    @Test
    void totals_are_plain_digit_floats_and_never_overflow() {
        // A month of 2,000 busy task slots' CPU is about 5.2e18 ns; two thousand
        // such months would overflow a long. A float field in line protocol,
        // as Telegraf stores Graphite's values, written without exponent.
        for (int i = 0; i < 2_000; i++) {
            totals.taskSucceeded(1, 5_184_000_000_000_000_000L, 0, 0, 0, 0);
        }
        totals.taskSucceeded(1, 1, 0, 0, 0, 0);
        totals.tick(1);
        String value = points("cpuTime.count").get(0).fields.get("value");
        assertTrue(value.matches("[0-9]+"), "digits only, no 'i' (integer) and no exponent: " + value);
        assertEquals(1.0368e22, Double.parseDouble(value), 1e7);
        assertEquals("2001", points("runTime.count").get(0).fields.get("value"), "small totals are exact");
    }
}
