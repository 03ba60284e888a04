"""The Helm chart (charts/sparkscope/), without a cluster: it lints strictly,
refuses misspelled values, and renders, for several sets of values, objects
that every Kubernetes version the chart claims accepts (kubeconform with the
strict JSON schemas kubernetes-validate ships, 1.25 to the newest),
with secrets only in Secrets, nothing exposed outside the cluster, listeners
on every pod interface behind a NetworkPolicy, the dashboards byte for byte,
and Spark's settings pointed at the Telegraf Service. Then the parts that can
run here run for real: the setup Job's command against a fresh InfluxDB 1.8,
the rendered telegraf.conf in Telegraf, and the helm test pod's script
through both."""

from __future__ import annotations

import base64
import copy
import http.server
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from sparkscope import chart as chart_copies
from sparkscope import cli
from sparkscope.generate.steps import COMMAND
from sparkscope.provision.go import ensure_telegraf
from sparkscope_dev.helm import ensure_helm
from sparkscope_dev.kubeconform import LOCATION, ensure_kubeconform, ensure_schemas, kube_versions, \
    shipped_schemas
from sparkscope.process import quiet, start_group, stop_group, wait_until
from sparkscope.spark.conf import SINK, annotator_properties, as_flags, conf_flags
from sparkscope.store import influx, schema
from sparkscope.stack import rollups
from sparkscope.stack.influx_storage import influx_dirs
from sparkscope.provision.go import ensure_influxd
from sparkscope.settings import ROOT, load_settings

from sparkscope_testkit.sandbox import free_port, isolated_settings

CHART = ROOT / "charts" / "sparkscope"
RELEASE, NAMESPACE = "sparkscope", "spark-mon"
TELEGRAF_DNS = f"{RELEASE}-telegraf.{NAMESPACE}.svc.cluster.local"


def claimed_oldest_kubernetes() -> tuple[int, int]:
    """The oldest Kubernetes Chart.yaml's kubeVersion admits, as (major, minor)."""
    claim = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)\.0(-0)?", claim)
    assert match, f"kubeVersion {claim!r}: the tests read only '>=X.Y.0-0'"
    return int(match[1]), int(match[2])


# Kubernetes versions the objects are checked against: every minor the chart
# claims, up to the newest kubernetes-validate ships schemas for.
KUBE_VERSIONS = kube_versions(shipped_schemas()[1], claimed_oldest_kubernetes())
SECRET_KEYS = ("influxdb-admin-password", "influxdb-write-password", "influxdb-read-password",
               "events-password", "grafana-admin-password")
DEFAULT_PEERS = [{"namespaceSelector": {"matchLabels": {"sparkscope.dev/spark": "true"}},
                  "podSelector": {"matchExpressions": [{"key": "spark-role", "operator": "In",
                                                        "values": ["driver", "executor"]}]}}]
# The value sets every object is rendered and checked with.
MATRIX = {
    "defaults": {},
    "existing secret": {"secrets": {"existingSecret": "my-sparkscope-secrets"}},
    "telegraf replicas 3": {"telegraf": {"replicas": 3}},
    "network policy off": {"networkPolicy": {"enabled": False}},
    "telegraf as load balancer": {"telegraf": {"service": {"type": "LoadBalancer",
                                                           "loadBalancerSourceRanges": ["10.20.0.0/16"]}}},
    "no grafana, no annotator, no events auth": {"grafana": {"enabled": False}, "events": {"auth": False},
                                                 "spark": {"annotator": {"enabled": False}}},
    "remote metrics store": {"metricsStore": {"mode": "remote", "remote": {
        "writeURL": "https://mimir-gateway.mimir.svc/api/v1/push", "queryURL": "https://mimir-gateway.mimir.svc/prometheus",
        "authSecret": "mimir-auth", "caConfigMap": "mimir-ca", "tenant": "spark-team.a(1)"}}},
    "remote metrics store without auth": {"metricsStore": {"mode": "remote", "remote": {
        "writeURL": "http://prometheus.monitoring.svc:9090/api/v1/write", "queryURL": "",
        "authSecret": "", "caConfigMap": ""}}},
    "thanos metrics store": {"metricsStore": {"mode": "thanos"}},
    "thanos store, 5 ingesters, your storage class and readers, no grafana": {
        "metricsStore": {"mode": "thanos", "thanos": {"ingesters": 5, "replicationFactor": 3,
                                                      "persistence": {"size": "100Gi", "storageClass": "fast-ssd"}}},
        "grafana": {"enabled": False}, "influxdb": {"retention": "INF"},
        "networkPolicy": {"thanosQueryPeers": [{"namespaceSelector": {"matchLabels": {"team": "data"}}}]}},
    "thanos store with your bucket": {"metricsStore": {"mode": "thanos", "thanos": {"objstore": {
        "existingSecret": "thanos-bucket", "receiveRetention": "12h", "retention": {"raw": "14d", "oneHour": "0d"}}}}},
    "host probes": {"probes": {"enabled": True,
                               "threadprobe": {"image": {"repository": "registry.example/sparkscope-threadprobe"}},
                               "blockprobe": {"image": {"repository": "registry.example/sparkscope-blockprobe",
                                                        "tag": "b1"}}}},
}
PROBES = f"DaemonSet/{RELEASE}-probes"
THANOS_SECRET = f"{RELEASE}-thanos"


# --- helm --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    """helm, built once per cache (./sparkscope test builds it before pytest starts);
    its own config and cache dirs, so nothing of the user's helm is read or written."""
    binary = ensure_helm(load_settings().cache_dir, quiet)
    home = tmp_path_factory.mktemp("helm-home")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_CACHE_HOME": str(home / "cache"), "HELM_DATA_HOME": str(home / "data"),
           "KUBECONFIG": str(home / "no-cluster")}

    def run(*args: str, chart: Path = CHART) -> subprocess.CompletedProcess:
        return subprocess.run([str(binary), *args, str(chart)], env=env, capture_output=True, text=True,
                              timeout=120)
    return run


def template(helm, tmp_path: Path, values: dict | None = None, *extra: str, kube: str = KUBE_VERSIONS[-1],
             chart: Path = CHART, release: str = RELEASE, namespace: str = NAMESPACE) -> str:
    """`helm template`'s output, as `helm install` would send it to the API server."""
    values_file = tmp_path / f"values-{len(list(tmp_path.glob('values-*')))}.yaml"
    values_file.write_text(yaml.safe_dump(values or {}))
    done = helm("template", release, "-n", namespace, "--kube-version", kube, "-f", str(values_file), *extra,
                chart=chart)
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(helm, tmp_path: Path, values: dict | None = None, *extra: str, **options) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(template(helm, tmp_path, values, *extra, **options)) if doc]


@pytest.fixture(scope="module")
def rendered(helm, tmp_path_factory) -> dict[str, list[dict]]:
    tmp = tmp_path_factory.mktemp("rendered")
    return {name: render(helm, tmp, values) for name, values in MATRIX.items()}


def one(objects: list[dict], kind: str, name: str) -> dict:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def pod_specs(objects: list[dict]) -> dict[str, dict]:
    """kind/name -> pod spec, for every object that runs pods."""
    out = {}
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            out[f"{o['kind']}/{o['metadata']['name']}"] = o["spec"]["template"]["spec"]
        elif o["kind"] == "Pod":
            out[f"Pod/{o['metadata']['name']}"] = o["spec"]
    return out


def pod_labels(objects: list[dict]) -> dict[str, dict]:
    out = {}
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            out[f"{o['kind']}/{o['metadata']['name']}"] = o["spec"]["template"]["metadata"]["labels"]
        elif o["kind"] == "Pod":
            out[f"Pod/{o['metadata']['name']}"] = o["metadata"]["labels"]
    return out


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings_in(k) + strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


# --- lint, schema, Kubernetes' schemas --------------------------------------------------------------

def test_chart_lints_strictly_with_every_value_set(helm, tmp_path):
    for name, values in MATRIX.items():
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        done = helm("lint", "--strict", "-f", str(values_file))
        assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"
        assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@pytest.mark.parametrize("values, named", [
    ({"telegraf_replicas": 3}, "telegraf_replicas"),           # misspelled top-level key
    ({"grafna": {"enabled": False}}, "grafna"),                # another one
    ({"telegraf": {"replica": 3}}, "replica"),                 # one level down
    ({"telegraf": {"service": {"type": "NodePorts"}}}, "/telegraf/service/type"),  # no such Service type
    ({"networkPolicy": {"sparkPeers": []}}, "sparkPeers"),     # would admit everyone
    ({"influxdb": {"retention": "30 days"}}, "retention"),     # setup.sh would refuse it later
])
def test_a_misspelled_or_wrong_value_is_refused_by_lint_and_template(helm, tmp_path, values, named):
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    for command in (("lint", "--strict"), ("template", RELEASE)):
        done = helm(*command, "-f", str(values_file))
        assert done.returncode != 0, f"{command[0]} took {values}"
        assert "schema" in done.stdout + done.stderr and named in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.fixture(scope="module")
def kubeconform(tmp_path_factory):
    """kubeconform with kubernetes-validate's strict schemas, offline (both made
    once per cache; ./sparkscope test makes them before pytest starts). Returns
    a function: {source name: YAML documents} and a Kubernetes version ->
    kubeconform's verdict on each object, {(source, "Kind/name"): (status, message)}.
    One call checks every source: each kind's schema is compiled once."""
    cache = load_settings().cache_dir
    binary, schemas = ensure_kubeconform(cache, quiet), ensure_schemas(cache, quiet)
    tmp = tmp_path_factory.mktemp("kubeconform")

    def check(sources: dict[str, str], kube: str) -> dict[tuple[str, str], tuple[str, str]]:
        files = {}
        for number, (source, documents) in enumerate(sources.items()):
            files[str(tmp / f"{number}.yaml")] = source
            (tmp / f"{number}.yaml").write_text(documents)
        done = subprocess.run([str(binary), "-strict", "-verbose", "-output", "json", "-kubernetes-version", kube,
                               "-schema-location", f"{schemas}/{LOCATION}", *files],
                              capture_output=True, text=True, timeout=300, env={"PATH": os.environ["PATH"]})
        assert done.returncode in (0, 1), done.stderr
        verdicts = {(files[r["filename"]], f"{r['kind']}/{r['name']}"): (r["status"], r.get("msg", ""))
                    for r in json.loads(done.stdout)["resources"]}
        assert (done.returncode == 0) == all(status == "statusValid" for status, _ in verdicts.values()), done.stdout
        return verdicts
    return check


def test_the_versions_checked_are_every_one_the_chart_claims(helm, tmp_path):
    """From Chart.yaml's oldest to the newest with schemas, no minor left out;
    and helm itself refuses the minor before the oldest, so no user installs
    the chart where it was not checked."""
    oldest = claimed_oldest_kubernetes()
    minors = [tuple(int(part) for part in version.split(".")[:2]) for version in KUBE_VERSIONS]
    assert minors[0] == oldest
    assert minors == [(1, minor) for minor in range(oldest[1], minors[-1][1] + 1)]
    assert len(minors) >= 13  # 1.25 .. 1.37 in kubernetes-validate 1.37.0
    values_file = tmp_path / "values.yaml"
    values_file.write_text("{}")
    done = helm("template", RELEASE, "--kube-version", f"{oldest[0]}.{oldest[1] - 1}.9", "-f", str(values_file))
    assert done.returncode != 0 and "kubeVersion" in done.stderr, done.stderr


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_every_rendered_object_is_valid_for_kubernetes(helm, kubeconform, tmp_path, kube):
    sources = {name: template(helm, tmp_path, values, kube=kube) for name, values in MATRIX.items()}
    verdicts = kubeconform(sources, kube)
    objects = [(name, f"{o['kind']}/{o['metadata']['name']}") for name, documents in sources.items()
               for o in yaml.safe_load_all(documents) if o]
    assert sorted(verdicts) == sorted(objects), "kubeconform saw other objects than helm rendered"
    problems = [f"{name}: {obj}: {message}" for (name, obj), (status, message) in verdicts.items()
                if status != "statusValid"]
    assert not problems, "\n".join(problems)


def test_the_schema_check_refuses_broken_objects(rendered, kubeconform):
    """The validator above is not a formality: a misspelled field, a wrong type
    and a missing required field in a rendered Deployment are each refused,
    by the oldest and the newest version's schemas; and a field that only
    newer Kubernetes knows is refused by the older one."""
    deployment = one(rendered["defaults"], "Deployment", f"{RELEASE}-telegraf")
    name = f"Deployment/{RELEASE}-telegraf"
    broken = {"misspelled field": (lambda d: d["spec"].update(replica=2), "'replica' not allowed"),
              "wrong type": (lambda d: d["spec"].update(replicas="two"), "/spec/replicas"),
              "missing field": (lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
                                "missing property 'name'"),
              "unknown container field": (lambda d: d["spec"]["template"]["spec"]["containers"][0]
                                          .update(readinesProbe={}), "'readinesProbe' not allowed")}
    sources = {"as rendered": yaml.safe_dump(deployment)}
    for what, (breaks, _) in broken.items():
        bad = copy.deepcopy(deployment)
        breaks(bad)
        sources[what] = yaml.safe_dump(bad)
    # Pod-level resources (the pod spec's own resources) came with Kubernetes 1.32.
    newer = copy.deepcopy(deployment)
    newer["spec"]["template"]["spec"]["resources"] = {"limits": {"memory": "1Gi"}}
    sources["pod-level resources"] = yaml.safe_dump(newer)
    for kube in (KUBE_VERSIONS[0], KUBE_VERSIONS[-1]):
        verdicts = kubeconform(sources, kube)
        assert verdicts[("as rendered", name)] == ("statusValid", "")
        for what, (_, said) in broken.items():
            status, message = verdicts[(what, name)]
            assert status == "statusInvalid" and said in message, f"{what} for {kube}: {status} {message}"
    assert kubeconform(sources, KUBE_VERSIONS[-1])[("pod-level resources", name)][0] == "statusValid"
    assert kubeconform(sources, KUBE_VERSIONS[0])[("pod-level resources", name)][0] == "statusInvalid"


# --- secrets -----------------------------------------------------------------------------------------

def test_no_object_holds_a_default_or_empty_password(rendered):
    for name, objects in rendered.items():
        # The Thanos store's Secret (its certificates and Query's password) is checked in test_chart_thanos.py.
        thanos_secret = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == THANOS_SECRET]
        assert len(thanos_secret) == (MATRIX[name].get("metricsStore", {}).get("mode") == "thanos"), name
        secrets = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] != THANOS_SECRET]
        existing = MATRIX[name].get("secrets", {}).get("existingSecret")
        secret_name = existing or f"{RELEASE}-secrets"
        if existing:
            assert secrets == [], f"{name}: the chart made a Secret although one was given"
            values = []
        else:
            (secret,) = secrets
            assert secret["metadata"]["name"] == secret_name and set(secret["data"]) == set(SECRET_KEYS)
            values = [base64.b64decode(v).decode() for v in secret["data"].values()]
            for value in values:  # what setup.sh and settings.py accept, and more
                assert re.fullmatch(r"[A-Za-z0-9]{32}", value), name
            assert len(set(values)) == len(values), f"{name}: two passwords are the same"
            assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        if thanos_secret:
            values.append(base64.b64decode(thanos_secret[0]["data"]["query-password"]).decode())
        for kind_name, spec in pod_specs(objects).items():
            for container in spec["containers"]:
                for var, entry in env_of(container).items():
                    if "PASSWORD" in var:
                        assert "value" not in entry, f"{name}: {kind_name} {var} is a literal"
                        assert entry["valueFrom"]["secretKeyRef"]["name"] == (
                            THANOS_SECRET if var == "THANOS_PASSWORD" else secret_name), f"{name}: {kind_name}"
        for obj in objects:
            if obj["kind"] == "Secret":
                continue
            text = "\n".join(strings_in(obj))
            assert "change-me" not in text, f"{name}: {obj['kind']}/{obj['metadata']['name']}"
            for value in values:
                assert value not in text, f"{name}: a password is in {obj['kind']}/{obj['metadata']['name']}"


def test_each_part_gets_only_the_credentials_it_needs(rendered):
    """The admin for the setup Job and InfluxDB's first start, the writer for Telegraf, the reader for
    Grafana and the test pod; the events password for Telegraf alone."""
    keys_by_pod = {}
    objects = rendered["defaults"]
    for kind_name, spec in pod_specs(objects).items():
        keys_by_pod[kind_name] = {e["valueFrom"]["secretKeyRef"]["key"] for c in spec["containers"]
                                  for e in c.get("env", []) if "valueFrom" in e}
    assert keys_by_pod == {
        f"Job/{RELEASE}-influxdb-setup": {"influxdb-admin-password", "influxdb-write-password",
                                          "influxdb-read-password"},
        f"Deployment/{RELEASE}-telegraf": {"influxdb-write-password", "events-password"},
        f"Deployment/{RELEASE}-grafana": {"influxdb-read-password", "grafana-admin-password"},
        f"Pod/{RELEASE}-test": {"influxdb-read-password"},
        # InfluxDB's own pod creates its first admin before it serves (first-admin.sh).
        f"StatefulSet/{RELEASE}-influxdb": {"influxdb-admin-password"},
    }
    users = {kind_name: env_of(spec["containers"][0]).get("INFLUX_USER", {}).get("value")
             for kind_name, spec in pod_specs(objects).items()}
    assert users[f"Deployment/{RELEASE}-telegraf"] == "sparkscope_writer"
    assert users[f"Deployment/{RELEASE}-grafana"] == users[f"Pod/{RELEASE}-test"] == "sparkscope_reader"
    # Without events auth the events password goes nowhere.
    telegraf = pod_specs(rendered["no grafana, no annotator, no events auth"])[f"Deployment/{RELEASE}-telegraf"]
    assert not {"EVENTS_USER", "EVENTS_PASSWORD"} & set(env_of(telegraf["containers"][0]))


# --- network -----------------------------------------------------------------------------------------

def test_listeners_bind_every_interface_of_the_pod(rendered):
    for name, objects in rendered.items():
        telegraf = pod_specs(objects)[f"Deployment/{RELEASE}-telegraf"]["containers"][0]
        env = env_of(telegraf)
        assert env["GRAPHITE_LISTEN"]["value"] == "0.0.0.0:2003", name
        assert env["EVENTS_LISTEN"]["value"] == "0.0.0.0:8186", name
        assert {p["name"]: p["containerPort"] for p in telegraf["ports"]} == {"graphite": 2003, "events": 8186}
    # ... and the config in the ConfigMap is the one that reads them.
    conf = one(rendered["defaults"], "ConfigMap", f"{RELEASE}-telegraf")["data"]["telegraf.conf"]
    assert 'service_address = "tcp://${GRAPHITE_LISTEN:-:2003}"' in conf
    assert 'service_address = "${EVENTS_LISTEN:-:8186}"' in conf


def test_services_stay_inside_the_cluster_by_default(rendered):
    for name, objects in rendered.items():
        for obj in objects:
            if obj["kind"] == "Service":
                wanted = ("LoadBalancer" if name == "telegraf as load balancer"
                          and obj["metadata"]["name"] == f"{RELEASE}-telegraf" else "ClusterIP")
                assert obj["spec"].get("type", "ClusterIP") == wanted, f"{name}: {obj['metadata']['name']}"
                assert all("nodePort" not in p for p in obj["spec"]["ports"])
        for kind_name, spec in pod_specs(objects).items():
            assert not spec.get("hostNetwork"), kind_name
            # The host's pid namespace: the host probes alone, and only when asked for.
            assert bool(spec.get("hostPID")) == (kind_name == PROBES), kind_name
            assert all("hostPort" not in p for c in spec["containers"] for p in c.get("ports", [])), kind_name
    balanced = one(rendered["telegraf as load balancer"], "Service", f"{RELEASE}-telegraf")
    assert balanced["spec"]["loadBalancerSourceRanges"] == ["10.20.0.0/16"]
    service = one(rendered["defaults"], "Service", f"{RELEASE}-telegraf")
    assert {(p["port"], p["protocol"]) for p in service["spec"]["ports"]} == {(2003, "TCP"), (8186, "TCP")}
    assert service["spec"]["sessionAffinity"] == "ClientIP"


def selects(selector: dict, labels: dict) -> bool:
    """Whether a label selector with matchLabels only picks pods with these labels."""
    assert set(selector) == {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_network_policy_admits_only_the_configured_senders_to_telegraf(helm, tmp_path, rendered):
    custom = [{"namespaceSelector": {"matchLabels": {"team": "data"}}},
              {"ipBlock": {"cidr": "10.40.0.0/16"}}]
    for peers, objects in ((DEFAULT_PEERS, rendered["defaults"]),
                           (custom, render(helm, tmp_path, {"networkPolicy": {"sparkPeers": custom}}))):
        labels = pod_labels(objects)
        policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
        (telegraf_policy,) = [p for p in policies
                              if selects(p["spec"]["podSelector"], labels[f"Deployment/{RELEASE}-telegraf"])]
        assert telegraf_policy["spec"]["policyTypes"] == ["Ingress"]
        (rule,) = telegraf_policy["spec"]["ingress"]
        assert sorted((p["port"], p["protocol"]) for p in rule["ports"]) == [(2003, "TCP"), (8186, "TCP")]
        # The configured peers, and this release's test pod: nobody else.
        *configured, test_pod = rule["from"]
        assert configured == peers
        assert set(test_pod) == {"podSelector"} and selects(test_pod["podSelector"], labels[f"Pod/{RELEASE}-test"])
        picked = [name for name, pod in labels.items() if selects(test_pod["podSelector"], pod)]
        assert picked == [f"Pod/{RELEASE}-test"]
    assert not [o for o in rendered["network policy off"] if o["kind"] == "NetworkPolicy"]


def test_network_policy_admits_nobody_to_grafana_but_the_configured_peers(helm, tmp_path, rendered):
    """No pod of the cluster reaches Grafana's login by default (kubectl
    port-forward is not filtered); an Ingress controller's namespace is added
    by name, on Grafana's port only."""
    ingress_nginx = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]
    for peers, objects in (([], rendered["defaults"]),
                           (ingress_nginx, render(helm, tmp_path, {"networkPolicy": {"grafanaPeers": ingress_nginx}}))):
        labels = pod_labels(objects)
        (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"
                     and selects(o["spec"]["podSelector"], labels[f"Deployment/{RELEASE}-grafana"])]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        if not peers:
            assert policy["spec"]["ingress"] == []
            continue
        (rule,) = policy["spec"]["ingress"]
        assert rule["from"] == peers and rule["ports"] == [{"port": "http", "protocol": "TCP"}]


def test_network_policy_admits_to_influxdb_exactly_the_pods_that_use_it(rendered):
    objects = rendered["defaults"]
    labels = pod_labels(objects)
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"
                 and selects(o["spec"]["podSelector"], labels[f"StatefulSet/{RELEASE}-influxdb"])]
    (rule,) = policy["spec"]["ingress"]
    assert [(p["port"], p["protocol"]) for p in rule["ports"]] == [(8086, "TCP")]
    admitted = {name for name, pod in labels.items()
                if any(selects(peer["podSelector"], pod) for peer in rule["from"])}
    clients = {name for name, spec in pod_specs(objects).items() if "INFLUX_URL" in env_of(spec["containers"][0])}
    assert admitted == clients == {f"Deployment/{RELEASE}-telegraf", f"Deployment/{RELEASE}-grafana",
                                   f"Job/{RELEASE}-influxdb-setup", f"Pod/{RELEASE}-test"}
    assert all(set(peer) == {"podSelector"} for peer in rule["from"]), "no namespace or address beyond the release"


# --- pods ---------------------------------------------------------------------------------------------

def test_every_pod_runs_as_non_root_read_only_with_limits(rendered):
    """Every pod but the host probes' DaemonSet, which is privileged by design,
    off by default, and checked on its own below."""
    for name, objects in rendered.items():
        for kind_name, spec in pod_specs(objects).items():
            if kind_name == PROBES:
                continue
            assert spec["automountServiceAccountToken"] is False, kind_name
            assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True, kind_name
                assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
                assert container["resources"]["limits"]["memory"] and container["resources"]["requests"], kind_name
                if not kind_name.startswith(("Job/", "Pod/")):
                    assert {"readinessProbe", "livenessProbe"} <= set(container), kind_name
    grafana = pod_specs(rendered["defaults"])[f"Deployment/{RELEASE}-grafana"]
    assert grafana["securityContext"]["runAsUser"] == 472  # the official image's user


def test_images_are_the_ones_compose_pins(rendered):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    images = {kind_name: spec["containers"][0]["image"] for kind_name, spec in pod_specs(rendered["defaults"]).items()}
    assert images[f"StatefulSet/{RELEASE}-influxdb"] == compose["influxdb"]["image"]
    assert images[f"Job/{RELEASE}-influxdb-setup"] == compose["influxdb-setup"]["image"]
    assert images[f"Deployment/{RELEASE}-telegraf"] == compose["telegraf"]["image"]
    assert images[f"Deployment/{RELEASE}-grafana"] == compose["grafana"]["image"]


def grafana_container(objects: list[dict]) -> tuple[dict, dict]:
    """(the grafana container, its pod spec)."""
    spec = pod_specs(objects)[f"Deployment/{RELEASE}-grafana"]
    return spec["containers"][0], spec


def test_grafana_gets_its_influxdb_plugin_offline_from_a_mirror_or_a_volume(helm, tmp_path, rendered):
    container, spec = grafana_container(rendered["defaults"])
    names = {e["name"] for e in container["env"]}
    assert not names & {"GF_PLUGINS_PREINSTALL", "GF_PATHS_PLUGINS"}  # by default the image's own way
    assert "plugins" not in {v["name"] for v in spec["volumes"]}
    mirror = "influxdb@13.1.1@https://mirror.example/grafana-influxdb-datasource-13.1.1.zip"
    claim = {"persistentVolumeClaim": {"claimName": "grafana-plugins"}}
    container, spec = grafana_container(render(helm, tmp_path, {"grafana": {"plugins": {
        "preinstall": mirror, "volume": claim}}}))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GF_PLUGINS_PREINSTALL"] == mirror and env["GF_PATHS_PLUGINS"] == "/var/lib/grafana-plugins"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "plugins")
    assert mount == {"name": "plugins", "mountPath": "/var/lib/grafana-plugins", "readOnly": True}
    assert next(v for v in spec["volumes"] if v["name"] == "plugins") == {"name": "plugins", **claim}


def test_telegraf_replicas_follow_the_value(rendered):
    assert one(rendered["defaults"], "Deployment", f"{RELEASE}-telegraf")["spec"]["replicas"] == 2
    assert one(rendered["telegraf replicas 3"], "Deployment", f"{RELEASE}-telegraf")["spec"]["replicas"] == 3


# --- the host probes (off by default) ------------------------------------------------------------------

def probe_reads(probe: str) -> str:
    """The source of what runs in the probe's image (its Dockerfile's COPY lines)."""
    dockerfile = (ROOT / "src" / "sparkscope" / "probes" / probe / "Dockerfile").read_text()
    copied = re.findall(r"src/sparkscope/[\w/.]+", dockerfile.replace("\\\n", " "))
    files = [f for path in copied for f in ([ROOT / path] if path.endswith(".py") else (ROOT / path).rglob("*.py"))]
    assert any(f.parent.name == probe for f in files), copied
    return "\n".join(f.read_text() for f in files)


def test_the_host_probes_are_off_by_default_and_ask_for_their_image(helm, tmp_path, rendered):
    for name, objects in rendered.items():
        assert (PROBES in pod_specs(objects)) == (name == "host probes"), name
    values_file = tmp_path / "values.yaml"
    for values, named in (({"probes": {"enabled": True}}, "src/sparkscope/probes/threadprobe/Dockerfile"),
                          ({"probes": {"enabled": True, "threadprobe": {"enabled": False}}},
                           "src/sparkscope/probes/blockprobe/Dockerfile"),
                          ({"probes": {"enabled": True, "threadprobe": {"enabled": False},
                                       "blockprobe": {"enabled": False}}}, "both false")):
        values_file.write_text(yaml.safe_dump(values))
        done = helm("template", RELEASE, "-f", str(values_file))
        assert done.returncode != 0 and named in done.stderr, done.stderr


def test_each_host_probe_runs_as_compose_runs_it_and_tags_its_points_with_the_node(rendered):
    objects = rendered["host probes"]
    spec = pod_specs(objects)[PROBES]
    assert spec["hostPID"] is True and spec["automountServiceAccountToken"] is False
    assert "hostNetwork" not in spec  # it reaches Telegraf by the Service, as Spark does
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"threadprobe", "blockprobe"}
    assert containers["threadprobe"]["image"] == "registry.example/sparkscope-threadprobe:0.1.0"  # appVersion
    assert containers["blockprobe"]["image"] == "registry.example/sparkscope-blockprobe:b1"
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    telegraf = one(objects, "Service", f"{RELEASE}-telegraf")
    events_port = next(p["port"] for p in telegraf["spec"]["ports"] if p["name"] == "events")
    secret = one(objects, "Secret", f"{RELEASE}-secrets")
    volumes = {v["name"]: v for v in spec["volumes"]}
    for probe, container in containers.items():
        env = env_of(container)
        source = probe_reads(probe)
        for name in env:  # each variable is one the probe's own code reads
            assert f'"{name}"' in source, f"{probe} never reads {name}"
        url = env["THREADPROBE_URL" if probe == "threadprobe" else "BLOCKPROBE_URL"]["value"]
        assert url == f"http://{RELEASE}-telegraf:{events_port}"
        assert env["SPARKSCOPE_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        assert env["SPARKSCOPE_EVENTS_USER"]["value"] == "sparkscope"
        password = env["SPARKSCOPE_EVENTS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert password["name"] == secret["metadata"]["name"] and password["key"] in secret["data"]
        # compose's service of the same probe: the same switches, and its host paths mounted here too.
        assert set(compose[probe]["environment"]) - {"THREADPROBE_ENABLED"} <= set(env)
        assert compose[probe]["privileged"] is True and container["securityContext"]["privileged"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}
        for volume in compose[probe].get("volumes", []):
            host, inside = volume.split(":")[:2]
            assert mounts[inside]["hostPath"]["path"] == host, (probe, volume)
        assert "emptyDir" in mounts["/tmp"]  # py-spy's recordings; the root stays read-only


def test_the_thread_sampler_can_run_without_privileges_and_then_asks_for_none(helm, tmp_path):
    values = {"probes": {"enabled": True, "blockprobe": {"enabled": False},
                         "threadprobe": {"privileged": False, "image": {"repository": "r/t", "tag": "1"}}}}
    spec = pod_specs(render(helm, tmp_path, values))[PROBES]
    (container,) = spec["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                            "readOnlyRootFilesystem": True}
    env = env_of(container)
    assert env["THREADPROBE_KERNEL_STACKS"]["value"] == env["THREADPROBE_PYSPY"]["value"] == "false"
    assert not [v for v in spec["volumes"] if "hostPath" in v]


def test_network_policy_admits_the_host_probes_to_the_events_listener_only(rendered):
    objects = rendered["host probes"]
    labels = pod_labels(objects)
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    admitted = {}  # policy's pods -> ports the probes may reach
    for policy in policies:
        for rule in policy["spec"]["ingress"]:
            if any("podSelector" in peer and set(peer) == {"podSelector"}
                   and selects(peer["podSelector"], labels[PROBES]) for peer in rule["from"]):
                admitted.setdefault(policy["metadata"]["name"], []).extend(p["port"] for p in rule["ports"])
    assert admitted == {f"{RELEASE}-telegraf": [8186]}
    # ... and the probes' rule picks no other pod of the release.
    (telegraf,) = [p for p in policies if p["metadata"]["name"] == f"{RELEASE}-telegraf"]
    probes_rule = next(r for r in telegraf["spec"]["ingress"] if [p["port"] for p in r["ports"]] == [8186])
    picked = [name for name, pod in labels.items() for peer in probes_rule["from"] if selects(peer["podSelector"], pod)]
    assert picked == [PROBES]


# --- files: the copies, the dashboards, Grafana's provisioning ------------------------------------------

def test_chart_copies_equal_their_sources():
    problems = chart_copies.differences()
    assert not problems, "\n".join(problems) + f"\nrun: {COMMAND}"


def test_the_copy_check_finds_an_edited_missing_or_left_over_copy(tmp_path):
    root = tmp_path / "repo"
    for rel in chart_copies.sources():
        for base in (Path(rel), chart_copies.FILES_DIR / rel):
            (root / base).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, root / base)
    assert chart_copies.differences(root) == []
    edited = root / chart_copies.FILES_DIR / "dashboards" / "spark-executors.json"
    edited.write_bytes(edited.read_bytes().replace(b'"Spark', b'"Sparc', 1))
    (root / chart_copies.FILES_DIR / "influxdb" / "setup.sh").unlink()
    (root / chart_copies.FILES_DIR / "dashboards" / "gone.json").write_text("{}")
    assert sorted(chart_copies.differences(root)) == [
        "charts/sparkscope/files/dashboards/gone.json: no such source file dashboards/gone.json (left over)",
        "charts/sparkscope/files/dashboards/spark-executors.json: differs from dashboards/spark-executors.json",
        "charts/sparkscope/files/influxdb/setup.sh: missing (copy of influxdb/setup.sh)"]
    assert len(chart_copies.write_copies(root)) == 3 and chart_copies.differences(root) == []


def test_dashboard_configmaps_are_byte_identical_to_dashboards_dir(rendered):
    objects = rendered["defaults"]
    sources = sorted((ROOT / "dashboards").glob("*.json"))
    assert sources
    mounted = []
    for source in sources:
        config_map = one(objects, "ConfigMap", f"{RELEASE}-dashboard-{source.stem}")
        assert config_map["data"][source.name].encode() == source.read_bytes(), source.name
        mounted.append(config_map["metadata"]["name"])
    grafana = pod_specs(objects)[f"Deployment/{RELEASE}-grafana"]
    (volume,) = [v for v in grafana["volumes"] if v["name"] == "dashboards"]
    assert [s["configMap"]["name"] for s in volume["projected"]["sources"]] == mounted
    env = env_of(grafana["containers"][0])
    (mount,) = [m for m in grafana["containers"][0]["volumeMounts"] if m["name"] == "dashboards"]
    assert env["SPARKSCOPE_DASHBOARDS_DIR"]["value"] == mount["mountPath"]
    home = Path(env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]["value"])
    assert home.parent == Path(mount["mountPath"]) and (ROOT / "dashboards" / home.name).is_file()


def test_grafana_gets_the_datasource_with_its_pinned_uid_as_the_reader(rendered):
    objects = rendered["defaults"]
    config = one(objects, "ConfigMap", f"{RELEASE}-grafana")["data"]
    datasource = yaml.safe_load(config["influxdb.yaml"])["datasources"][0]
    assert datasource["uid"] == "sparkscope-influxdb"
    assert config["influxdb.yaml"] == (ROOT / "grafana/provisioning/datasources/influxdb.yaml").read_text()
    grafana = pod_specs(objects)[f"Deployment/{RELEASE}-grafana"]
    env = env_of(grafana["containers"][0])
    # Every ${VAR} the provisioning files read is set (Grafana would leave it empty).
    for text in (config["influxdb.yaml"], config["sparkscope.yaml"]):
        for var in re.findall(r"\$\{(\w+)\}", text):
            assert var in env, var
    assert env["INFLUX_URL"]["value"] == f"http://{RELEASE}-influxdb:8086"
    mounts = {m["mountPath"]: m["name"] for m in grafana["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in grafana["volumes"]}
    for path, key in (("/etc/grafana/provisioning/datasources", "influxdb.yaml"),
                      ("/etc/grafana/provisioning/dashboards", "sparkscope.yaml")):
        assert [item["key"] for item in volumes[mounts[path]]["configMap"]["items"]] == [key]


# --- Spark's settings: NOTES.txt and the spark-conf ConfigMap --------------------------------------------

def expected_flags(tmp_path: Path, host: str, port: int, prefix: str, period: int, events_port: int,
                   jar: str, secret: str) -> list[str]:
    """What `./sparkscope conf --host H --port P --prefix X --period N` prints
    (cli.cmd_conf) with the events listener's auth on, plus where the pods get
    the password it names: the release's Secret, as an environment variable."""
    flags = conf_flags(ROOT / "spark-conf" / "spark-defaults.conf", graphite_host=host, graphite_port=port,
                       prefix=prefix, period_s=period)
    settings = isolated_settings(tmp_path / "conf-state", EVENTS_AUTH="on")
    props = annotator_properties(settings, jar)
    props["spark.sparkscope.influx.url"] = f"http://{host}:{events_port}"
    assert props["spark.sparkscope.influx.passwordEnv"] == "SPARKSCOPE_EVENTS_PASSWORD"
    for role in ("driver", "executor"):
        props[f"spark.kubernetes.{role}.secretKeyRef.SPARKSCOPE_EVENTS_PASSWORD"] = f"{secret}:events-password"
    return flags + as_flags(props)


def rendered_notes(helm, tmp_path: Path, values: dict, release: str = RELEASE, namespace: str = NAMESPACE) -> str:
    """NOTES.txt as `helm install` prints it. `helm template` leaves NOTES out and
    `helm install --dry-run` wants a cluster, so a copy of the chart renders the
    same file as a named template into a ConfigMap."""
    copy_dir = tmp_path / "chart-with-notes"
    shutil.copytree(CHART, copy_dir)
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    (copy_dir / "templates" / "_notes_for_test.tpl").write_text(
        '{{- define "test.notes" -}}\n' + notes + "{{- end -}}\n")
    (copy_dir / "templates" / "notes-for-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-for-test\n"
        'data:\n  NOTES.txt: {{ include "test.notes" . | toJson }}\n')
    objects = render(helm, tmp_path, values, "--show-only", "templates/notes-for-test.yaml", chart=copy_dir,
                     release=release, namespace=namespace)
    return objects[0]["data"]["NOTES.txt"]


def notes_flags(notes: str) -> list[str]:
    lines = [line.strip() for line in notes.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("spark-submit --master k8s://"))
    flags = []
    for line in lines[start + 1:]:
        if not line.endswith(" \\"):
            break
        flags.append(line[:-2])
    return flags


@pytest.mark.parametrize("values, release, namespace, host, port, prefix, period", [
    ({}, RELEASE, NAMESPACE, TELEGRAF_DNS, 2003, "spark", 5),
    ({"clusterDomain": "corp.example", "spark": {"prefix": "etl", "periodSeconds": 10},
      "telegraf": {"ports": {"graphite": 12000, "events": 18000}}},
     "mon", "observability", "mon-telegraf.observability.svc.corp.example", 12000, "etl", 10),
])
def test_notes_print_what_sparkscope_conf_prints_for_the_service(helm, tmp_path, values, release, namespace,
                                                                 host, port, prefix, period):
    events_port = values.get("telegraf", {}).get("ports", {}).get("events", 8186)
    jar = "local:///opt/sparkscope/sparkscope-annotator.jar"
    notes = rendered_notes(helm, tmp_path, values, release, namespace)
    flags = notes_flags(notes)
    assert flags == expected_flags(tmp_path, host, port, prefix, period, events_port, jar, f"{release}-secrets")
    assert "--conf 'spark.metrics.conf.*.sink.graphite.host=" + host + "'" in flags  # shell-quoted like conf
    assert "--conf spark.executor.processTreeMetrics.enabled=false" in flags
    # No value of the password: Spark would put it in spark-submit's argv and the driver's ConfigMap.
    assert not any("influx.password=" in flag for flag in flags)
    # The ports and host printed are the Service's.
    objects = render(helm, tmp_path, values, release=release, namespace=namespace)
    service = one(objects, "Service", f"{release}-telegraf")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"graphite": port, "events": events_port}
    assert host.startswith(f"{service['metadata']['name']}.{namespace}.svc.")
    # The spark-conf ConfigMap holds the same settings as a properties file.
    properties = one(objects, "ConfigMap", f"{release}-spark-conf")["data"]["spark-defaults.conf"]
    pairs = [line.split("=", 1) for line in properties.splitlines() if line and not line.startswith("#")]
    as_flags = [f"--jars {v}" if k == "spark.jars" else f"--conf {k}={v}" for k, v in pairs]
    assert as_flags == [flag.replace("'", "") for flag in flags]
    assert "spark.sparkscope.influx.password" not in [k for k, _ in pairs]


def test_notes_without_annotator_or_auth_print_the_sink_alone(helm, tmp_path):
    notes = rendered_notes(helm, tmp_path, MATRIX["no grafana, no annotator, no events auth"])
    flags = notes_flags(notes)
    assert flags == conf_flags(ROOT / "spark-conf" / "spark-defaults.conf", graphite_host=TELEGRAF_DNS,
                               graphite_port=2003, prefix="spark", period_s=5)
    assert "port-forward" not in notes and "password" not in notes


# --- Spark's settings: ./sparkscope conf --k8s, and docs/kubernetes.md's walkthrough ----------------------

def conf_k8s(capsys, *args: str) -> list[str]:
    """What `./sparkscope conf --k8s ARGS` prints, one flag an item."""
    assert cli.main(["conf", "--k8s", *args]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return [line.removesuffix(" \\") for line in out.splitlines()]


def flag_value(flags: list[str], key: str) -> str:
    (value,) = [shlex.split(flag)[1].split("=", 1)[1] for flag in flags if flag.startswith("--conf")
                and shlex.split(flag)[1].startswith(key + "=")]
    return value


@pytest.mark.parametrize("values, release, namespace", [
    ({}, RELEASE, NAMESPACE),
    ({"clusterDomain": "corp.example", "fullnameOverride": "obs", "spark": {"prefix": "etl", "periodSeconds": 10},
      "telegraf": {"ports": {"graphite": 12000, "events": 18000}},
      "secrets": {"existingSecret": "my-sparkscope-secrets"}}, "mon", "observability"),
    (MATRIX["no grafana, no annotator, no events auth"], RELEASE, NAMESPACE),
])
def test_conf_k8s_prints_the_notes_flags_for_the_services_helm_renders(helm, tmp_path, capsys, values, release,
                                                                        namespace):
    values_file = tmp_path / "given-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    flags = conf_k8s(capsys, "--release", release, "--namespace", namespace, "--values", str(values_file))
    # The same lines helm install prints for that release (NOTES.txt).
    assert flags == notes_flags(rendered_notes(helm, tmp_path, values, release, namespace))
    # Each host printed is a Service `helm template` renders, by its cluster DNS name, with that port.
    objects = render(helm, tmp_path, values, release=release, namespace=namespace)
    services = {o["metadata"]["name"]: {p["name"]: p["port"] for p in o["spec"]["ports"]}
                for o in objects if o["kind"] == "Service"}
    domain = values.get("clusterDomain", "cluster.local")
    printed = [(flag_value(flags, SINK + "host"), "graphite", int(flag_value(flags, SINK + "port")))]
    if "spark.sparkscope.influx.url" in "".join(flags):
        url = urllib.parse.urlsplit(flag_value(flags, "spark.sparkscope.influx.url"))
        printed.append((url.hostname, "events", url.port))
    for host, port_name, port in printed:
        service, svc_namespace, svc, cluster_domain = host.split(".", 3)
        assert (svc_namespace, svc, cluster_domain) == (namespace, "svc", domain), host
        assert services[service][port_name] == port, f"{host}:{port} is no port of Service {service}"
    # The pods read the password from the Secret the release uses; no flag holds it.
    secrets = [o["metadata"]["name"] for o in objects if o["kind"] == "Secret"]
    secret = values.get("secrets", {}).get("existingSecret") or secrets[0]
    assert not any("influx.password=" in flag for flag in flags)
    if values.get("events", {}).get("auth", True) and values.get("spark", {}).get("annotator", {}).get("enabled", True):
        for role in ("driver", "executor"):
            assert (f"--conf spark.kubernetes.{role}.secretKeyRef.SPARKSCOPE_EVENTS_PASSWORD={secret}:events-password"
                    in flags)
    else:
        assert "PASSWORD" not in "".join(flags)


def test_conf_k8s_refuses_what_the_release_decides_and_names_helm_would_refuse(capsys):
    for args, said in ((["--host", "telegraf.example"], "--host cannot go with --k8s"),
                       (["--port", "2004"], "--port cannot go with --k8s"),
                       (["--release", "Spark_Mon"], "release name 'Spark_Mon'"),
                       (["--namespace", "spark.mon"], "namespace 'spark.mon'")):
        assert cli.main(["conf", "--k8s", *args]) != 0
        captured = capsys.readouterr()
        assert said in captured.err and captured.out == "", args


def doc_section(path: str, title: str) -> str:
    text = (ROOT / path).read_text()
    start = text.index(f"\n## {title}\n")
    return text[start:text.index("\n## ", start + 1)]


def fenced(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


# The spec fields of each operator's SparkApplication, and the required ones, as
# their CRDs have them: kubeflow/spark-operator 38082f3 (2026-08-21),
# charts/spark-operator-chart/crds/sparkoperator.k8s.io_sparkapplications.yaml,
# version v1beta2; apache/spark-kubernetes-operator d5acafd (2026-08-18),
# build-tools/helm/spark-kubernetes-operator/crds/sparkapplications.spark.apache.org-v1.yaml, version v1.
OPERATORS = {
    "sparkoperator.k8s.io/v1beta2": {
        "spec": {"arguments", "batchScheduler", "batchSchedulerOptions", "deps", "driver", "driverIngressOptions",
                 "driverPodDisruptionBudget", "dynamicAllocation", "executor", "failureRetries", "hadoopConf",
                 "hadoopConfigMap", "image", "imagePullPolicy", "imagePullSecrets", "mainApplicationFile",
                 "mainClass", "memoryOverheadFactor", "mode", "monitoring", "nodeSelector", "proxyUser",
                 "pythonVersion", "restartPolicy", "retryInterval", "sparkConf", "sparkConfigMap", "sparkUIOptions",
                 "sparkVersion", "suspend", "timeToLiveSeconds", "type", "volumes"},
        "required": {"driver", "executor", "mainApplicationFile", "sparkVersion", "type"},
    },
    "spark.apache.org/v1": {
        "spec": {"applicationTolerations", "configMapSpecs", "deploymentMode", "driverArgs", "driverGrpcRouteList",
                 "driverHttpRouteList", "driverServiceIngressList", "driverSpec", "executorSpec", "files", "jars",
                 "mainClass", "proxyUser", "pyFiles", "runtimeVersions", "sparkConf", "sparkRFiles"},
        "required": {"runtimeVersions"},
    },
}


def test_the_kubernetes_walkthrough_gives_what_conf_k8s_prints(capsys):
    section = doc_section("docs/kubernetes.md", "Attach Spark")
    flags = conf_k8s(capsys)  # the defaults: release sparkscope in spark-mon, as the walkthrough installs
    (steps,) = [block for block in fenced(section, "sh") if "spark-submit --master k8s://" in block]
    assert f"helm install {RELEASE} charts/sparkscope -n {NAMESPACE} --create-namespace" in steps
    lines = [line.strip().removesuffix(" \\") for line in steps.splitlines()]
    start = lines.index(flags[0])
    assert lines[start:start + len(flags)] == flags
    others = lines[:start] + lines[start + len(flags):]
    # ... and no other line sets sparkscope's settings (a stale copy, a second sink).
    keys = {k for k, _ in (shlex.split(flag)[1].split("=", 1) for flag in flags if flag.startswith("--conf"))}
    assert not [line for line in others if line.startswith("--jars") or line.startswith("--conf") and (
        shlex.split(line)[1].split("=", 1)[0] in keys or "sparkscope" in shlex.split(line)[1].split("=", 1)[0]
        or "metrics" in line)], others
    # The operators' manifests: the same settings in sparkConf, the jar where each operator takes it.
    properties = {k: v for k, v in (shlex.split(flag)[1].split("=", 1) for flag in flags if flag.startswith("--conf"))}
    assert not [flag for flag in flags if flag.startswith("--jars ")]  # the image's jar: on the class path
    assert properties["spark.executor.extraClassPath"] == "/opt/sparkscope/sparkscope-annotator.jar"
    manifests = {doc["apiVersion"]: doc for doc in map(yaml.safe_load, fenced(section, "yaml"))}
    assert set(manifests) == set(OPERATORS)
    for api, manifest in manifests.items():
        spec = manifest["spec"]
        assert manifest["kind"] == "SparkApplication"
        assert set(spec) <= OPERATORS[api]["spec"], f"{api}: no such field {set(spec) - OPERATORS[api]['spec']}"
        assert OPERATORS[api]["required"] <= set(spec), api
        conf = dict(spec["sparkConf"])
        assert all(isinstance(v, str) for v in conf.values()), f"{api}: sparkConf is a map of strings"
        assert "spark.sparkscope.influx.password" not in conf, f"{api}: the password's value in sparkConf"
        ours = {k: v for k, v in conf.items() if k in properties}
        assert ours == properties, api
        assert not [k for k in conf if k not in properties and ("sparkscope" in k or "metrics" in k)], api


# --- what runs here for real: InfluxDB setup, Telegraf's config, the helm test pod -------------------------

def secret_values(objects: list[dict], name: str = f"{RELEASE}-secrets") -> dict[str, str]:
    secret = one(objects, "Secret", name)
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def container_env(container: dict, secrets: dict[str, str], **replaced: str) -> dict[str, str]:
    """A rendered container's environment as the kubelet would set it (secretKeyRef
    resolved from the rendered Secret), with the in-cluster addresses in replaced
    swapped for this machine's."""
    env = {}
    for name, entry in env_of(container).items():
        env[name] = entry["value"] if "value" in entry else secrets[entry["valueFrom"]["secretKeyRef"]["key"]]
    for name, value in replaced.items():
        assert name in env, name
        env[name] = value
    return {"PATH": os.environ["PATH"], **env}


def config_map_files(objects: list[dict], spec: dict, container: dict, into: Path) -> dict[str, Path]:
    """The container's ConfigMap mounts written under into: mount path -> local dir."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    out = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})  # not there: a volumeClaimTemplate's
        if "configMap" not in volume:
            continue
        data = one(objects, "ConfigMap", volume["configMap"]["name"])["data"]
        local = into / mount["mountPath"].strip("/").replace("/", "_")
        local.mkdir(parents=True)
        for item in volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
            (local / item["path"]).write_text(data[item["key"]])
        out[mount["mountPath"]] = local
    return out


def localized(argv: list[str], mounts: dict[str, Path]) -> list[str]:
    out = []
    for arg in argv:
        for path, local in mounts.items():
            if arg.startswith(path + "/"):
                arg = str(local) + arg[len(path):]
        out.append(arg)
    return out


@pytest.fixture
def chart_stack(helm, tmp_path):
    """A fresh InfluxDB started as the StatefulSet's pod starts it: the rendered
    command (first-admin.sh, then the image's entrypoint, here influxd itself)
    with the rendered influxdb.conf and environment."""
    tmp = tmp_path / "chart-stack"
    tmp.mkdir()
    objects = render(helm, tmp, {})
    settings = isolated_settings(tmp / "state")
    statefulset = pod_specs(objects)[f"StatefulSet/{RELEASE}-influxdb"]
    (container,) = statefulset["containers"]
    mounts = config_map_files(objects, statefulset, container, tmp / "influxdb")
    influxd = str(ensure_influxd(settings.cache_dir, quiet))
    config = str(mounts["/etc/influxdb"] / "influxdb.conf")
    command = localized(container["command"], mounts)
    assert command[-2:] == ["/entrypoint.sh", "influxd"]  # the image's own entrypoint and command
    port = free_port(pair_offset=2)
    env = {**container_env(container, secret_values(objects)),
           **{k: str(v) for k, v in influx_dirs(settings.state_dir).items()},
           "INFLUXDB_HTTP_BIND_ADDRESS": f"127.0.0.1:{port}", "INFLUXDB_BIND_ADDRESS": f"127.0.0.1:{port + 2}",
           # The pod's loopback is its own; here the first start gets a free port of the host's.
           "SPARKSCOPE_FIRST_START_ADDRESS": f"127.0.0.1:{free_port()}"}
    proc = start_group([*command[:-2], influxd, "-config", config], tmp / "influxd.log", env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: influx.ping(url), 60), (tmp / "influxd.log").read_text()[-2000:]
        yield {"objects": objects, "url": url, "secrets": secret_values(objects)}
    finally:
        stop_group(proc.pid, proc=proc)


def run_setup_job(chart_stack, into: Path) -> subprocess.CompletedProcess:
    objects = chart_stack["objects"]
    job = pod_specs(objects)[f"Job/{RELEASE}-influxdb-setup"]
    (container,) = job["containers"]
    assert container["command"] == ["/bin/sh", "/setup/setup.sh"]  # as compose's influxdb-setup
    env = container_env(container, chart_stack["secrets"], INFLUX_URL=chart_stack["url"])
    mounts = config_map_files(objects, job, container, into)
    return subprocess.run(localized(container["command"], mounts), env=env, capture_output=True, text=True,
                          timeout=300)


def influx_state(admin: influx.Endpoint, db: str) -> dict:
    users = {row[0]: row[1] for row in influx.query(admin, "SHOW USERS")[0]["values"]}
    grants = {user: sorted(tuple(r) for s in influx.query(admin, f"SHOW GRANTS FOR {influx.identifier(user)}")
                           for r in s.get("values", [])) for user in users}
    policies = {r["name"]: (r["duration"], r["default"])
                for r in influx.rows(influx.query(admin, f'SHOW RETENTION POLICIES ON "{db}"'))}
    queries = rollups.existing_queries(admin, db)
    lookup = {m: influx.query(admin, f'SELECT * FROM "sparkscope_meta".{influx.identifier(m)}', db)
              for m in (schema.RESOLUTION_MEASUREMENT, schema.PEAK_SOURCE_MEASUREMENT,
                        schema.TASK_SCOPE_MEASUREMENT)}
    return {"users": users, "grants": grants, "policies": policies, "queries": queries, "lookup": lookup}


@pytest.mark.skipif(shutil.which("curl") is None, reason="influxdb/setup.sh runs curl (the influxdb image has it)")
def test_setup_job_leaves_the_users_grants_and_rollups_up_leaves(chart_stack, tmp_path):
    secrets, url = chart_stack["secrets"], chart_stack["url"]
    first = run_setup_job(chart_stack, tmp_path / "first")
    assert first.returncode == 0, first.stdout + first.stderr
    # The admin was made by the pod itself, before it served anyone (first-admin.sh).
    assert "created admin user" not in first.stdout and "created sparkscope_writer" in first.stdout
    for secret in secrets.values():
        assert secret not in first.stdout + first.stderr
    admin = influx.Endpoint(url, "sparkscope_admin", secrets["influxdb-admin-password"])
    state = influx_state(admin, "spark")
    assert state["users"] == {"sparkscope_admin": True, "sparkscope_writer": False, "sparkscope_reader": False}
    assert state["grants"]["sparkscope_writer"] == [("spark", "WRITE")]
    assert state["grants"]["sparkscope_reader"] == [("spark", "READ")]
    assert state["policies"] == {"sparkscope": ("720h0m0s", True), "sparkscope_1m": ("720h0m0s", False),
                                 "sparkscope_10m": ("720h0m0s", False), "sparkscope_30m": ("720h0m0s", False),
                                 "sparkscope_meta": ("0s", False)}
    assert set(state["queries"]) == set(rollups.wanted_queries("spark"))
    assert all(series and series[0]["values"] for series in state["lookup"].values())
    # What ./sparkscope up does on the same server changes nothing: the two agree.
    users = influx.Users(admin, influx.Endpoint(url, "sparkscope_writer", secrets["influxdb-write-password"]),
                         influx.Endpoint(url, "sparkscope_reader", secrets["influxdb-read-password"]))
    influx.ensure_users(users, "spark", "30d")
    rollups.ensure_rollups(admin, "spark", "30d")
    assert influx_state(admin, "spark") == state
    # post-upgrade: the hook runs again and changes nothing.
    again = run_setup_job(chart_stack, tmp_path / "again")
    assert again.returncode == 0 and "created" not in again.stdout, again.stdout + again.stderr
    assert influx_state(admin, "spark") == state
    # A volume kept from an uninstalled release, and a new random Secret: the
    # Job fails, says why, and changes nothing.
    wrong = run_setup_job(dict(chart_stack, secrets=dict(secrets, **{"influxdb-admin-password": "not-the-admin-0123"})),
                          tmp_path / "wrong")
    assert wrong.returncode == 1 and "refuses sparkscope_admin" in wrong.stderr
    assert influx_state(admin, "spark") == state


@pytest.fixture
def chart_telegraf(chart_stack, tmp_path):
    """The cached Telegraf with the config and environment the chart renders
    (listening on free loopback ports here instead of the pod's 0.0.0.0)."""
    objects = chart_stack["objects"]
    spec = pod_specs(objects)[f"Deployment/{RELEASE}-telegraf"]
    (container,) = spec["containers"]
    mounts = config_map_files(objects, spec, container, tmp_path)
    graphite, events = free_port(), free_port()
    env = container_env(container, chart_stack["secrets"], INFLUX_URL=chart_stack["url"],
                        GRAPHITE_LISTEN=f"127.0.0.1:{graphite}", EVENTS_LISTEN=f"127.0.0.1:{events}",
                        TELEGRAF_BUFFER_DIR=str(tmp_path / "buffer"))
    argv = [str(ensure_telegraf(load_settings().cache_dir, quiet))] + localized(container["args"][1:], mounts)
    return {"argv": argv, "env": env, "graphite": graphite, "events": events, "log": tmp_path / "telegraf.log"}


def test_telegraf_accepts_the_config_the_chart_renders(chart_telegraf, tmp_path):
    test = [*chart_telegraf["argv"], "--test"]
    done = subprocess.run(test, env=chart_telegraf["env"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Loaded inputs: cpu diskio influxdb_listener internal kernel mem net socket_listener" in done.stderr
    # The check is not a formality: a misspelled option or a bad value is refused.
    conf = Path(test[test.index("--config") + 1])
    broken = tmp_path / "broken.conf"
    broken.write_text(conf.read_text().replace("metric_batch_size", "metric_batch_sise"))
    done = subprocess.run([*test[:test.index("--config")], "--config", str(broken), "--test"],
                          env=chart_telegraf["env"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "metric_batch_sise" in done.stderr
    done = subprocess.run(test, env=dict(chart_telegraf["env"], SPARKSCOPE_NO_END_GRACE_S="two minutes"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None,
                    reason="the helm test pod runs bash and curl")
def test_helm_test_pod_roundtrips_through_the_charts_telegraf_and_influxdb(chart_stack, chart_telegraf):
    """The helm test pod's own script, against InfluxDB set up by the chart's Job
    and Telegraf running the chart's config as its writer: one Graphite line in,
    read back as the reader."""
    setup = run_setup_job(chart_stack, chart_telegraf["log"].parent / "setup")
    assert setup.returncode == 0, setup.stderr
    telegraf = start_group(chart_telegraf["argv"], chart_telegraf["log"], env=chart_telegraf["env"])
    try:
        assert wait_until(lambda: influx.ping(f"http://127.0.0.1:{chart_telegraf['events']}"), 30), \
            chart_telegraf["log"].read_text()[-3000:]
        pod = pod_specs(chart_stack["objects"])[f"Pod/{RELEASE}-test"]
        (container,) = pod["containers"]
        env = container_env(container, chart_stack["secrets"], GRAPHITE_HOST="127.0.0.1",
                            GRAPHITE_PORT=str(chart_telegraf["graphite"]), INFLUX_URL=chart_stack["url"])
        assert container["command"][:2] == ["/bin/bash", "-c"]
        done = subprocess.run(container["command"], env=env, capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, done.stdout + done.stderr + chart_telegraf["log"].read_text()[-3000:]
        assert "read back as sparkscope_reader" in done.stdout
        # Telegraf wrote it as the writer: the reader sees the application's tags.
        reader = influx.Endpoint(chart_stack["url"], "sparkscope_reader",
                                 chart_stack["secrets"]["influxdb-read-password"])
        app = re.search(r"helmtest\.(helm-test-\d+)\.", done.stdout).group(1)
        rows = influx.query(reader, 'SELECT "value", "executorid", "namespace", "username" FROM '
                            f'"threadpool.activeTasks" WHERE "applicationid" = \'{app}\'', "spark")
        assert rows[0]["values"][0][1:] == [7, "driver", "executor", "helmtest"]
        # The events listener asks for the password the chart gave it ...
        assert influx_status(f"http://127.0.0.1:{chart_telegraf['events']}/write?db=spark",
                             b"sparkscope_chart_probe value=1") == 401
        # ... but the readiness probes' paths answer without one, as the kubelet asks.
        telegraf_probe = pod_specs(chart_stack["objects"])[f"Deployment/{RELEASE}-telegraf"]["containers"][0]
        influx_probe = pod_specs(chart_stack["objects"])[f"StatefulSet/{RELEASE}-influxdb"]["containers"][0]
        assert telegraf_probe["readinessProbe"]["httpGet"]["port"] == "events"
        assert influx_status(f"http://127.0.0.1:{chart_telegraf['events']}"
                             + telegraf_probe["readinessProbe"]["httpGet"]["path"]) == 204
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert influx_status(chart_stack["url"] + influx_probe[probe]["httpGet"]["path"]) == 204
    finally:
        stop_group(telegraf.pid, proc=telegraf)


REMOTE_VALUES = MATRIX["remote metrics store"]


def test_a_remote_store_needs_its_write_url_and_takes_no_credentials_in_it(helm, tmp_path):
    for remote, says in (({"writeURL": ""}, "metricsStore.remote.writeURL"),
                         ({"writeURL": "https://user:pw@mimir.example/api/v1/push"}, "no credentials in the URL"),
                         ({"writeURL": 'https://mimir.example/"push'}, "writeURL")):
        values = {"metricsStore": {"mode": "remote", "remote": dict(REMOTE_VALUES["metricsStore"]["remote"], **remote)}}
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        done = helm("template", RELEASE, "-f", str(values_file))
        assert done.returncode != 0 and says in done.stderr, (remote, done.stderr)


def test_the_remote_store_gets_spark_metrics_from_the_charts_telegraf_with_your_authorization(
        helm, chart_stack, tmp_path):
    """metricsStore.mode remote: the rendered Telegraf (both configs, the env the
    Deployment sets, the header from your Secret) remote-writes what Spark sends
    to your store; the influxdb mode renders no second output."""
    objects = render(helm, tmp_path, REMOTE_VALUES)
    spec = pod_specs(objects)[f"Deployment/{RELEASE}-telegraf"]
    (container,) = spec["containers"]
    assert container["args"][-2:] == ["--config", "/etc/telegraf/remote.conf"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["remote-ca"]["configMap"]["name"] == "mimir-ca"
    assert env_of(container)["SPARKSCOPE_REMOTE_CA_FILE"]["value"] == "/etc/telegraf-remote-ca/ca.crt"
    assert env_of(container)["SPARKSCOPE_REMOTE_AUTHORIZATION"]["valueFrom"]["secretKeyRef"] == \
        {"name": "mimir-auth", "key": "authorization"}
    default = pod_specs(chart_stack["objects"])[f"Deployment/{RELEASE}-telegraf"]["containers"][0]
    assert "/etc/telegraf/remote.conf" not in default["args"] and "SPARKSCOPE_REMOTE_WRITE_URL" not in env_of(default)

    got: list[tuple[dict, int]] = []

    class Store(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.append((dict(self.headers), len(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    store = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Store)
    threading.Thread(target=store.serve_forever, daemon=True).start()
    authorization = "Basic " + base64.b64encode(b'spark:p"a\\ss $HOME').decode()
    mounts = config_map_files(objects, spec, {**container, "volumeMounts": [
        m for m in container["volumeMounts"] if m["name"] != "remote-ca"]}, tmp_path / "mounts")
    graphite, events = free_port(), free_port()
    env = container_env(container, {**chart_stack["secrets"], "authorization": authorization},
                        INFLUX_URL=chart_stack["url"], GRAPHITE_LISTEN=f"127.0.0.1:{graphite}",
                        EVENTS_LISTEN=f"127.0.0.1:{events}", TELEGRAF_BUFFER_DIR=str(tmp_path / "buffer"),
                        SPARKSCOPE_REMOTE_WRITE_URL=f"http://127.0.0.1:{store.server_address[1]}/api/v1/push",
                        SPARKSCOPE_REMOTE_CA_FILE="")
    argv = [str(ensure_telegraf(load_settings().cache_dir, quiet))] + localized(container["args"][1:], mounts)
    telegraf = start_group(argv, tmp_path / "telegraf.log", env=env)
    try:
        assert wait_until(lambda: influx.ping(f"http://127.0.0.1:{events}"), 30), \
            (tmp_path / "telegraf.log").read_text()[-3000:]

        def sent() -> bool:
            with socket.create_connection(("127.0.0.1", graphite), 5) as conn:
                conn.sendall(f"spark.app-remote-1.1.executor.threadpool.activeTasks 3 {int(time.time())}\n".encode())
            return any(h.get("Authorization") == authorization for h, _ in got)

        assert wait_until(sent, 30, 2), (got, (tmp_path / "telegraf.log").read_text()[-3000:])
        headers, size = next((h, n) for h, n in got if h.get("Authorization") == authorization)
        assert headers["Content-Encoding"] == "snappy" and headers["Content-Type"] == "application/x-protobuf"
        # The tenant's header, by the default name (Go sends it as X-Scope-Orgid: names are case-blind).
        assert {k.lower(): v for k, v in headers.items()}["x-scope-orgid"] == "spark-team.a(1)"
        assert size > 0
    finally:
        stop_group(telegraf.pid, proc=telegraf)
        store.shutdown()
        store.server_close()


def influx_status(url: str, body: bytes | None = None) -> int:
    """The HTTP status of a GET (or a POST of body), without credentials."""
    request = urllib.request.Request(url, data=body, method="GET" if body is None else "POST")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_values_schema_closes_every_object_of_ours():
    """additionalProperties false on every object of the schema except the ones
    that hold Kubernetes' own structures (resources, selectors, affinity ...)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = []

    def walk(node: dict, path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            if node.get("additionalProperties") is not False:
                open_objects.append(path)
            for key, child in node["properties"].items():
                walk(child, f"{path}.{key}")
    walk(schema, "")
    assert open_objects == []
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) == set(schema["properties"])
