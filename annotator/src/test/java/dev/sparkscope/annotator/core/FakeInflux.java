package dev.sparkscope.annotator.core;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.function.IntFunction;

import com.sun.net.httpserver.HttpServer;

/** An in-process stand-in for InfluxDB's /write endpoint that records exactly what it receives. */
public final class FakeInflux implements AutoCloseable {

    static final class Request {
        final String method;
        final String uri;
        final String contentType;
        final String authorization;
        final byte[] body;
        final long atNanos;

        Request(String method, String uri, String contentType, String authorization, byte[] body, long atNanos) {
            this.method = method;
            this.uri = uri;
            this.contentType = contentType;
            this.authorization = authorization;
            this.body = body;
            this.atNanos = atNanos;
        }

        String bodyText() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    private final HttpServer server;
    private final List<Request> requests = new ArrayList<>();

    /**
     * answers gives what to answer to the n-th request (0-based): the same
     * status and body that HttpLineSender then reads back as its Response.
     */
    FakeInflux(IntFunction<HttpLineSender.Response> answers) throws IOException {
        this(0, answers);
    }

    /** On a given port: a listener that comes back where it was (Telegraf restarted). */
    FakeInflux(int port, IntFunction<HttpLineSender.Response> answers) throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.setExecutor(Executors.newFixedThreadPool(2, r -> {
            Thread t = new Thread(r, "fake-influx");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/", exchange -> {
            byte[] body = readAll(exchange.getRequestBody());
            int n;
            synchronized (requests) {
                n = requests.size();
                requests.add(new Request(exchange.getRequestMethod(), exchange.getRequestURI().toString(),
                        exchange.getRequestHeaders().getFirst("Content-Type"),
                        exchange.getRequestHeaders().getFirst("Authorization"), body, System.nanoTime()));
            }
            HttpLineSender.Response a = answers.apply(n);
            byte[] out = a.body.getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(a.status, out.length == 0 ? -1 : out.length);
            if (out.length > 0) {
                try (OutputStream os = exchange.getResponseBody()) {
                    os.write(out);
                }
            }
            exchange.close();
        });
        server.start();
    }

    public static FakeInflux answering(int status) throws IOException {
        return new FakeInflux(n -> new HttpLineSender.Response(status, ""));
    }

    public String baseUrl() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    URL writeUrl() throws IOException {
        return new URL(baseUrl() + "/write?db=spark&precision=ns");
    }

    List<Request> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
    }

    /** All lines received, in order. */
    public List<String> lines() {
        List<String> out = new ArrayList<>();
        for (Request r : requests()) {
            out.addAll(InfluxLineReader.splitLines(r.bodyText()));
        }
        return out;
    }

    @Override
    public void close() {
        server.stop(0);
    }

    /** A port on which nothing listens (bound, then released). */
    static int closedPort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = in.read(buf)) > 0) {
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }
}
