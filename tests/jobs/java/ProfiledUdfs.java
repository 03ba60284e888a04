import org.apache.spark.sql.api.java.UDF1;

/**
 * Two Java UDFs with names a profile must show: one burns CPU, one sleeps
 * (off CPU). Registered from tests/jobs/profiled_job.py.
 */
public final class ProfiledUdfs {

    public static final class Burn implements UDF1<Long, Long> {
        @Override
        public Long call(Long x) {
            return burnCpuForProfilerTest(x);
        }
    }

    public static final class Nap implements UDF1<Long, Long> {
        @Override
        public Long call(Long x) throws InterruptedException {
            return sleepOffCpuForProfilerTest(x);
        }
    }

    static long burnCpuForProfilerTest(long x) {
        // A long-counted loop with a division: the JIT keeps a safepoint poll
        // (and so this method's debug info) inside it even when it inlines
        // the method into Spark's generated code, so samples land here.
        long h = x;
        for (long i = 0; i < 100_000L; i++) {
            h = (h * 31 + i) % 1_000_000_007L;
        }
        return h;
    }

    static long sleepOffCpuForProfilerTest(long x) throws InterruptedException {
        Thread.sleep(20);
        return x;
    }
}
