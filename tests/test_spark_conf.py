"""spark-conf/ is what users attach to spark-submit: both files agree, and
`sparkscope conf` prints flags for another endpoint."""

from __future__ import annotations

import shlex

import pytest

from sparkscope import cli
from sparkscope.spark.conf import SINK, ConfError, conf_flags, read_properties
from sparkscope.settings import ROOT

DEFAULTS = ROOT / "spark-conf" / "spark-defaults.conf"
METRICS = ROOT / "spark-conf" / "metrics.properties"


def test_metrics_properties_and_spark_defaults_configure_the_same_sink():
    metrics = read_properties(METRICS)
    defaults = read_properties(DEFAULTS)
    as_conf = {f"spark.metrics.conf.{k}": v for k, v in metrics.items()}
    assert as_conf == {k: v for k, v in defaults.items() if k.startswith("spark.metrics.conf.")}


def test_spark_defaults_enable_every_source_the_dashboards_need():
    defaults = read_properties(DEFAULTS)
    # Process-tree RSS comes from the annotator's plugin, fork-free: Spark's own (a pgrep per process per poll) is off.
    assert defaults["spark.executor.processTreeMetrics.enabled"] == "false"
    assert defaults["spark.metrics.executorMetricsSource.enabled"] == "true"
    assert defaults["spark.metrics.appStatusSource.enabled"] == "true"
    assert defaults[SINK + "class"] == "org.apache.spark.metrics.sink.GraphiteSink"
    assert defaults[SINK + "prefix"] == "spark"


def test_conf_command_points_the_sink_at_the_given_host(capsys):
    assert cli.main(["conf", "--host", "metrics.example.com", "--port", "12003", "--period", "10",
                     "--no-annotator"]) == 0
    words = shlex.split(capsys.readouterr().out.replace("\\\n", " "))
    pairs = dict(w.split("=", 1) for w in words if w != "--conf")
    assert pairs[SINK + "host"] == "metrics.example.com"
    assert pairs[SINK + "port"] == "12003"
    assert pairs[SINK + "period"] == "10"
    assert words.count("--conf") == len(read_properties(DEFAULTS))


def test_conf_command_warns_when_telegraf_listens_on_loopback_and_the_host_is_another_machine(
        capsys, monkeypatch):
    monkeypatch.setenv("GRAPHITE_BIND", "127.0.0.1")  # the default
    assert cli.main(["conf", "--host", "metrics.example.com", "--no-annotator"]) == 0
    err = capsys.readouterr().err
    assert "cannot reach metrics.example.com:2003" in err and "GRAPHITE_BIND=0.0.0.0" in err, err
    for bind, host in (("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "metrics.example.com")):
        monkeypatch.setenv("GRAPHITE_BIND", bind)
        assert cli.main(["conf", "--host", host, "--no-annotator"]) == 0
        assert "GRAPHITE_BIND" not in capsys.readouterr().err, (bind, host)


def test_unreadable_or_malformed_properties_are_reported(tmp_path):
    with pytest.raises(ConfError, match="cannot read"):
        conf_flags(tmp_path / "missing.conf")
    bad = tmp_path / "bad.conf"
    bad.write_text("spark.ok=1\n=novalue\n")
    with pytest.raises(ConfError, match="bad.conf:2"):
        read_properties(bad)


def test_conf_command_attaches_the_annotator_pointed_at_the_same_host(capsys, monkeypatch):
    monkeypatch.setenv("GRAPHITE_BIND", "127.0.0.1")  # the default: executors can only be on this host
    assert cli.main(["conf", "--host", "metrics.example.com"]) == 0
    words = shlex.split(capsys.readouterr().out.replace("\\\n", " "))
    pairs = dict(w.split("=", 1) for w in words if "=" in w)
    # The listener through its plugin, on Spark's status queue (no queue thread of its own).
    assert pairs["spark.plugins"].split(",")[0] == "dev.sparkscope.annotator.ListenerPlugin"
    assert "spark.extraListeners" not in pairs
    assert pairs["spark.sparkscope.influx.url"] == "http://metrics.example.com:8186"
    # This host's jar on the class path: no executor fetches it (a copy, a chmod, an rm of its folder).
    assert pairs["spark.driver.extraClassPath"] == pairs["spark.executor.extraClassPath"]
    assert pairs["spark.executor.extraClassPath"].endswith("/annotator/target/sparkscope-annotator.jar")
    assert "--jars" not in words and "spark.jars" not in pairs
    # Executors elsewhere (asked for, or a Telegraf listening beyond this host) get it shipped.
    for argv, bind in ((["--ship-jar"], "127.0.0.1"), ([], "0.0.0.0")):
        monkeypatch.setenv("GRAPHITE_BIND", bind)
        assert cli.main(["conf", "--host", "metrics.example.com", *argv]) == 0
        words = shlex.split(capsys.readouterr().out.replace("\\\n", " "))
        assert words[words.index("--jars") + 1].endswith("sparkscope-annotator.jar"), (argv, bind)
        assert not [w for w in words if "extraClassPath" in w], (argv, bind)


def test_the_sink_sends_only_what_telegraf_keeps_unless_the_stack_keeps_everything(capsys, monkeypatch):
    """The generated filter lets through each read name under its source and, for a
    counter, the name Spark registers it under (the reporter adds .count), and the
    sources sent whole; nothing of the others; a stack that keeps every metric
    (SPARKSCOPE_UNREAD_METRICS=pass) gets no filter."""
    import re
    from sparkscope.spark.conf import SINK_REGEX, sink_regex
    from sparkscope.store import schema
    found = re.compile(sink_regex()).search  # Spark: Pattern.find on <app>.<executor>.<source>.<name>
    for source, names in schema.SPARK_SOURCES.items():
        for name in names:
            registered = name.removesuffix(".count")
            assert found(f"app-1.1.{source}.{registered}") and found(f"app-1.1.{source}.{name}"), (source, name)
    for unread in ("jvm.heap.used", "CodeGenerator.compilationTime", "jvm.non-heap.max", "jvm.pools.G1-Eden-Space.used",
                   "HiveExternalCatalog.fileCacheHits", "appStatus.jobs.succeededJobs", "DAGScheduler.job.allJobs",
                   "BlockManager.memory.maxMem_MB", "jvm.heap.max.extra"):
        assert not found(f"app-1.1.{unread}"), unread
    assert found("app-1.1.executor.recordsRead")  # a whole source: Telegraf drops what it does not read
    with pytest.raises(ValueError, match="no source"):
        sink_regex(read=(*schema.SPARK_READ, "newGauge"))
    assert "\\" not in sink_regex()  # Java's properties files would eat a backslash
    assert len(sink_regex()) < 400  # Spark compiles it for every metric at every report
    assert read_properties(DEFAULTS)[SINK_REGEX] == sink_regex()  # generated, current
    for unread, present in (("drop", True), ("pass", False)):
        monkeypatch.setenv("SPARKSCOPE_UNREAD_METRICS", unread)
        assert cli.main(["conf", "--no-annotator"]) == 0
        assert (f"{SINK_REGEX}=" in capsys.readouterr().out) is present, unread


def test_each_run_gets_its_own_spark_home_whose_work_folder_is_not_the_packages(tmp_path):
    """Two runs started in the same second get the same app id, and a shared
    SPARK_HOME/work then fails the second one's executors: each run has its own."""
    from sparkscope.spark.submit import private_home, spark_home

    first, second = private_home(tmp_path / "job.log"), private_home(tmp_path / "job.log")
    assert first != second
    for home in (first, second):
        assert home.parent == tmp_path and home.name.startswith("job.spark-")
        assert (home / "work").is_dir() and not (home / "work").is_symlink()
        assert (home / "bin" / "spark-submit").resolve() == (spark_home() / "bin" / "spark-submit").resolve()
        assert (home / "jars").resolve() == (spark_home() / "jars").resolve()
