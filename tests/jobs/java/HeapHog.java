import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.spark.SparkEnv;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Fills one executor's heap with live data and keeps its garbage collector
 * busy: the executor whose id is given holds share x its max heap for the
 * given seconds (the first call on that JVM only), replacing held chunks all
 * the while so the old generation keeps filling with garbage. Other executors
 * return at once. An OutOfMemoryError (the collector cannot keep up) gives
 * 2 % of the heap back and the hold goes on. Registered from
 * tests/jobs/alert_trouble_job.py. Returns "executor:N MiB, K OutOfMemoryError"
 * or "executor:skip".
 */
public final class HeapHog implements UDF3<String, Double, Integer, String> {
    private static volatile boolean done;
    // With its 16-byte header a chunk is exactly 128 KiB: 8 fill a 1 MiB G1 region (at a 1 GiB heap) and
    // stay below G1's humongous size. 16,384 longs would waste an eighth of every region: G1 then fails
    // at 86 % of the heap, and holds 95 % with exact chunks.
    private static final int CHUNK_LONGS = 16_382;
    private static final long CHUNK_BYTES = 128 * 1024;

    private static long release(List<long[]> held, long bytes) {
        long freed = 0;
        while (freed < bytes && !held.isEmpty()) {
            held.remove(held.size() - 1);
            freed += CHUNK_BYTES;
        }
        return freed;
    }

    @Override
    public String call(String executor, Double share, Integer seconds) {
        String self = SparkEnv.get().executorId();
        synchronized (HeapHog.class) {
            if (!self.equals(executor) || done) {
                return self + ":skip";
            }
            done = true;
        }
        Runtime rt = Runtime.getRuntime();
        System.gc();
        long target = (long) (rt.maxMemory() * share) - (rt.totalMemory() - rt.freeMemory());
        long step = rt.maxMemory() / 50; // what an OutOfMemoryError gives back: 2 % of the heap
        List<long[]> held = new ArrayList<>();
        long bytes = 0;
        int ooms = 0;
        try {
            while (bytes < target) {
                held.add(new long[CHUNK_LONGS]);
                bytes += CHUNK_BYTES;
            }
        } catch (OutOfMemoryError e) { // fuller than the collector can manage: hold a little less
            bytes -= release(held, step);
            ooms++;
        }
        Random random = new Random(42);
        long end = System.currentTimeMillis() + seconds * 1000L;
        while (System.currentTimeMillis() < end) {
            try {
                for (int i = 0; i < 64; i++) {
                    held.set(random.nextInt(held.size()), new long[CHUNK_LONGS]); // old data becomes garbage
                }
            } catch (OutOfMemoryError e) {
                bytes -= release(held, step);
                ooms++;
            }
        }
        String said = self + ":" + (bytes >> 20) + " MiB, " + ooms + " OutOfMemoryError";
        held.clear();
        return said;
    }
}
