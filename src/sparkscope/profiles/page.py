"""A flame graph as one HTML file that opens offline (no network, no
library): for people who live in the terminal, and to attach to a ticket.
Click a frame to zoom into it, click the top bar to zoom out; the search box
marks every frame whose name contains the text and says what share of the
profile they hold."""

from __future__ import annotations

import html
import json
from typing import Sequence

from sparkscope.store.nested_set import Row, widest_leaves

_SCRIPT = r"""
const rows = DATA.rows, unit = DATA.unit;
const start = new Array(rows.length), parent = new Array(rows.length);
// Nested set to positions: each row follows its previous sibling, or starts
// where its parent starts (the same reading as Grafana's flame graph panel).
const lastAt = [], open = [];
rows.forEach((r, i) => {
  const level = r[0];
  open.length = level;
  parent[i] = level ? open[level - 1] : -1;
  const sib = lastAt[level];
  start[i] = (sib !== undefined && sib.parent === parent[i]) ? start[sib.i] + rows[sib.i][1]
             : (level ? start[parent[i]] : 0);
  lastAt[level] = {i, parent: parent[i]};
  lastAt.length = level + 1;
  open[level] = i;
});
const total = rows.length ? rows[0][1] : 0;
function fmt(v) {
  if (unit === 'bytes') { const u = ['B','KiB','MiB','GiB']; let k = 0; while (v >= 1024 && k < 3) { v /= 1024; k++; } return v.toFixed(k ? 1 : 0) + ' ' + u[k]; }
  if (v >= 1e9) return (v / 1e9).toFixed(2) + ' s';
  if (v >= 1e6) return (v / 1e6).toFixed(1) + ' ms';
  return v + ' ns';
}
function hue(label) { let h = 0; for (const c of label) h = (h * 31 + c.charCodeAt(0)) % 360; return h; }
let focus = 0;
function draw() {
  const box = document.getElementById('graph'); box.innerHTML = '';
  const f0 = start[focus], fw = rows[focus][1], fl = rows[focus][0];
  const needle = document.getElementById('search').value.toLowerCase();
  let matched = 0; const counted = [];
  let depth = 0;
  rows.forEach((r, i) => {
    let onPath = false;
    for (let p = focus; p >= 0; p = parent[p]) if (p === i) onPath = true;
    const inside = start[i] >= f0 && start[i] + r[1] <= f0 + fw && r[0] >= fl;
    if (!onPath && !inside) return;
    const x = onPath ? 0 : (start[i] - f0) / fw, w = onPath ? 1 : r[1] / fw;
    if (w < 0.001) return;
    const d = document.createElement('div');
    const hit = needle && r[3].toLowerCase().includes(needle);
    if (hit && !counted.some(a => start[i] >= start[a] && start[i] < start[a] + rows[a][1])) { matched += r[1]; counted.push(i); }
    d.className = 'f' + (hit ? ' hit' : '') + (onPath && i !== focus ? ' path' : '');
    d.style.left = (x * 100) + '%'; d.style.width = (w * 100) + '%'; d.style.top = (r[0] * 18) + 'px';
    d.style.background = hit ? '#e040fb' : `hsl(${hue(r[3]) % 60 + 10}, 80%, ${onPath && i !== focus ? 82 : 62}%)`;
    d.textContent = r[3];
    d.title = `${r[3]}\n${fmt(r[1])} (${(100 * r[1] / total).toFixed(2)} %), self ${fmt(r[2])}`;
    d.onclick = () => { focus = (i === focus && i) ? parent[i] : i; draw(); };
    box.appendChild(d);
    depth = Math.max(depth, r[0]);
  });
  box.style.height = ((depth + 1) * 18) + 'px';
  document.getElementById('matched').textContent = needle ? `${(100 * matched / total).toFixed(2)} % of the profile matches` : '';
}
document.getElementById('search').oninput = draw;
draw();
"""

_STYLE = """
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
#graph { position: relative; width: 100%; }
.f { position: absolute; height: 17px; overflow: hidden; white-space: nowrap; font: 11px monospace;
     line-height: 17px; padding-left: 2px; box-sizing: border-box; border-right: 1px solid #fff; cursor: pointer; }
.f.path { opacity: .75; }
table { border-collapse: collapse; margin: 8px 0 16px; } td, th { padding: 2px 10px; text-align: left; }
"""


def render(rows: Sequence[Row], title: str, unit: str = "ns", facts: dict[str, str] | None = None) -> str:
    data = {"rows": [[r.level, r.value, r.self_value, r.label] for r in rows], "unit": unit}
    top = widest_leaves(rows, 10)
    total = rows[0].value if rows else 1
    facts_html = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                         for k, v in (facts or {}).items())
    top_html = "".join(f"<tr><td>{100 * v / total:.1f} %</td><td><code>{html.escape(label)}</code></td></tr>"
                       for label, v in top)
    # No < at all inside the script: "</" would close it, "<!--<script" would leave the
    # tokenizer in its double-escaped state (labels are thread names, file paths). \u003c is < to JSON.
    payload = json.dumps(data).replace("<", "\\u003c")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_STYLE}</style></head>
<body><h2>{html.escape(title)}</h2>
<table>{facts_html}</table>
<p>Frames with the most self time (where the samples landed):</p><table>{top_html}</table>
<p><input id="search" placeholder="search frames" size="40"> <span id="matched"></span>
 &nbsp;Click a frame to zoom into it; click it again to zoom out.</p>
<div id="graph"></div>
<script>const DATA = {payload};{_SCRIPT}</script>
</body></html>
"""
