package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class DurationTextTest {

    @Test
    void durations_read_like_a_person_would_say_them() {
        assertEquals("0 ms", DurationText.of(0));
        assertEquals("850 ms", DurationText.of(850));
        assertEquals("12.3 s", DurationText.of(12_300));
        assertEquals("2 min 3 s", DurationText.of(123_000));
        assertEquals("1 h 5 min", DurationText.of(3_900_000));
        assertEquals("?", DurationText.of(-1));
    }
}
