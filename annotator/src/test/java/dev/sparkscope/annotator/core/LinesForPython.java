package dev.sparkscope.annotator.core;

import dev.sparkscope.annotator.profiler.ProfileLinesForPython;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The Java side of tests/test_lineprotocol.py's cross-language tests, run with
 * {@code java -cp target/test-classes:target/sparkscope-annotator.jar}: reads
 * a JSON request on stdin and answers JSON on stdout (UTF-8):
 * <ul>
 *   <li>"points": cases in the layout of tests/data/lineprotocol_cases.json,
 *       answered as the lines Point writes ("points": [line, ...]);</li>
 *   <li>"profiles": {application_id, executor_id, kind, start_ms, seconds,
 *       stage, slot, rows: [[level, value, self, label], ...], samples, unit},
 *       answered as ProfileLines' lines ("profiles": [[line, ...], ...]);</li>
 *   <li>"float_bits": doubles as their IEEE bits, answered as Point.floatText
 *       ("floats": [text, ...]);</li>
 *   <li>"send": a /write URL: every point's and profile's lines are POSTed
 *       there in one request, as the annotator's writer does, with
 *       "authorization" as its header when given.</li>
 * </ul>
 */
public final class LinesForPython {

    private LinesForPython() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws IOException {
        Map<String, Object> request = (Map<String, Object>) JsonText.parse(
                new String(readAll(System.in), StandardCharsets.UTF_8));
        List<String> sent = new ArrayList<>();
        StringBuilder out = new StringBuilder("{\"points\": [");
        String sep = "";
        for (Object c : (List<Object>) request.getOrDefault("points", new ArrayList<>())) {
            String line = LineProtocolCasesTest.lineOf((Map<String, Object>) c);
            sent.add(line);
            out.append(sep).append(Json.quote(line));
            sep = ", ";
        }
        out.append("], \"profiles\": [");
        sep = "";
        for (Object p : (List<Object>) request.getOrDefault("profiles", new ArrayList<>())) {
            List<String> lines = ProfileLinesForPython.lines((Map<String, Object>) p);
            sent.addAll(lines);
            out.append(sep).append('[');
            for (int i = 0; i < lines.size(); i++) {
                out.append(i == 0 ? "" : ", ").append(Json.quote(lines.get(i)));
            }
            out.append(']');
            sep = ", ";
        }
        out.append("], \"floats\": [");
        sep = "";
        for (Object bits : (List<Object>) request.getOrDefault("float_bits", new ArrayList<>())) {
            out.append(sep).append(Json.quote(Point.floatText(Double.longBitsToDouble((Long) bits))));
            sep = ", ";
        }
        out.append("]}");
        String url = (String) request.get("send");
        if (url != null) {
            StringBuilder body = new StringBuilder();
            for (String line : sent) {
                body.append(line).append('\n');
            }
            HttpLineSender.Response answer = new HttpLineSender(new URL(url), (String) request.get("authorization"))
                    .post(body.toString().getBytes(StandardCharsets.UTF_8), 10_000, 30_000);
            if (!answer.ok()) {
                throw new IOException(url + " answered " + answer.status + ": " + answer.body);
            }
        }
        PrintStream stdout = new PrintStream(System.out, true, "UTF-8");
        stdout.println(out);
    }


    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        byte[] chunk = new byte[8192];
        for (int n; (n = in.read(chunk)) > 0; ) {
            buffer.write(chunk, 0, n);
        }
        return buffer.toByteArray();
    }
}
