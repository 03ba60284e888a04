package dev.sparkscope.annotator.proctree;

import java.io.Serializable;

/**
 * What an executor's sampler sends its driver over the plugin's RPC: the
 * highest sizes {JVM, Python, other} it measured since its last message, for
 * the driver's memory peaks (an executor that is killed has sent its peaks
 * up to its last rise).
 */
public final class ProcessTreeReading implements Serializable {

    private static final long serialVersionUID = 1L;

    public final String executorId;
    public final long[] sizes;

    public ProcessTreeReading(String executorId, long[] sizes) {
        this.executorId = executorId;
        this.sizes = sizes.clone();
    }
}
