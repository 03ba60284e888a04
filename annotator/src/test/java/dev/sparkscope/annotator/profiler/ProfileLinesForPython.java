package dev.sparkscope.annotator.profiler;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** ProfileLines for the cross-language test's Java side (core.LinesForPython), from its JSON request. */
public final class ProfileLinesForPython {

    private ProfileLinesForPython() {
    }

    @SuppressWarnings("unchecked")
    public static List<String> lines(Map<String, Object> p) {
        List<NestedSet.Row> rows = new ArrayList<>();
        for (Object r : (List<Object>) p.get("rows")) {
            List<Object> row = (List<Object>) r;
            rows.add(new NestedSet.Row(((Long) row.get(0)).intValue(), (Long) row.get(1), (Long) row.get(2),
                    (String) row.get(3)));
        }
        return ProfileLines.lines((String) p.get("application_id"), (String) p.get("executor_id"),
                (String) p.get("kind"), (Long) p.get("start_ms"), ((Number) p.get("seconds")).doubleValue(),
                (String) p.get("stage"), ((Long) p.get("slot")).intValue(), rows, (Long) p.get("samples"),
                (String) p.get("unit"));
    }
}
