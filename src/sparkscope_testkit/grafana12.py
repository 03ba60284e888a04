"""What Grafana 12 sends to InfluxDB for one of our dashboards, without Grafana.

No Grafana runs here (its code is AGPL): a test "opens" a dashboard with
Dashboard12, which resolves its template variables and interpolates every
query as Grafana 12.4 does, then sends the queries to a real InfluxDB the way
Grafana's backend sends them (influx_http).

Where a rule is uncertain the model raises ModelError instead of guessing: it
is stricter than Grafana, never looser. A dashboard the model refuses may still
work in Grafana; the message says which rule the model would not guess.
Two approximations remain: a panel's width in pixels is gridPos.w / 24 of the
viewport (Grafana's container is a few pixels narrower, which can move
$__interval across a rounding step), and a multi-column variable query lists
its options column by column.

Sources (docs/grafana.md, "Grafana 12.4's rules"): the Apache-2.0 @grafana/scenes code
(interpolation, formats, option selection, URL values, interval variables);
Grafana's documentation: variable syntax and formats
(grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/),
global variables ($__from date formats; $__range for Prometheus and Loki only:
.../dashboards/variables/global-variables/), InfluxDB templates (multi-value
and All values regex-escaped: .../v9.1/datasources/influxdb/influxdb-templates),
filter variables with regex (.../v8.4/variables/filter-variables-with-regex/),
the VariableSort codes (grafana-foundation-sdk reference), InfluxDB annotations
(.../latest/datasources/influxdb/annotations/); grafana/grafana#100762 (regex
literals found first, 11.5.3) and #110005 ('/' escaped).

Not modelled (ModelError when a dashboard needs them): builder-mode targets,
ad hoc filters, datasource variables, repeated and library panels, panel time
overrides, expressions other than math. Transformations run in Grafana's
browser: unmodelled_transformations() names them, run_panel() returns the
frames they would get.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class ModelError(AssertionError):
    """Grafana 12 would do something else here, or the model refuses to guess what it does."""


# send(query, rp) -> the InfluxDB series of the query's first statement.
Send = Callable[[str, Optional[str]], List[dict]]

ALL = "$__all"            # @grafana/scenes ALL_VARIABLE_VALUE
ALL_TEXT = "All"          # @grafana/scenes ALL_VARIABLE_TEXT
AUTO = "$__auto"          # @grafana/scenes AUTO_VARIABLE_VALUE
PROVISIONED_DATASOURCES = Path(__file__).resolve().parents[2] / "grafana" / "provisioning" / "datasources"


# ------------------------------------------------------------------ InfluxDB, as Grafana's backend asks it

def _open(request: urllib.request.Request, timeout: float):
    """One HTTP exchange (a seam for the unit tests)."""
    return urllib.request.urlopen(request, timeout=timeout)


def influx_http(url: str, db: str, user: str | None = None, password: str | None = None,
                timeout: float = 60) -> Send:
    """send(query, rp) as Grafana's InfluxQL backend sends a target (datasource httpMode GET):
    GET /query?db=&epoch=ms&q=(&rp=), basic auth when a user is given. Only the first
    statement's result is read (docs/grafana.md)."""
    base = url.rstrip("/")

    def send(query: str, rp: str | None = None) -> list[dict]:
        params = {"db": db, "epoch": "ms", "q": query}
        if rp:
            params["rp"] = rp
        request = urllib.request.Request(f"{base}/query?{urllib.parse.urlencode(params)}", method="GET")
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with _open(request, timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise ModelError(f"InfluxDB at {base} answered HTTP {e.code} to {query!r}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ModelError(f"InfluxDB not reachable at {base} ({reason}): is the stack up? "
                             "run ./sparkscope up") from None
        try:
            answer = json.loads(body or b"{}")
        except ValueError:
            raise ModelError(f"InfluxDB at {base} answered {body[:200]!r} to {query!r}: not JSON") from None
        results = answer.get("results") or []
        if not results:
            raise ModelError(f"InfluxDB at {base} gave no result for {query!r}: {answer.get('error', answer)!r}")
        first = results[0]
        if first.get("error"):
            raise ModelError(f"InfluxDB at {base} refused {query!r}: {first['error']}")
        return first.get("series", [])

    return send


@dataclass
class Request:
    """One panel target as Grafana's backend sends it to InfluxDB."""
    ref_id: str
    query: str
    rp: Optional[str]
    hidden: bool
    alias: Optional[str] = None
    result_format: Optional[str] = None


# ------------------------------------------------------------------ JavaScript semantics the rules rely on

# parseFloat() skips these before it reads a number (ECMAScript StrWhiteSpaceChar).
_JS_SPACE = "\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_NUMBER_FIRST = re.compile("[" + _JS_SPACE + r"]*[+-]?(?:Infinity|[0-9]|\.[0-9])")
_REGEX_SPECIALS = re.compile(r"[\\^$*+?.()|\[\]{}/]")


def starts_with_number(text: str) -> bool:
    """isNaN(parseFloat(text)) is false: '10s', '1.5', '2024-run', ' -3', 'Infinity'."""
    return bool(_NUMBER_FIRST.match(text))


def escape_regex(text: str) -> str:
    """@grafana/data escapeRegex: \\ ^ $ * + ? . ( ) | [ ] { } / get a backslash (not '-')."""
    return _REGEX_SPECIALS.sub(lambda m: "\\" + m.group(0), text)


def js_number_to_string(x: float) -> str:
    """Number.prototype.toString(): 1.0 -> '1', 2.5 -> '2.5', 1e21 -> '1e+21', 1e-7 -> '1e-7'."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr() is the shortest round-trip digit string, as JavaScript's is.
    parts = decimal.Decimal(repr(abs(x))).as_tuple()
    digits, exponent = list(parts.digits), parts.exponent
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exponent += 1
    while len(digits) > 1 and digits[0] == 0:
        digits.pop(0)
    text = "".join(map(str, digits))
    k, n = len(text), exponent + len(text)
    if k <= n <= 21:
        return sign + text + "0" * (n - k)
    if 0 < n <= 21:
        return sign + text[:n] + "." + text[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + text
    e = n - 1
    mantissa = text[0] + ("." + text[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _js_string_key(text: str) -> bytes:
    """JavaScript compares strings by UTF-16 code units."""
    return text.encode("utf-16-be", "surrogatepass")


def js_regex_compiles(pattern: str) -> bool | None:
    """Does new RegExp(pattern) compile in a browser? None when Python cannot tell."""
    if "(?P" in pattern:
        return False
    translated = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
    # Inline flags, comments, atomic groups and possessive quantifiers: Python takes
    # some of them, browsers differ; the model does not decide.
    if re.search(r"\(\?(?![:=!]|<[=!]|P<)", translated) or re.search(r"(?<!\\)[*+?}]\+", translated):
        return None
    try:
        re.compile(translated)
    except re.error:
        return None
    return True


def _js_regex(source: str) -> Tuple[re.Pattern, bool]:
    """@grafana/data stringToJsRegex for a variable's regex: '/pattern/flags'."""
    if not source.startswith("/"):
        raise ModelError(f"variable regex {source!r} without /.../: not modelled")
    m = re.fullmatch(r"/(.*?)/(g?i?m?y?s?)", source)
    if not m:
        raise ModelError(f"{source!r} is not a valid regular expression for Grafana")
    pattern, flags = m.groups()
    if "y" in flags:
        raise ModelError(f"{source!r}: the sticky flag is not modelled")
    if js_regex_compiles(pattern) is not True:
        raise ModelError(f"{source!r}: the model cannot tell how a browser compiles it")
    py_flags = (re.I if "i" in flags else 0) | (re.M if "m" in flags else 0) | (re.S if "s" in flags else 0)
    return re.compile(re.sub(r"\(\?<(?![=!])", "(?P<", pattern), py_flags), "g" in flags


# ------------------------------------------------------------------ intervals (@grafana/data rangeutil)

# roundInterval: the calculated interval, rounded down this table (@grafana/data rangeutil).
_ROUNDING = ((10, 1), (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1_500, 1_000),
             (3_500, 2_000), (7_500, 5_000), (12_500, 10_000), (17_500, 15_000), (25_000, 20_000),
             (45_000, 30_000), (90_000, 60_000), (210_000, 120_000), (450_000, 300_000), (750_000, 600_000),
             (1_050_000, 900_000), (1_500_000, 1_200_000), (2_700_000, 1_800_000), (5_400_000, 3_600_000),
             (9_000_000, 7_200_000), (16_200_000, 10_800_000), (32_400_000, 21_600_000),
             (86_400_000, 43_200_000), (604_800_000, 86_400_000), (1_814_400_000, 604_800_000),
             (3_628_800_000, 2_592_000_000))
YEAR_MS = 31_536_000_000
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def round_interval(ms: float) -> int:
    for limit, rounded in _ROUNDING:
        if ms < limit:
            return rounded
    return YEAR_MS


def seconds_to_hms(seconds: float) -> str:
    """The interval's text: its largest non-zero unit, floored (no weeks: 1 w is '7d')."""
    years = math.floor(seconds / 31_536_000)
    if years:
        return f"{years}y"
    days = math.floor((seconds % 31_536_000) / 86_400)
    if days:
        return f"{days}d"
    hours = math.floor((seconds % 31_536_000 % 86_400) / 3_600)
    if hours:
        return f"{hours}h"
    minutes = math.floor((seconds % 31_536_000 % 86_400 % 3_600) / 60)
    if minutes:
        return f"{minutes}m"
    whole = math.floor(seconds % 31_536_000 % 86_400 % 3_600 % 60)
    if whole:
        return f"{whole}s"
    ms = math.floor(seconds * 1000.0)
    if ms:
        return f"{ms}ms"
    return "less than a millisecond"


def interval_to_ms(text: str) -> int:
    m = re.fullmatch(r"([0-9]+)(ms|s|m|h|d|w)", text)
    if not m:
        raise ModelError(f"interval {text!r}: only a whole number of ms, s, m, h, d or w is modelled")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def calculate_interval(range_ms: int, resolution: float, low_limit: str | None) -> Tuple[str, int]:
    """rangeUtil.calculateInterval: max(round(range / resolution), low limit), as text and ms."""
    if resolution <= 0:
        raise ModelError(f"resolution {resolution}: a panel needs a positive width or maxDataPoints")
    ms = round_interval(range_ms / resolution)
    low = interval_to_ms(low_limit) if low_limit else 1
    ms = max(ms, low)
    text = seconds_to_hms(ms / 1000)
    if text.endswith("y"):
        raise ModelError(f"interval of {ms} ms is {text!r}: not an InfluxQL duration (InfluxDB rejects it)")
    return text, ms


# ------------------------------------------------------------------ dates (moment.js format, in a time zone)

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
# moment's formattingTokens: [literal], an escaped token, a token, or any other character.
_MOMENT_TOKEN = re.compile(
    r"(\[[^\[]*\])|(\\)?([Hh]mm(?:ss)?|Mo|MM?M?M?|Do|DDDo|DD?D?D?|ddd?d?|do?|w[o|w]?|W[o|W]?|Qo?|N{1,5}"
    r"|YYYYYY|YYYYY|YYYY|YY|y{2,4}|yo?|gg(?:ggg?)?|GG(?:GGG?)?|e|E|a|A|hh?|HH?|kk?|mm?|ss?|S{1,9}|x|X|zz?|ZZ?|.)",
    re.S)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _zone(name: str) -> _dt.tzinfo:
    if name.upper() == "UTC":
        return _dt.timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ModelError(f"time zone {name!r} unknown") from None


def _at(epoch_ms: int, zone: str) -> _dt.datetime:
    return (_EPOCH + _dt.timedelta(milliseconds=epoch_ms)).astimezone(_zone(zone))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _offset(t: _dt.datetime, colon: bool) -> str:
    minutes = int(t.utcoffset().total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{':' if colon else ''}{rest:02d}"


def _moment_token(token: str, t: _dt.datetime, epoch_ms: int) -> str:
    ms = epoch_ms % 1000
    h12 = t.hour % 12 or 12
    simple = {
        "YYYY": f"{t.year:04d}", "YY": f"{t.year % 100:02d}",
        "M": str(t.month), "MM": f"{t.month:02d}", "MMM": _MONTHS[t.month - 1][:3], "MMMM": _MONTHS[t.month - 1],
        "Mo": _ordinal(t.month), "Q": str((t.month - 1) // 3 + 1),
        "D": str(t.day), "DD": f"{t.day:02d}", "Do": _ordinal(t.day),
        "DDD": str(t.timetuple().tm_yday), "DDDD": f"{t.timetuple().tm_yday:03d}",
        "d": str((t.weekday() + 1) % 7), "dd": _WEEKDAYS[(t.weekday() + 1) % 7][:2],
        "ddd": _WEEKDAYS[(t.weekday() + 1) % 7][:3], "dddd": _WEEKDAYS[(t.weekday() + 1) % 7],
        "H": str(t.hour), "HH": f"{t.hour:02d}", "h": str(h12), "hh": f"{h12:02d}",
        "k": str(t.hour or 24), "kk": f"{t.hour or 24:02d}",
        "m": str(t.minute), "mm": f"{t.minute:02d}", "s": str(t.second), "ss": f"{t.second:02d}",
        "a": "am" if t.hour < 12 else "pm", "A": "AM" if t.hour < 12 else "PM",
        "Z": _offset(t, True), "ZZ": _offset(t, False),
        "X": str(epoch_ms // 1000), "x": str(epoch_ms),
        "Hmm": f"{t.hour}{t.minute:02d}", "Hmmss": f"{t.hour}{t.minute:02d}{t.second:02d}",
        "hmm": f"{h12}{t.minute:02d}", "hmmss": f"{h12}{t.minute:02d}{t.second:02d}",
    }
    if token in simple:
        if token == "YYYY" and not 0 <= t.year <= 9999:
            raise ModelError(f"year {t.year}: moment's YYYY beyond 9999 is not modelled")
        return simple[token]
    if re.fullmatch("S{1,9}", token):
        return (f"{ms:03d}" + "000000")[:len(token)]
    if token == "T" or (len(token) == 1 and not (token.isascii() and token.isalpha())):
        return token  # not a moment token: written as is
    raise ModelError(f"moment.js format token {token!r} is not modelled")


def moment_format(epoch_ms: int, fmt: str, zone: str) -> str:
    """moment(epoch_ms).format(fmt) in the viewer's time zone (what ${__from:date:FORMAT} gives)."""
    if not fmt:
        raise ModelError("an empty date format falls back to moment's default: not modelled")
    t = _at(epoch_ms, zone)
    out = []
    for m in _MOMENT_TOKEN.finditer(fmt):
        literal, escaped, token = m.groups()
        if literal is not None:
            out.append(literal[1:-1])
        elif escaped:
            out.append(token)
        else:
            out.append(_moment_token(token, t, epoch_ms))
    return "".join(out)


def iso_utc(epoch_ms: int) -> str:
    """Date.prototype.toISOString()."""
    t = _at(epoch_ms, "UTC")
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


# ------------------------------------------------------------------ InfluxQL: statements and regex literals

def _scan_influxql(query: str) -> Tuple[List[Tuple[int, int]], List[int]]:
    """(spans of regex literal bodies, positions of ';' outside strings, identifiers and regexes).
    A '/' opens a regex only right after =~ or !~; elsewhere it is taken as division, so a ';'
    inside `FROM /a;b/` counts as a separator (stricter than InfluxDB)."""
    regexes: list[tuple[int, int]] = []
    separators: list[int] = []
    i, n, previous = 0, len(query), ""
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c in "'\"":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" else 1
            if j >= n:
                raise ModelError(f"unterminated {'string' if c == chr(39) else 'identifier'} in {query!r}")
            i, previous = j + 1, "literal"
        elif query.startswith("--", i):
            end = query.find("\n", i)
            end = n if end < 0 else end
            separators += [k for k in range(i, end) if query[k] == ";"]
            i = end
        elif c == "/" and previous in ("=~", "!~"):
            j = i + 1
            while j < n and query[j] != "/":
                j += 2 if query[j] == "\\" else 1
            if j >= n:
                raise ModelError(f"unterminated regex in {query!r}")
            regexes.append((i + 1, j))
            i, previous = j + 1, "literal"
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            if end < 0:
                raise ModelError(f"unterminated comment in {query!r}")
            separators += [k for k in range(i, end) if query[k] == ";"]
            i = end + 2
        elif c in "=!" and query.startswith("~", i + 1):
            i, previous = i + 2, c + "~"
        else:
            if c == ";":
                separators.append(i)
            i, previous = i + 1, c
    return regexes, separators


def check_single_statement(query: str) -> None:
    """InfluxDB runs every statement of a query; Grafana reads the first result only."""
    _, separators = _scan_influxql(query)
    if separators:
        at = separators[0]
        raise ModelError(f"more than one statement (';' at {at}: {query[max(0, at - 30):at + 30]!r}) in "
                         f"{query!r}: InfluxDB runs every statement, Grafana reads only the first result")


# ------------------------------------------------------------------ variables

# @grafana/scenes VARIABLE_REGEX: $name | [[name(:format)]] | ${name(fieldPath)(:format)}
_VARIABLE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]"
                       r"|\$\{(\w+)((?:\.[^:^{}\[\]]+|\[\"[^\"]*\"\]|\['[^']*'\]|\[[^\]\"']*\])*)(?::([^}]+))?\}",
                       re.ASCII)
_ALIAS_PATTERN = re.compile(r"tag_\w+|col|m|measurement|[1-9]", re.ASCII)
_NOT_INFLUX_MACROS = {"__range", "__range_s", "__range_ms", "__rate_interval", "__rate_interval_ms",
                      "__timeFilter", "__timeFrom", "__timeTo", "__unixEpochFilter"}
_UNMODELLED_FORMATS = {"lucene", "html", "queryparam", "customqueryparam", "uriencode"}


@dataclass(frozen=True)
class _CustomAll:
    """The All value of a variable with a custom all value: inserted as is (scenes CustomAllValue)."""
    text: str


class Variable:
    """A template variable as Grafana 12 holds it once the dashboard is open."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.name: str = spec["name"]
        self.type: str = spec.get("type", "")
        self.multi = bool(spec.get("multi"))
        self.include_all = bool(spec.get("includeAll"))
        self.all_value: str | None = spec.get("allValue") or None
        self.options: list[tuple[str, str]] = []   # (text, value)
        self.request: str | None = None            # the query sent for the options
        self.kept_from_url = False                 # a URL value Grafana keeps although no option holds it
        self._value: Union[str, List[str]] = ""
        self._text: Union[str, List[str]] = ""

    @property
    def is_all(self) -> bool:
        v = self._value
        return v == ALL or (isinstance(v, list) and bool(v) and v[0] == ALL)

    @property
    def current(self) -> list[str]:
        """The values the selection stands for (every option's value for All)."""
        if self.is_all:
            return [value for _, value in self.options]
        return list(self._value) if isinstance(self._value, list) else [self._value]

    @property
    def value(self) -> Union[str, List[str]]:
        """The selection as Grafana stores it ('$__all' for All; a list for a multi-value variable)."""
        return list(self._value) if isinstance(self._value, list) else self._value

    @property
    def text(self) -> str:
        """What the picker shows (${name:text})."""
        if self.is_all:
            return ALL_TEXT
        return " + ".join(self._text) if isinstance(self._text, list) else str(self._text)

    def options_values(self) -> list[str]:
        return [value for _, value in self.options]

    def query_value(self) -> Union[str, List[str], _CustomAll]:
        """What the variable gives a query (scenes MultiValueVariable.getValue)."""
        if self.is_all:
            if self.all_value:
                return _CustomAll(self.all_value)
            return [value for _, value in self.options]
        return self.value

    def __repr__(self) -> str:
        shown = self.options[:8]
        more = f" +{len(self.options) - 8}" if len(self.options) > 8 else ""
        return (f"Variable({self.name!r}, {self.type}, value={self._value!r}, text={self.text!r}, "
                f"options={shown}{more}, request={self.request!r})")


class IntervalVariable(Variable):
    """An interval variable: a fixed interval, or auto (calculateInterval(range, auto_count, auto_min))."""

    def __init__(self, spec: dict, auto_text: str | None):
        super().__init__(spec)
        self.auto_text = auto_text

    def query_value(self) -> str:
        if self._value == AUTO:
            if self.auto_text is None:
                raise ModelError(f"${self.name}: auto selected but the variable has no auto option")
            return self.auto_text
        return str(self._value)

    @property
    def current(self) -> list[str]:
        return [self.query_value()]

    @property
    def text(self) -> str:
        return "auto" if self._value == AUTO else str(self._value)


def _js_same(a, b) -> bool:
    """a === b for the values Grafana compares (arrays by identity)."""
    if isinstance(a, list) or isinstance(b, list):
        return a is b
    return a == b


def _metric_find_values(query: str, series: list[dict]) -> list[str]:
    """The options text a variable query yields (Grafana 12.4, docs/grafana.md): SHOW TAG VALUES
    its value column; a SELECT the union of every non-time column of every series, a series'
    columns in order, each column's rows in order."""
    head = query.lstrip().upper()
    if head.startswith("SHOW TAG VALUES"):
        wanted: str | None = "value"
    elif head.startswith("SELECT"):
        wanted = None
    else:
        raise ModelError(f"variable query {query!r}: only SELECT and SHOW TAG VALUES results are modelled")
    texts = []
    for one in series:
        columns = one.get("columns") or []
        if wanted is None and one.get("tags"):
            raise ModelError(f"variable query {query!r} groups by tags: how Grafana names those options "
                             "is not modelled")
        if wanted is not None and wanted not in columns:
            raise ModelError(f"variable query {query!r} answered columns {columns}: no {wanted!r}")
        picked = [i for i, c in enumerate(columns) if (c == wanted if wanted else c != "time")]
        for i in picked:
            for row in one.get("values") or []:
                texts.append(_option_text(row[i], query))
    return texts


def _option_text(value, query: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise ModelError(f"variable query {query!r} answered {value!r}: such an option is not modelled")
    if isinstance(value, (int, float)):
        return js_number_to_string(value)  # numbers become their JavaScript text: 1.0 -> '1'
    raise ModelError(f"variable query {query!r} answered {value!r}: not modelled")


def _all_matches(rx: re.Pattern, text: str, is_global: bool) -> list[re.Match]:
    found, pos = [], 0
    while True:
        m = rx.search(text, pos)
        if not m:
            return found
        found.append(m)
        if not is_global or m.group(0) == "":
            return found
        pos = m.end()


def _natural_key(label: str):
    if not re.fullmatch(r"[A-Za-z0-9]*", label):
        raise ModelError(f"natural sort of {label!r}: Intl.Collator order is only modelled for letters and digits")
    return [(0, int(chunk), "") if chunk.isdigit() else (1, 0, chunk.lower())
            for chunk in re.findall(r"[0-9]+|[A-Za-z]+", label)]


def _numeric_key(label: str) -> float:
    if not label:
        return -1
    m = re.search(r"[0-9]+", label)
    return float(int(m.group(0))) if m else -1


def sort_options(options: list[tuple[str, str]], sort: int) -> list[tuple[str, str]]:
    """scenes sortVariableValues: 0 none, 1/2 alphabetical, 3/4 numerical (first digits of the text),
    5/6 alphabetical case-insensitive, 7/8 natural; the descending ones reverse the ascending."""
    if not sort:
        return list(options)
    keys = {1: lambda o: _js_string_key(o[0]), 2: lambda o: _js_string_key(o[0]),
            3: lambda o: _numeric_key(o[0]), 4: lambda o: _numeric_key(o[0]),
            5: lambda o: _js_string_key(o[0].lower()), 6: lambda o: _js_string_key(o[0].lower()),
            7: lambda o: _natural_key(o[0]), 8: lambda o: _natural_key(o[0])}
    if sort not in keys:
        raise ModelError(f"variable sort {sort!r} is not one of Grafana's 0-8")
    ordered = sorted(options, key=keys[sort])
    if sort % 2 == 0:
        ordered.reverse()
    return ordered


def options_from_texts(texts: list[str], regex: str | None, sort: int) -> list[tuple[str, str]]:
    """scenes metricNamesToVariableValues: the regex (a capture group, or named groups text and
    value), duplicates of a value dropped, then the sort."""
    rx, is_global = _js_regex(regex) if regex else (None, False)
    options: list[tuple[str, str]] = []
    for item in texts:
        text = value = item
        if rx is not None:
            matches = _all_matches(rx, item, is_global)
            if not matches:
                continue
            value_group = next((m for m in matches if m.groupdict().get("value")), None)
            text_group = next((m for m in matches if m.groupdict().get("text")), None)
            first = next((m for m in matches if rx.groups >= 1), None)
            if value_group or text_group:
                value = value_group.group("value") if value_group else text_group.group("text")
                text = text_group.group("text") if text_group else value_group.group("value")
            elif len(matches) > 1 and first:
                for m in matches:
                    if m.group(1) is None:
                        raise ModelError(f"regex {regex!r} on {item!r}: an unmatched group is not modelled")
                    options.append((m.group(1), m.group(1)))
                continue
            elif first:
                if first.group(1) is None:
                    raise ModelError(f"regex {regex!r} on {item!r}: an unmatched group is not modelled")
                text = value = first.group(1)
        options.append((text, value))
    unique, seen = [], set()
    for option in options:
        if option[1] not in seen:
            seen.add(option[1])
            unique.append(option)
    return sort_options(unique, sort)


def custom_options(text: str) -> list[tuple[str, str]]:
    """A custom variable's values: comma-separated (\\, escapes a comma), 'text : value' pairs."""
    options = []
    for part in re.findall(r"(?:\\,|[^,])+", text):
        part = part.replace("\\,", ",")
        m = re.match(r"^\s*(.+)\s:\s(.+)$", part)
        if m:
            options.append((m.group(1).strip(), m.group(2).strip()))
        else:
            options.append((part.strip(), part.strip()))
    return options


# ------------------------------------------------------------------ formats (scenes formatRegistry)

def _percent_encode(text: str) -> str:
    """encodeURIComponent, and ! ' ( ) * too."""
    return urllib.parse.quote(text, safe="")


def apply_format(fmt: str, value: Union[str, List[str]], text: str, name: str = "") -> str:
    """${name:format} for a value (str) or values (list); `text` is what ${name:text} gives."""
    fid, *args = fmt.split(":")
    many = isinstance(value, list)
    values = value if many else [value]
    if fid == "raw":
        return ",".join(values)
    if fid == "regex":
        if not many:
            return escape_regex(value)
        escaped = [escape_regex(v) for v in values]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    if fid == "pipe":
        return "|".join(values)
    if fid == "csv":
        return ",".join(values)
    if fid == "distributed":
        return ",".join(values[:1] + [f"{name}={v}" for v in values[1:]])
    if fid == "json":
        return value if not many else json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    if fid == "percentencode":
        return _percent_encode("{" + ",".join(values) + "}" if many else value)
    if fid == "singlequote":
        return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
    if fid == "doublequote":
        return ",".join('"' + v.replace('"', '\\"') + '"' for v in values)
    if fid == "sqlstring":
        return ",".join("'" + v.replace("'", "''").replace('"', '\\"') + "'" for v in values)
    if fid == "join":
        return (args[0] if args else ",").join(values) if many else value
    if fid == "glob":
        return "{" + ",".join(values) + "}" if many and len(values) > 1 else ",".join(values)
    if fid == "text":
        return text
    if fid == "date":
        raise ModelError(f"format {fmt!r} is modelled for $__from and $__to only")
    if fid in _UNMODELLED_FORMATS:
        raise ModelError(f"format {fid!r} is not modelled")
    raise ModelError(f"unknown variable format {fid!r}: Grafana logs an error and falls back to glob")


# ------------------------------------------------------------------ math expressions (server side)

_EXPR_TOKEN = re.compile(r"\s*(?:([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
                         r"|\$\{(\w+)\}|\$(\w+)|(\*\*|[-+*/%()]))", re.ASCII)


@dataclass
class _Item:
    labels: Tuple[Tuple[str, str], ...]
    points: Dict[int, Optional[float]]


def binary_op(op: str, a: float, b: float) -> float:
    """One operator of Grafana's math expressions on two numbers, as its
    server-side expressions compute them (Go's float64: NaN spreads, x/0 is
    an infinity, 0/0 NaN); comparisons and logic give 1 or 0. The alert
    model (alerts12.py) evaluates its math with it too."""
    if op == "||" and a != 0:
        return 1.0
    if op == "&&" and a == 0:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    if op == "%":
        return math.nan if b == 0 or math.isinf(a) else math.fmod(a, b)
    compare = {"==": a == b, "!=": a != b, ">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b,
               "||": a != 0 or b != 0, "&&": a != 0 and b != 0}
    if op in compare:
        return float(compare[op])
    raise ModelError(f"operator {op!r} is not modelled")


def _binary(op: str, a, b):
    """A math expression's operator on two points: a missing one (null) gives null."""
    if a is None or b is None:
        return None
    return binary_op(op, float(a), float(b))


def _combine(op: str, left, right, expression: str):
    """Grafana's math on two operands: numbers, or sets of series joined by labels (equal or
    one a subset of the other, union of labels) and, per pair, on the times both hold."""
    if not isinstance(left, list) and not isinstance(right, list):
        return _binary(op, left, right)
    if not isinstance(left, list):
        return [_Item(it.labels, {t: _binary(op, left, v) for t, v in it.points.items()}) for it in right]
    if not isinstance(right, list):
        return [_Item(it.labels, {t: _binary(op, v, right) for t, v in it.points.items()}) for it in left]
    if not left or not right:
        return []
    pairs = [(a, b) for a in left for b in right
             if set(a.labels) <= set(b.labels) or set(b.labels) <= set(a.labels)]
    if len(left) > 1 and len(right) > 1:
        for side in (0, 1):
            ids = [id(p[side]) for p in pairs]
            if len(ids) != len(set(ids)):
                raise ModelError(f"{expression!r}: a series matches several on the other side by labels; "
                                 "how Grafana joins them is not modelled")
    out = []
    for a, b in pairs:
        labels = tuple(sorted(dict(a.labels + b.labels).items()))
        out.append(_Item(labels, {t: _binary(op, v, b.points[t]) for t, v in a.points.items() if t in b.points}))
    return out


class _MathParser:
    def __init__(self, expression: str, operands: Dict[str, list]):
        self.expression, self.operands = expression, operands
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = expression.rstrip()
        while pos < len(text):
            m = _EXPR_TOKEN.match(text, pos)
            if not m:
                raise ModelError(f"math expression {expression!r}: {text[pos:]!r} is not modelled")
            number, braced, plain, op = m.groups()
            if number:
                self.tokens.append(("num", number))
            elif braced or plain:
                self.tokens.append(("ref", braced or plain))
            else:
                if op == "**":
                    raise ModelError(f"math expression {expression!r}: ** is not modelled")
                self.tokens.append(("op", op))
            pos = m.end()
        self.i = 0

    def parse(self):
        value = self._sum()
        if self.i != len(self.tokens):
            raise ModelError(f"math expression {self.expression!r}: unexpected {self.tokens[self.i][1]!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) and self.tokens[self.i][0] == "op" else None

    def _sum(self):
        value = self._product()
        while self._peek() in ("+", "-"):
            op = self.tokens[self.i][1]
            self.i += 1
            value = _combine(op, value, self._product(), self.expression)
        return value

    def _product(self):
        value = self._unary()
        while self._peek() in ("*", "/", "%"):
            op = self.tokens[self.i][1]
            self.i += 1
            value = _combine(op, value, self._unary(), self.expression)
        return value

    def _unary(self):
        if self._peek() == "-":
            self.i += 1
            return _combine("*", -1.0, self._unary(), self.expression)
        return self._primary()

    def _primary(self):
        if self.i >= len(self.tokens):
            raise ModelError(f"math expression {self.expression!r} ends early")
        kind, text = self.tokens[self.i]
        self.i += 1
        if kind == "num":
            return float(text)
        if kind == "ref":
            if text not in self.operands:
                raise ModelError(f"math expression {self.expression!r}: ${text} is no query of the panel")
            return self.operands[text]
        if text == "(":
            value = self._sum()
            if self._peek() != ")":
                raise ModelError(f"math expression {self.expression!r}: ')' missing")
            self.i += 1
            return value
        raise ModelError(f"math expression {self.expression!r}: unexpected {text!r}")


def _items_of(ref_id: str, series: list[dict]) -> list[_Item]:
    items = []
    for one in series:
        columns = one.get("columns") or []
        if "time" not in columns:
            raise ModelError(f"${ref_id} has no time column: math on it is not modelled")
        t = columns.index("time")
        labels = tuple(sorted((one.get("tags") or {}).items()))
        for c, name in enumerate(columns):
            if c != t:
                items.append(_Item(labels, {row[t]: row[c] for row in one.get("values") or []}))
    if len({it.labels for it in items}) != len(items):
        raise ModelError(f"${ref_id} gives several series with the same labels: math on it is not modelled")
    return items


def _series_of(ref_id: str, value) -> list[dict]:
    if not isinstance(value, list):
        raise ModelError(f"expression {ref_id} gives a number: not modelled")
    return [{"name": ref_id, "tags": dict(it.labels), "columns": ["time", ref_id],
             "values": [[t, v] for t, v in sorted(it.points.items())]} for it in value]


# ------------------------------------------------------------------ series names (alias patterns)

def series_names(target: dict, series: list[dict]) -> list[str]:
    """The names Grafana gives a target's series, from its alias: $tag_x, $col, $m, $measurement
    ([[...]] alike), one name per value column of each series."""
    alias = target.get("alias")
    if not alias:
        raise ModelError(f"target {target.get('refId')}: series names without an alias are not modelled")
    names = []
    for one in series:
        tags = one.get("tags") or {}
        for column in (c for c in one.get("columns") or [] if c != "time"):
            def pattern(m: re.Match) -> str:
                key = m.group(1) or m.group(2)
                if key in ("m", "measurement"):
                    return one.get("name", "")
                if key == "col":
                    return column
                if key.startswith("tag_"):
                    if key[4:] not in tags:
                        raise ModelError(f"alias {alias!r}: the series has no tag {key[4:]!r} ({tags})")
                    return tags[key[4:]]
                raise ModelError(f"alias {alias!r}: {m.group(0)} is not modelled")
            names.append(re.sub(r"\$(\w+)|\[\[([\s\S]+?)\]\]", pattern, alias))
    return names


# ------------------------------------------------------------------ the dashboard

def iter_panels(board: dict) -> Iterator[dict]:
    """Every panel, those in collapsed rows too."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def _provisioned_datasource(folder: Path = PROVISIONED_DATASOURCES,
                            kind: str = "influxdb") -> Tuple[Optional[str], Optional[str]]:
    """(uid, timeInterval) of the datasource of this type provisioned in folder (by
    default grafana/provisioning's InfluxDB one), when there."""
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
        text = path.read_text()
        if re.search(rf"^\s*type:\s*{kind}\s*$", text, re.M):
            uid = re.search(r"^\s*uid:\s*(\S+)\s*$", text, re.M)
            interval = re.search(r"^\s*timeInterval:\s*(\S+)\s*$", text, re.M)
            return (uid.group(1) if uid else None), (interval.group(1) if interval else None)
    return None, None


def checked_targets(panel: dict):
    """(title, refId, target) of each target of a panel, once the panel uses
    nothing the models leave out and each refId is given once (both datasources'
    models start from this)."""
    title = panel.get("title", panel.get("id"))
    for key in ("repeat", "libraryPanel", "timeFrom", "timeShift"):
        if panel.get(key):
            raise ModelError(f"panel {title!r}: {key} is not modelled")
    ref_ids = set()
    for target in panel.get("targets", []):
        ref_id = target.get("refId")
        if not ref_id or ref_id in ref_ids:
            raise ModelError(f"panel {title!r}: refId {ref_id!r} missing or repeated")
        ref_ids.add(ref_id)
        yield title, ref_id, target


class Dashboard12:
    """A dashboard opened as Grafana 12 opens it: variables resolved in list order (refresh 1 and
    2 both run on load), url_vars playing ?var-name=..., then each query interpolated and sent as
    Grafana's backend sends it."""

    # Grafana 12 writes a variable query's first $timeFilter as now() - 6h for a relative range.
    VARIABLE_TIME_FILTER_RELATIVE = True

    def __init__(self, board: dict, send: Send, time_from_ms: int, time_to_ms: int, *,
                 url_vars: dict[str, Union[str, List[str]]] | None = None, relative_from: str | None = None,
                 relative_to: str = "now", timezone: str = "UTC", viewport_px: int = 1920,
                 time_interval: str | None = None, datasource_uid: str | None = None):
        if time_to_ms <= time_from_ms:
            raise ModelError(f"time range {time_from_ms}..{time_to_ms}: the end must follow the start")
        self.board = board
        self.time_from_ms, self.time_to_ms = int(time_from_ms), int(time_to_ms)
        self.url_vars = dict(url_vars or {})
        self.relative_from, self.relative_to = relative_from, relative_to
        self.timezone = timezone          # the viewer's (browser's) zone: ${__from:date:...} uses it
        _zone(timezone)
        self.viewport_px = viewport_px
        provisioned_uid, provisioned_interval = _provisioned_datasource()
        self.time_interval = time_interval or provisioned_interval or "5s"
        self.datasource_uid = datasource_uid or provisioned_uid
        self.sent: list[tuple[str, Optional[str]]] = []
        self._send = send
        self.variables: dict[str, Variable] = {}
        specs = board.get("templating", {}).get("list", [])
        names = [spec.get("name") for spec in specs]
        duplicated = {n for n in names if names.count(n) > 1}
        if duplicated:
            raise ModelError(f"variables defined twice: {sorted(duplicated)}")
        unknown = set(self.url_vars) - set(names)
        if unknown:
            raise ModelError(f"url_vars {sorted(unknown)}: the dashboard has no such variable")
        self._pending = set(names)
        for spec in specs:
            self.variables[spec["name"]] = self._resolve(spec)
            self._pending.discard(spec["name"])

    # ---------------------------------------------------------------- sending

    def send(self, query: str, rp: str | None = None) -> list[dict]:
        self.sent.append((query, rp))
        return self._send(query, rp)

    def _check_datasource(self, ds, what: str) -> None:
        if not isinstance(ds, dict):
            raise ModelError(f"{what}: datasource {ds!r}: only an explicit {{type, uid}} InfluxDB reference "
                             "is modelled")
        if ds.get("type") != "influxdb" or (self.datasource_uid and ds.get("uid") != self.datasource_uid):
            raise ModelError(f"{what}: datasource {ds!r} is not the provisioned InfluxDB "
                             f"({self.datasource_uid})")

    # ---------------------------------------------------------------- variables

    def _resolve(self, spec: dict) -> Variable:
        kind = spec.get("type")
        name = spec["name"]
        if kind == "interval":
            return self._interval_variable(spec)
        var = Variable(spec)
        if kind == "query":
            var.options = self._query_options(var, spec)
        elif kind == "custom":
            if spec.get("valuesFormat", "csv") != "csv":
                raise ModelError(f"${name}: custom values as {spec.get('valuesFormat')} are not modelled")
            var.options = custom_options(self._frontend(spec.get("query") or "", "variable", None, "glob"))
        elif kind == "constant":
            var.options = [(spec.get("query", ""), spec.get("query", ""))]
        elif kind == "textbox":
            var.options = []
        else:
            raise ModelError(f"${name}: variables of type {kind!r} are not modelled (ad hoc filters would be "
                             "inserted into every raw query)")
        if kind == "constant":
            var._value = var._text = spec.get("query", "")
        elif kind == "textbox":
            url = self.url_vars.get(name)
            value = url if url is not None else (spec.get("current") or {}).get("value", spec.get("query", ""))
            var._value = var._text = value[0] if isinstance(value, list) and value else value
        else:
            self._select(var, spec, skip_when_empty=(kind == "custom"))
        return var

    def _query_options(self, var: Variable, spec: dict) -> list[tuple[str, str]]:
        self._check_datasource(spec.get("datasource"), f"variable ${var.name}")
        if spec.get("refresh", 1) == 0:
            return [(str(o.get("text")), str(o.get("value"))) for o in spec.get("options") or []
                    if o.get("value") != ALL]
        query = spec.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if not query:
            return []
        sent = self.interpolate(query, where="variable")
        check_single_statement(sent)
        var.request = sent
        texts = self._option_texts(sent, self.send(sent, None))
        regex = spec.get("regex")
        if regex:
            regex = self._frontend(regex, "variable", None, "regex")
        return options_from_texts(texts, regex, int(spec.get("sort") or 0))

    def _option_texts(self, query: str, series: list[dict]) -> list[str]:
        """The options text of a variable query's answer (a seam: Grafana 13's plugin reads it its own way)."""
        return _metric_find_values(query, series)

    def _url_value(self, var: Variable):
        url = self.url_vars[var.name]
        if var.multi:
            # scenes passes every ?var-x= of a multi-value variable as a list
            value = list(url) if isinstance(url, list) else [url]
        else:
            if isinstance(url, list):
                if not url:
                    raise ModelError(f"url_vars[{var.name!r}] is empty")
                url = url[0]  # a single-value variable reads the first
            value = url
        if var.include_all:  # an old 'All' in the URL
            if isinstance(value, list) and value and value[0] == ALL_TEXT:
                value = [ALL]
            elif value == ALL_TEXT:
                value = ALL
        if var.all_value and value == var.all_value:
            value = ALL
        if isinstance(value, list):
            if value and value[-1] == ALL:
                value = [ALL]
            elif value and value[0] == ALL and len(value) > 1:
                value = value[1:]
        if (value == ALL or (isinstance(value, list) and ALL in value)) and not var.include_all:
            raise ModelError(f"url_vars[{var.name!r}]: All on a variable without an All option is not modelled")

        def label(v: str) -> str:
            if v == ALL:
                return ALL_TEXT
            by_value = next((t for t, val in var.options if val == v), None)
            by_text = next((t for t, _ in var.options if t == v), None)
            return by_value if by_value is not None else by_text if by_text is not None else v

        text = [label(v) for v in value] if isinstance(value, list) else label(value)
        return value, text

    def _select(self, var: Variable, spec: dict, skip_when_empty: bool = False) -> None:
        """The selection after load (scenes MultiValueVariable validateAndUpdate): the URL's value,
        else the saved current one if still an option, else All with includeAll (Grafana sets
        defaultToAll from includeAll), else the first option. A value from the URL survives that
        first check even when no option holds it."""
        current = spec.get("current") or {}
        value = current.get("value", "")
        text = current.get("text", "")
        value = "" if value is None else value
        text = "" if text is None else text
        skip = False
        if var.name in self.url_vars:
            url_value, url_text = self._url_value(var)
            if url_value != value:  # scenes skips a URL value equal to the current one
                value, text, skip = url_value, url_text, True
        if skip_when_empty and not var.options:
            skip = True
        new_value, new_text, value_changed, text_changed = self._validate(var, value, text)
        all_fix = new_value == ALL and text == ALL_TEXT
        if skip and value_changed and text_changed and not all_fix:
            new_value, new_text = value, text
            kept = value if isinstance(value, list) else [value]
            var.kept_from_url = not all(v == ALL or v in var.options_values() for v in kept)
        var._value, var._text = new_value, new_text

    def _validate(self, var: Variable, value, text):
        """(value, text, value replaced, text replaced), replaced as JavaScript's !== sees it."""
        options = var.options
        default_to_all = var.include_all
        is_all = value == ALL or (isinstance(value, list) and bool(value) and value[0] == ALL)
        if not options:
            if default_to_all:
                return ALL, ALL_TEXT, not _js_same(ALL, value), not _js_same(ALL_TEXT, text)
            if var.multi:
                return [], [], True, True
            return "", "", not _js_same("", value), not _js_same("", text)
        first_text, first_value = options[0]
        if is_all:
            if var.include_all:
                return value, ALL_TEXT, False, not _js_same(ALL_TEXT, text)
            if var.multi:
                return [first_value], [first_text], True, True
            return first_value, first_text, not _js_same(first_value, value), not _js_same(first_text, text)
        values = [v for _, v in options]
        if var.multi:
            currents = value if isinstance(value, list) else [value]
            valid = [v for v in currents if v in values]
            if not valid:
                if default_to_all:
                    return [ALL], [ALL_TEXT], True, True
                return [first_value], [first_text], True, True
            texts = [next(t for t, v in options if v == one) for one in valid]
            new_value, value_changed = (value, False) if valid == value else (valid, True)
            new_text, text_changed = (text, False) if texts == text else (texts, True)
            return new_value, new_text, value_changed, text_changed
        match = next(((t, v) for t, v in options if _js_same(v, value)), None)
        if match is None:
            text_matches = [(t, v) for t, v in options if _js_same(t, text)]
            match = text_matches[-1] if text_matches else None
        if match is None:
            if default_to_all:
                match = (ALL_TEXT, ALL)
            else:
                match = (first_text, first_value)
        return match[1], match[0], not _js_same(match[1], value), not _js_same(match[0], text)

    def _interval_variable(self, spec: dict) -> IntervalVariable:
        name = spec["name"]
        intervals = [part.strip() for part in (spec.get("query") or "").split(",") if part.strip()]
        auto = bool(spec.get("auto"))
        auto_text = None
        if auto:
            auto_text, _ = calculate_interval(self.time_to_ms - self.time_from_ms,
                                              int(spec.get("auto_count") or 30), spec.get("auto_min") or "10s")
        var = IntervalVariable(spec, auto_text)
        var.options = ([("auto", AUTO)] if auto else []) + [(i, i) for i in intervals]
        url = self.url_vars.get(name)
        if url is not None:
            url = url[0] if isinstance(url, list) else url
            value = AUTO if url.startswith("$__auto") else url  # a URL value is kept as given
            var.kept_from_url = value != AUTO and value not in intervals
        else:
            saved = (spec.get("current") or {}).get("value", "")
            saved = saved[0] if isinstance(saved, list) and saved else saved
            if isinstance(saved, str) and saved.startswith("$__auto"):
                value = AUTO
            elif saved in intervals:
                value = saved
            elif not saved and intervals:
                value = intervals[0]
            else:
                raise ModelError(f"${name}: saved interval {saved!r} is not among {intervals}: "
                                 "what Grafana 12 picks is not modelled")
        if value == AUTO and not auto:
            raise ModelError(f"${name}: auto selected but the variable has no auto option")
        var._value = var._text = value
        return var

    # ---------------------------------------------------------------- intervals

    def panel_width_px(self, panel: dict | None) -> float | None:
        if not panel or "gridPos" not in panel:
            return None
        return math.floor(panel["gridPos"]["w"] * self.viewport_px / 24)

    def interval(self, panel: dict | None) -> Tuple[str, int]:
        """($__interval, $__interval_ms) of a panel: max(round(range / resolution), min), resolution
        its maxDataPoints else its width in pixels (gridPos.w / 24 of the viewport; 500 unknown),
        min its "interval" else the datasource's timeInterval."""
        low = (panel or {}).get("interval") or self.time_interval
        if "$" in low or "[[" in low:
            raise ModelError(f"panel min interval {low!r} holds a variable: not modelled")
        resolution = (panel or {}).get("maxDataPoints") or self.panel_width_px(panel) or 500
        return calculate_interval(self.time_to_ms - self.time_from_ms, resolution, low)

    # ---------------------------------------------------------------- interpolation

    def interpolate(self, text: str, *, panel: dict | None = None, where: str = "panel") -> str:
        """The text Grafana 12 sends to InfluxDB for `text`, in a panel target, a variable's query
        or an annotation: the browser's variable interpolation, then the backend's macros."""
        if where not in ("panel", "variable", "annotation"):
            raise ValueError(f"where={where!r}: one of panel, variable, annotation")
        return self._backend(self._frontend(text, where, panel, None), where, panel)

    def _frontend(self, template: str, where: str, panel: dict | None, default_format: str | None) -> str:
        def replace(m: re.Match) -> str:
            name = m.group(1) or m.group(2) or m.group(4)
            fmt = m.group(3) or m.group(6)
            form = "$" if m.group(1) else "[[" if m.group(2) else "${"
            if m.group(5):
                raise ModelError(f"{m.group(0)}: field paths of variables are not modelled")
            fmt = fmt or default_format
            if where == "panel" and name in ("__interval", "__interval_ms"):
                text, ms = self.interval(panel)  # the panel's scoped variables
                value = text if name == "__interval" else str(ms)
                return apply_format(fmt, value, value) if fmt else value
            if name in self._pending:
                raise ModelError(f"{m.group(0)} is used before Grafana resolves ${name}: the model resolves "
                                 "variables in list order; move it above its users")
            if name in self.variables:
                if where == "alias":
                    raise ModelError(f"alias uses {m.group(0)}: variables in aliases are not modelled")
                return self._format_variable(self.variables[name], fmt, form, m.start(), template, where)
            if name in ("__from", "__to"):
                return self._format_time(name, fmt)
            if name in ("__interval", "__interval_ms"):
                raise ModelError(f"{m.group(0)} in a {where} query: the interval Grafana uses there is "
                                 "not modelled")
            if name in _NOT_INFLUX_MACROS:
                raise ModelError(f"{m.group(0)} is not supported by the InfluxDB datasource: Grafana leaves "
                                 "it in the query as is")
            if name == "timeFilter" or (name == "interval" and where != "alias"):
                if form != "$" or fmt:
                    raise ModelError(f"{m.group(0)}: Grafana's backend replaces only the plain ${name} form")
                return m.group(0)
            if where == "alias" and _ALIAS_PATTERN.fullmatch(name):
                return m.group(0)
            raise ModelError(f"{m.group(0)} is neither a variable of the dashboard nor a macro of the InfluxDB "
                             "datasource (alias patterns such as $tag_x and $col are legal in aliases only)")

        return _VARIABLE.sub(replace, template)

    def _format_time(self, name: str, fmt: str | None) -> str:
        ms = self.time_from_ms if name == "__from" else self.time_to_ms
        if not fmt:
            return str(ms)
        fid, *args = fmt.split(":")
        if fid == "date":
            if len(args) > 1:
                return moment_format(ms, ":".join(args), self.timezone)
            arg = args[0] if args else "iso"
            if arg == "ms":
                return str(ms)
            if arg == "seconds":
                return str(math.floor(ms / 1000 + 0.5))
            if arg == "iso":
                return iso_utc(ms)
            return moment_format(ms, arg, self.timezone)
        if fid == "text":
            zone = self.board.get("timezone") or "browser"
            zone = self.timezone if zone == "browser" else "UTC" if zone.lower() == "utc" else zone
            return moment_format(ms, "YYYY-MM-DD HH:mm:ss", zone)
        return apply_format(fmt, str(ms), str(ms))

    def _format_variable(self, var: Variable, fmt: str | None, form: str, pos: int, template: str,
                         where: str) -> str:
        value = var.query_value()
        if isinstance(value, _CustomAll):
            if fmt == "text":
                return ALL_TEXT
            if fmt == "percentencode":
                return _percent_encode(value.text)
            if fmt in ("queryparam", "customqueryparam"):
                raise ModelError(f"format {fmt!r} is not modelled")
            if _VARIABLE.search(value.text):
                raise ModelError(f"${var.name}: its custom all value {value.text!r} holds a variable, which "
                                 "Grafana interpolates again: not modelled")
            return value.text  # a custom all value goes in unescaped, whatever the format
        if fmt:
            return apply_format(fmt, value, var.text, var.name)
        return self._influx_format(var, value, form, pos, template, where)

    def _influx_format(self, var: Variable, value: Union[str, List[str]], form: str, pos: int, template: str,
                       where: str) -> str:
        """The InfluxDB datasource's own formatting in Grafana 12.4 (docs/grafana.md)."""
        if isinstance(value, list):
            return "(" + "|".join(escape_regex(v) for v in value) + ")"
        if starts_with_number(value):
            return value
        if where == "variable":
            return value  # a variable's query: a single value is never escaped
        escaped = escape_regex(value)
        if escaped == value:
            return value
        outcomes = {escaped if decision else value for decision in self._escape_decisions(var, form, pos, template)}
        if len(outcomes) == 1:
            return outcomes.pop()
        raise ModelError(
            f"${var.name} = {value!r} at {pos} of {template!r}: whether Grafana regex-escapes it here is not "
            "certain (it depends on where the value stands relative to slashes, or on the variable being "
            "multi-value/include-All); give it an explicit format (${" + var.name + ":regex} or :raw)")

    def _escape_decisions(self, var: Variable, form: str, pos: int, template: str) -> set:
        """Every decision (escape or not) a plausible reading of the single-value rule gives."""
        decisions: set = set()

        def compiles(pattern: str) -> set:
            result = js_regex_compiles(pattern)
            return {True, False} if result is None else {result}

        try:
            spans, _ = _scan_influxql(template)
        except ModelError:
            spans = None
        # Reading 1: this $name stands in a regex literal of the query, and that literal compiles.
        if form != "$":
            decisions.add(False)
        elif spans is None:
            decisions |= {True, False}
        else:
            span = next(((a, b) for a, b in spans if a <= pos < b), None)
            decisions |= compiles(template[span[0]:span[1]]) if span else {False}
        # Reading 2 (Grafana 11.5.3+, grafana/grafana#100762): the query's regex literals are found
        # first; the variable is escaped wherever it stands when one of them holds $name (the
        # notes: that form only) and compiles.
        if spans is None:
            decisions |= {True, False}
        else:
            plain = re.compile(r"\$" + re.escape(var.name) + r"(?!\w)")
            holding = [template[a:b] for a, b in spans if plain.search(template[a:b])]
            if not holding:
                decisions.add(False)
            elif all(js_regex_compiles(body) for body in holding):
                decisions.add(True)
            else:  # whether a regex that does not compile is skipped is not known
                decisions |= {True, False}
        # Reading 3 (the notes, and Grafana before 11.5.3): the query holds $name between two slashes
        # and the text between its first pair of slashes compiles.
        if re.search(r"/[^/]*\$" + re.escape(var.name) + r"(?!\w)[^/]*/", template):
            first = template.index("/")
            second = template.index("/", first + 1)
            decisions |= compiles(template[first + 1:second])
        else:
            decisions.add(False)
        # The older rule: any value of a multi-value or include-All variable was escaped.
        if var.multi or var.include_all:
            decisions.add(True)
        return decisions

    def _backend(self, text: str, where: str, panel: dict | None) -> str:
        """Grafana's InfluxQL backend: $timeFilter, then the interval macros, replaced as text."""
        relative = self.VARIABLE_TIME_FILTER_RELATIVE and self.relative_from
        if where == "variable" and relative and "$timeFilter" in text:
            text = text.replace("$timeFilter", self._relative_time_filter(), 1)
        text = text.replace("$timeFilter", f"time >= {self.time_from_ms}ms and time <= {self.time_to_ms}ms")
        for macro in ("$__interval_ms", "$__interval", "$interval"):
            if macro in text:
                if where != "panel":
                    raise ModelError(f"{macro} in a {where} query: the interval Grafana's backend uses there is "
                                     "not modelled")
                interval_text, ms = self.interval(panel)
                text = text.replace(macro, str(ms) if macro.endswith("_ms") else interval_text)
        return text

    def _relative_time_filter(self) -> str:
        """The InfluxDB datasource's own time filter for a variable's query: now() - 6h for now-6h."""
        def side(raw: str, ms: int) -> str:
            if raw == "now":
                return "now()"
            m = re.fullmatch(r"now-([0-9]+)([dhms])", raw)
            return f"now() - {m.group(1)}{m.group(2)}" if m else f"{ms}ms"
        return (f"time >= {side(self.relative_from, self.time_from_ms)} and "
                f"time <= {side(self.relative_to, self.time_to_ms)}")

    # ---------------------------------------------------------------- panels

    def panels(self) -> Iterator[dict]:
        return iter_panels(self.board)

    def _target_datasource(self, panel: dict, target: dict):
        return target.get("datasource") or panel.get("datasource")

    def _is_expression(self, panel: dict, target: dict) -> bool:
        ds = self._target_datasource(panel, target)
        return isinstance(ds, dict) and ds.get("uid") == "__expr__"

    def panel_requests(self, panel: dict) -> list[Request]:
        """Each InfluxDB target of the panel as Grafana 12 sends it (hidden ones too, marked)."""
        requests = []
        for title, ref_id, target in checked_targets(panel):
            if self._is_expression(panel, target):
                continue
            what = f"panel {title!r} target {ref_id}"
            self._check_datasource(self._target_datasource(panel, target), what)
            if not target.get("rawQuery"):
                raise ModelError(f"{what}: builder-mode queries are not modelled")
            if target.get("tags"):
                raise ModelError(f"{what}: stale builder tags {target['tags']} would be inserted after the "
                                 "first WHERE of the raw query")
            if not target.get("query"):
                raise ModelError(f"{what}: empty query")
            query = self.interpolate(target["query"], panel=panel, where="panel")
            check_single_statement(query)
            alias = target.get("alias")
            if alias:
                self._frontend(alias, "alias", panel, "glob")
            policy = target.get("policy")
            if policy and ("$" in policy or "[[" in policy):
                raise ModelError(f"{what}: a retention policy holding a variable is not modelled")
            rp = policy if policy and policy != "default" else None
            requests.append(Request(ref_id, query, rp, bool(target.get("hide")), alias,
                                    target.get("resultFormat")))
        return requests

    def run_panel(self, panel: dict) -> dict[str, list[dict]]:
        """refId -> InfluxDB series, as Grafana 12 gets them for the panel: hidden targets only feed
        expressions; math expressions computed series by series (joined on labels and time)."""
        requests = self.panel_requests(panel)
        expressions = [t for t in panel.get("targets", []) if self._is_expression(panel, t)]
        needed = set()
        for expression in expressions:
            if expression.get("type") != "math":
                raise ModelError(f"panel {panel.get('title')!r}: expression type {expression.get('type')!r} "
                                 "is not modelled (math only)")
            needed |= {a or b for a, b in re.findall(r"\$\{(\w+)\}|\$(\w+)", expression.get("expression", ""))}
        fetched: dict[str, list[dict]] = {}
        out: dict[str, list[dict]] = {}
        formats = {r.ref_id: r.result_format or "time_series" for r in requests}
        for request in requests:
            if request.hidden and request.ref_id not in needed:
                continue
            fetched[request.ref_id] = self.send(request.query, request.rp)
            if not request.hidden:
                out[request.ref_id] = fetched[request.ref_id]
        computed: dict[str, list] = {}
        for expression in expressions:
            operands = {}
            for ref_id in {a or b for a, b in re.findall(r"\$\{(\w+)\}|\$(\w+)", expression["expression"])}:
                if ref_id in computed:
                    operands[ref_id] = computed[ref_id]
                elif ref_id in fetched:
                    if formats[ref_id] != "time_series":
                        raise ModelError(f"math on ${ref_id} formatted as {formats[ref_id]}: not modelled")
                    operands[ref_id] = _items_of(ref_id, fetched[ref_id])
            value = _MathParser(expression["expression"], operands).parse()
            computed[expression["refId"]] = value
            if not expression.get("hide"):
                out[expression["refId"]] = _series_of(expression["refId"], value)
        return out

    def unmodelled_transformations(self, panel: dict) -> list[str]:
        """The panel's transformations: Grafana runs them in the browser, the model does not."""
        return [t.get("id", "?") for t in panel.get("transformations", [])]

    # ---------------------------------------------------------------- annotations

    def annotation_events(self, annotation: dict) -> list[dict]:
        """The annotation's events: {time, timeEnd, title, text, tags}, columns mapped by name
        (timeEnd None for a point)."""
        name = annotation.get("name")
        self._check_datasource(annotation.get("datasource"), f"annotation {name!r}")
        target = annotation.get("target") or {}
        if not target.get("query"):
            raise ModelError(f"annotation {name!r}: no raw query in its target")
        if target.get("rawQuery") is False:
            raise ModelError(f"annotation {name!r}: builder-mode annotations are not modelled")
        mapping = {}
        for key in ("titleColumn", "textColumn", "tagsColumn", "timeEndColumn"):
            values = {v for v in (target.get(key), annotation.get(key)) if v}
            if len(values) > 1:
                raise ModelError(f"annotation {name!r}: {key} differs between the annotation and its target")
            mapping[key] = values.pop() if values else None
        tag_columns = [c for c in (mapping["tagsColumn"] or "").replace(" ", "").split(",") if c]
        query = self.interpolate(target["query"], where="annotation")
        check_single_statement(query)
        events = []
        for one in self.send(query, None):
            columns = one.get("columns") or []
            wanted = [c for c in (mapping["titleColumn"], mapping["textColumn"], mapping["timeEndColumn"],
                                  *tag_columns) if c]
            missing = [c for c in ["time", *wanted] if c not in columns]
            if missing:
                raise ModelError(f"annotation {name!r}: columns {missing} not in the answer {columns}")
            index = {c: i for i, c in enumerate(columns)}
            for row in one.get("values") or []:
                def cell(column):
                    return row[index[column]] if column else None
                tags = []
                for column in tag_columns:
                    raw = cell(column)
                    if raw is None:
                        continue
                    raw = raw if isinstance(raw, str) else _option_text(raw, query)
                    tags += [t.strip() for t in raw.split(",") if t.strip()]
                end = cell(mapping["timeEndColumn"])
                text = cell(mapping["textColumn"])
                title = cell(mapping["titleColumn"])
                events.append({"time": row[index["time"]],
                               "timeEnd": None if end is None else int(end),
                               "title": title, "text": "" if text is None else text, "tags": tags})
        return events
