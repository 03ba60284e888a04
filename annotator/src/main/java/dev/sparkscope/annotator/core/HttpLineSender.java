package dev.sparkscope.annotator.core;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;

/** POSTs one batch of line protocol to InfluxDB's /write endpoint. */
public final class HttpLineSender {

    /** What InfluxDB answered: status code and the start of its body (its error text). */
    static final class Response {
        final int status;
        final String body;

        Response(int status, String body) {
            this.status = status;
            this.body = body;
        }

        boolean ok() {
            return status >= 200 && status < 300;
        }

        /** Server-side trouble that may pass: worth another try. */
        boolean retryable() {
            return status >= 500 || status == 429 || status == 408;
        }
    }

    private static final int MAX_ERROR_BODY = 512;

    private final URL writeUrl;
    private final String authorization;

    public HttpLineSender(URL writeUrl, String authorization) {
        this.writeUrl = writeUrl;
        this.authorization = authorization;
    }

    URL url() {
        return writeUrl;
    }

    /** Throws IOException when InfluxDB cannot be reached or does not answer in time. */
    Response post(byte[] body, int connectTimeoutMs, int readTimeoutMs) throws IOException {
        HttpURLConnection conn = (HttpURLConnection) writeUrl.openConnection();
        try {
            conn.setConnectTimeout(Math.max(1, connectTimeoutMs));
            conn.setReadTimeout(Math.max(1, readTimeoutMs));
            conn.setRequestMethod("POST");
            conn.setDoOutput(true);
            conn.setUseCaches(false);
            conn.setInstanceFollowRedirects(false);
            conn.setFixedLengthStreamingMode(body.length);
            conn.setRequestProperty("Content-Type", "text/plain; charset=utf-8");
            if (authorization != null) {
                conn.setRequestProperty("Authorization", authorization);
            }
            try (OutputStream out = conn.getOutputStream()) {
                out.write(body);
            }
            int status = conn.getResponseCode();
            InputStream in = status >= 400 ? conn.getErrorStream() : conn.getInputStream();
            return new Response(status, readSome(in));
        } catch (IOException e) {
            conn.disconnect();
            throw e;
        }
    }

    /** Reads the body so the connection can be reused, keeping only its start. */
    private static String readSome(InputStream in) throws IOException {
        if (in == null) {
            return "";
        }
        try (InputStream stream = in) {
            byte[] keep = new byte[MAX_ERROR_BODY];
            int kept = 0;
            byte[] buf = new byte[4096];
            int n;
            while ((n = stream.read(buf)) > 0) {
                int room = Math.min(n, keep.length - kept);
                System.arraycopy(buf, 0, keep, kept, room);
                kept += room;
            }
            return new String(keep, 0, kept, StandardCharsets.UTF_8).trim();
        }
    }
}
