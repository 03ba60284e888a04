package dev.sparkscope.annotator.memory;

import dev.sparkscope.annotator.core.JobProperties;
import dev.sparkscope.annotator.core.ScalaOption;
import dev.sparkscope.annotator.core.Status;

import java.util.List;
import java.util.Properties;
import java.util.function.Function;

import org.apache.spark.executor.ExecutorMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;

import scala.Tuple2;
import scala.collection.Iterator;

/**
 * Feeds {@link ExecutorPeaks} from Spark's events. Reaches the heartbeat's
 * Scala map only through {@code iterator()}, {@code hasNext()}, {@code next()}
 * and {@code Tuple2._1()/_2()}, which Scala 2.12 and 2.13 share, so one jar
 * serves Spark 3.5 and 4.x. The caller catches whatever this throws.
 */
public final class ExecutorPeakEvents {

    private final ExecutorPeaks peaks;
    /** Metric names this Spark version does not know (getMetricValue throws for them): asked once. */
    private final boolean[] unknown = new boolean[ExecutorPeaks.METRICS.size()];

    private final Function<String, String> conf;

    public ExecutorPeakEvents(ExecutorPeaks peaks, Function<String, String> conf) {
        this.peaks = peaks;
        this.conf = conf;
    }

    public void handle(SparkListenerEvent event) {
        if (event instanceof SparkListenerExecutorMetricsUpdate) {
            SparkListenerExecutorMetricsUpdate e = (SparkListenerExecutorMetricsUpdate) event;
            if (e.executorUpdates() == null) {
                return;
            }
            // The process-tree sampler's highest sizes since the last heartbeat, for every stage it reports.
            long[] tree = peaks.treeWindow(e.execId(), true);
            if (tree != null) {
                peaks.update(e.execId(), -1, 0, ExecutorPeaks.withTree(ExecutorPeaks.emptyPeaks(), tree));
            }
            Iterator<?> it = e.executorUpdates().iterator();
            while (it.hasNext()) {
                Tuple2<?, ?> entry = (Tuple2<?, ?>) it.next();
                Tuple2<?, ?> key = (Tuple2<?, ?>) entry._1();
                if (key._1() instanceof Number && key._2() instanceof Number && entry._2() instanceof ExecutorMetrics) {
                    peaks.update(e.execId(), ((Number) key._1()).intValue(), ((Number) key._2()).intValue(),
                            ExecutorPeaks.withTree(values((ExecutorMetrics) entry._2()), tree));
                }
            }
        } else if (event instanceof SparkListenerTaskEnd) {
            SparkListenerTaskEnd e = (SparkListenerTaskEnd) event;
            TaskMetrics m = e.taskMetrics(); // null for some failed tasks
            if (e.taskInfo() == null || (e.taskExecutorMetrics() == null && m == null)) {
                return;
            }
            long[] v = e.taskExecutorMetrics() != null ? values(e.taskExecutorMetrics()) : ExecutorPeaks.emptyPeaks();
            if (m != null) {
                v[ExecutorPeaks.TASK_EXECUTION] = m.peakExecutionMemory();
            }
            peaks.update(e.taskInfo().executorId(), e.stageId(), e.stageAttemptId(),
                    ExecutorPeaks.withTree(v, peaks.treeWindow(e.taskInfo().executorId(), false)));
        } else if (event instanceof SparkListenerStageSubmitted) {
            SparkListenerStageSubmitted e = (SparkListenerStageSubmitted) event;
            StageInfo s = e.stageInfo();
            peaks.stageSubmitted(s.stageId(), s.attemptNumber(), executionId(e.properties()));
        } else if (event instanceof SparkListenerStageCompleted) {
            StageInfo s = ((SparkListenerStageCompleted) event).stageInfo();
            Long completed = ScalaOption.number(s.completionTime());
            String failure = ScalaOption.string(s.failureReason());
            peaks.stageCompleted(s.stageId(), s.attemptNumber(), s.name(),
                    failure == null ? Status.SUCCEEDED : Status.FAILED,
                    completed != null ? completed : System.currentTimeMillis());
        } else if (event instanceof SparkListenerExecutorRemoved) {
            SparkListenerExecutorRemoved e = (SparkListenerExecutorRemoved) event;
            peaks.executorRemoved(e.executorId(), e.time());
        } else if (event instanceof SparkListenerApplicationStart) {
            peaks.applicationStarted(((SparkListenerApplicationStart) event).time(), conf);
        } else if (event instanceof SparkListenerApplicationEnd) {
            peaks.applicationEnded(((SparkListenerApplicationEnd) event).time());
        }
    }

    private long[] values(ExecutorMetrics m) {
        List<String> names = ExecutorPeaks.METRICS;
        long[] v = ExecutorPeaks.emptyPeaks();
        if (!m.isSet()) {
            return v;
        }
        for (int i = 0; i < names.size(); i++) {
            if (unknown[i]) {
                continue;
            }
            try {
                long value = m.getMetricValue(names.get(i));
                v[i] = value < 0 ? ExecutorPeaks.MISSING : value; // -1: not measured
            } catch (RuntimeException notInThisVersion) {
                unknown[i] = true;
            }
        }
        return v;
    }

    private static Long executionId(Properties p) {
        return JobProperties.parseLong(JobProperties.property(p, JobProperties.SQL_EXECUTION_ID));
    }
}
