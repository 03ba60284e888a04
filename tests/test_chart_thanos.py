"""The chart's Thanos store (metricsStore.mode thanos), without a cluster: a
StatefulSet of ingesters under a headless Service, the hashring naming each
ingester's stable DNS name, a router and Query, with the command lines the
native store runs (src/sparkscope/stack/thanos.py) addresses apart; a CA and
certificate the chart makes, covering every name a client reaches; Query's
Basic auth; NetworkPolicies admitting to each port exactly the pods that use
it; Telegraf's second output and Grafana's PromQL datasource and dashboards.
Then the rendered processes run here for real (the cached Thanos and
Telegraf, on loopback ports): Telegraf's remote write reaches both ingesters
through the router over the chart's mTLS, and Query answers with the Secret's
password only.

tests/test_chart.py renders these values among the others (MATRIX): every
object validates with kubeconform for every Kubernetes version, every pod
runs non-root and read-only with resources.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from sparkscope import versions
from sparkscope.process import quiet, start_group, stop_group, wait_until
from sparkscope.provision.go import ensure_telegraf, ensure_thanos
from sparkscope.settings import ROOT, load_settings
from sparkscope.stack import thanos
from sparkscope.store import http, influx
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.schema import APPLICATION, EXECUTOR
from sparkscope_testkit.sandbox import free_port

import test_chart
from test_chart import (MATRIX, NAMESPACE, RELEASE, THANOS_SECRET, container_env, env_of, localized, one, pod_labels,
                        pod_specs, render, selects, strings_in)

# test_chart's fixtures: its helm, and InfluxDB started as the chart's StatefulSet starts it.
helm = test_chart.helm
chart_stack = test_chart.chart_stack

THANOS = "thanos metrics store"
FIVE = "thanos store, 5 ingesters, your storage class and readers, no grafana"
BUCKET = "thanos store with your bucket"
STORE = f"Deployment/{RELEASE}-thanos-store"
COMPACT = f"Deployment/{RELEASE}-thanos-compact"
INGESTERS = f"StatefulSet/{RELEASE}-ingester"
ROUTER = f"Deployment/{RELEASE}-thanos-router"
QUERY = f"Deployment/{RELEASE}-thanos-query"
SUFFIX = f"{NAMESPACE}.svc.cluster.local"
OPENSSL = "/usr/bin/openssl"


@pytest.fixture(scope="module")
def rendered(helm, tmp_path_factory) -> dict[str, list[dict]]:
    tmp = tmp_path_factory.mktemp("rendered-thanos")
    return {name: render(helm, tmp, MATRIX[name]) for name in ("defaults", THANOS, FIVE, BUCKET)}


def args_of(objects: list[dict], kind_name: str) -> list[str]:
    (container,) = pod_specs(objects)[kind_name]["containers"]
    return container["args"]


def flag(argv: list[str], name: str) -> list[str]:
    """The values of --name=value in argv, in order."""
    return [arg.split("=", 1)[1] for arg in argv if arg.startswith(f"--{name}=")]


def thanos_secret(objects: list[dict]) -> dict[str, str]:
    secret = one(objects, "Secret", THANOS_SECRET)
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def ingester_dns_names(objects: list[dict]) -> list[str]:
    """host:port of every pod of the ingesters' StatefulSet, by the DNS name its
    governing Service gives it (<pod>.<service>.<namespace>.svc.<domain>)."""
    statefulset = one(objects, "StatefulSet", f"{RELEASE}-ingester")
    service = one(objects, "Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert selects({"matchLabels": service["spec"]["selector"]}, statefulset["spec"]["template"]["metadata"]["labels"])
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    grpc = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["grpc"]
    name, service_name = statefulset["metadata"]["name"], service["metadata"]["name"]
    return [f"{name}-{i}.{service_name}.{SUFFIX}:{grpc}" for i in range(statefulset["spec"]["replicas"])]


# --- the ring: every ingester by its stable name ----------------------------------------------------------

@pytest.mark.parametrize("values, ingesters, factor", [(THANOS, 3, 2), (FIVE, 5, 3)])
def test_the_hashring_names_exactly_the_statefulsets_pods_by_their_dns_names(rendered, values, ingesters, factor):
    objects = rendered[values]
    names = ingester_dns_names(objects)
    assert len(names) == ingesters
    ring = json.loads(one(objects, "ConfigMap", f"{RELEASE}-thanos-hashring")["data"]["hashring.json"])
    # The native ring's shape (thanos.Layout.hashring), with the pods' names for the loopback addresses.
    native = thanos.layout(20000, ingesters, factor).hashring()
    native[0]["endpoints"] = names
    assert ring == native
    # Query reads every ingester, by the same names; the router writes replicationFactor copies.
    assert flag(args_of(objects, QUERY), "endpoint") == names
    router = args_of(objects, ROUTER)
    assert flag(router, "receive.replication-factor") == [str(factor)]
    # The router reads the ring where its flag says: the ConfigMap, projected there.
    spec = pod_specs(objects)[ROUTER]
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "thanos")
    volume = next(v for v in spec["volumes"] if v["name"] == "thanos")
    items = {f"{mount['mountPath']}/{item['path']}": source.get("configMap", source.get("secret"))["name"]
             for source in volume["projected"]["sources"] for item in source.get("configMap", source.get("secret"))["items"]}
    assert items[flag(router, "receive.hashrings-file")[0]] == f"{RELEASE}-thanos-hashring"


def test_a_replication_factor_the_ingesters_cannot_hold_or_a_retention_thanos_cannot_read_is_refused(helm, tmp_path):
    for values, says in (({"metricsStore": {"mode": "thanos", "thanos": {"ingesters": 2, "replicationFactor": 3}}},
                          "metricsStore.thanos.replicationFactor 3: from 1 to the number of ingesters (2)"),
                         ({"metricsStore": {"mode": "thanos"}, "influxdb": {"retention": "3600000000u"}},
                          'influxdb.retention "3600000000u"'),
                         ({"metricsStore": {"mode": "thanos", "thanos": {"ingesters": 0}}}, "ingesters")):
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        done = helm("template", RELEASE, "-f", str(values_file))
        assert done.returncode != 0 and says in done.stderr, (values, done.stderr)
    # The same retention with the InfluxDB store alone is InfluxDB's business, and taken.
    values_file.write_text(yaml.safe_dump({"influxdb": {"retention": "3600000000u"}}))
    assert helm("template", RELEASE, "-f", str(values_file)).returncode == 0


# --- the command lines: the native store's, addresses apart --------------------------------------------

ADDRESS_FLAGS = ("--grpc-address", "--http-address", "--remote-write.address", "--receive.capnproto-address",
                 "--endpoint")
DATA_FLAGS = ("--tsdb.path", "--data-dir")


def modulo_addresses(argv: list[str]) -> list[str]:
    """argv with every address, the data directory and the replica's name left out."""
    out = []
    for arg in argv:
        name, _, value = arg.partition("=")
        if name in ADDRESS_FLAGS:
            arg = f"{name}=<address>"
        elif name in DATA_FLAGS:
            arg = f"{name}=<data>"
        elif name == "--label" and value.startswith(f"{thanos.REPLICA_LABEL}="):
            arg = f'{name}={thanos.REPLICA_LABEL}="<replica>"'
        out.append(arg)
    return out


@pytest.mark.parametrize("values, ingesters, factor, retention, bucket", [
    (THANOS, 3, 2, "30d", False), (FIVE, 5, 3, "INF", False), (BUCKET, 3, 2, "12h", True)])
def test_each_process_runs_the_native_stores_command_line_but_its_addresses(rendered, values, ingesters, factor,
                                                                              retention, bucket):
    objects = rendered[values]
    plan = thanos.layout(20000, ingesters, factor)
    # The files at the native store's relative paths, under /etc/thanos.
    files = thanos.Files(Path("/etc/thanos"))
    binary = Path("/bin/thanos")  # the image's entrypoint; the chart gives the arguments
    router = thanos.receive_argv(binary, plan, plan.router, files, retention, bucket)[1:]
    assert modulo_addresses(args_of(objects, ROUTER)) == modulo_addresses(router)
    ingester = thanos.receive_argv(binary, plan, plan.ingesters[0], files, retention, bucket)[1:]
    assert modulo_addresses(args_of(objects, INGESTERS)) == modulo_addresses(ingester)
    assert modulo_addresses(args_of(objects, QUERY)) == \
        modulo_addresses(thanos.query_argv(binary, plan, files, bucket)[1:])
    kinds = {f"{o['kind']}/{o['metadata']['name']}" for o in objects}
    assert (STORE in kinds, COMPACT in kinds) == (bucket, bucket)
    if bucket:
        assert modulo_addresses(args_of(objects, STORE)) == modulo_addresses(thanos.store_argv(binary, plan, files)[1:])
        assert modulo_addresses(args_of(objects, COMPACT)) == \
            modulo_addresses(thanos.compact_argv(binary, plan, files, "14d", "180d", "0d")[1:])
        # One compactor per bucket (Thanos' rule), never two even during an upgrade.
        compact = one(objects, "Deployment", f"{RELEASE}-thanos-compact")
        assert compact["spec"]["replicas"] == 1 and compact["spec"]["strategy"] == {"type": "Recreate"}
        # Every process that reads the bucket finds the user's objstore.yml where its flag says.
        for kind_name in (INGESTERS, STORE, COMPACT):
            spec = pod_specs(objects)[kind_name]
            mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "thanos")
            volume = next(v for v in spec["volumes"] if v["name"] == "thanos")
            items = {f"{mount['mountPath']}/{item['path']}": (source["secret"]["name"], item["key"])
                     for source in volume["projected"]["sources"] if "secret" in source
                     for item in source["secret"]["items"]}
            (config,) = flag(args_of(objects, kind_name), "objstore.config-file")
            assert items[config] == ("thanos-bucket", "objstore.yml"), kind_name
    # Each ingester labels its copies with its own pod's name.
    (container,) = pod_specs(objects)[INGESTERS]["containers"]
    assert f'--label={thanos.REPLICA_LABEL}="$(POD_NAME)"' in container["args"]
    assert env_of(container)["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # The image: the version the native store builds.
    images = {c["image"] for k in (INGESTERS, ROUTER, QUERY) for c in pod_specs(objects)[k]["containers"]}
    assert images == {f"quay.io/thanos/thanos:v{versions.THANOS}"}


def test_only_the_ports_other_pods_use_listen_beyond_the_pods_loopback(rendered):
    """What binds 0.0.0.0 is exactly what the container declares; the rest (an
    ingester's remote write, Cap'n Proto, the router's and Query's own gRPC,
    which no other process asks) binds 127.0.0.1."""
    objects = rendered[THANOS]
    declared = {}
    for kind_name in (INGESTERS, ROUTER, QUERY):
        (container,) = pod_specs(objects)[kind_name]["containers"]
        addresses = [a for f in ADDRESS_FLAGS[:4] for a in flag(container["args"], f[2:])]
        everywhere = sorted(int(a.rsplit(":", 1)[1]) for a in addresses if a.startswith("0.0.0.0:"))
        assert all(a.startswith(("0.0.0.0:", "127.0.0.1:")) for a in addresses), addresses
        assert everywhere == sorted(p["containerPort"] for p in container["ports"]), kind_name
        declared[kind_name] = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert declared == {INGESTERS: {"grpc": 10901, "http": 10902},
                        ROUTER: {"http": 10902, "remote-write": 19291},
                        QUERY: {"http": 10902}}


# --- credentials: the certificate, Query's password --------------------------------------------------------

def openssl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([OPENSSL, *args], input=stdin, capture_output=True, text=True, timeout=60)


def write_tls(secret: dict[str, str], into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "stack.crt", "stack.key"):
        (into / key).write_text(secret[key])
    return into


def verifies(tls: Path, ca: Path, *options: str) -> bool:
    done = openssl("verify", "-CAfile", str(ca / "ca.crt"), *options, str(tls / "stack.crt"))
    return done.returncode == 0 and done.stdout.strip().endswith(": OK")


@pytest.mark.skipif(not Path(OPENSSL).exists(), reason="openssl checks the certificate")
def test_the_certificate_is_the_releases_own_and_covers_every_name_a_client_reaches(rendered, tmp_path):
    objects = rendered[THANOS]
    tls = write_tls(thanos_secret(objects), tmp_path / "tls")
    # Signed by the release's CA, for both ends of every connection.
    assert verifies(tls, tls, "-purpose", "sslserver") and verifies(tls, tls, "-purpose", "sslclient")
    key = openssl("pkey", "-in", str(tls / "stack.key"), "-pubout").stdout
    assert key and key == openssl("x509", "-in", str(tls / "stack.crt"), "-noout", "-pubkey").stdout
    # Every name the release's clients dial: each ingester (hashring, Query), the router (Telegraf's URL).
    telegraf = pod_specs(objects)[f"Deployment/{RELEASE}-telegraf"]["containers"][0]
    router_url = urllib.parse.urlsplit(env_of(telegraf)["THANOS_REMOTE_WRITE_URL"]["value"])
    assert env_of(telegraf)["THANOS_TLS_SERVER_NAME"]["value"] == router_url.hostname
    dialed = [address.rsplit(":", 1)[0] for address in ingester_dns_names(objects)] + [router_url.hostname]
    for name in dialed:
        assert verifies(tls, tls, "-verify_hostname", name), name
    # ... and not any name: another namespace's, another release's, a name one label deeper.
    for name in (f"{RELEASE}-ingester-0.{RELEASE}-ingester.other.svc.cluster.local",
                 f"x-ingester-0.x-ingester.{SUFFIX}", f"a.{RELEASE}-ingester-0.{RELEASE}-ingester.{SUFFIX}",
                 f"evil.{SUFFIX}"):
        assert not verifies(tls, tls, "-verify_hostname", name), name
    # Another install's CA does not vouch for it: each release makes its own.
    other = write_tls(thanos_secret(rendered[FIVE]), tmp_path / "other")
    assert not verifies(tls, other)


@pytest.mark.skipif(not Path(OPENSSL).exists(), reason="openssl checks the certificate")
def test_with_a_bucket_the_certificate_covers_the_store_gateway_query_dials(rendered, tmp_path):
    objects = rendered[BUCKET]
    tls = write_tls(thanos_secret(objects), tmp_path / "tls")
    (dialed,) = [e for e in flag(args_of(objects, QUERY), "endpoint") if "-thanos-store." in e]
    assert dialed == f"{RELEASE}-thanos-store.{SUFFIX}:10901"
    assert verifies(tls, tls, "-verify_hostname", dialed.rsplit(":", 1)[0])
    # Without a bucket no store gateway runs, and the certificate names none.
    plain = write_tls(thanos_secret(rendered[THANOS]), tmp_path / "plain")
    assert not verifies(plain, plain, "-verify_hostname", dialed.rsplit(":", 1)[0])


def test_a_bucket_retention_thanos_cannot_read_is_refused_naming_the_value(helm, tmp_path):
    values_file = tmp_path / "values.yaml"
    # The schema refuses it first (helm names the value's path); the template, for a helm told to skip it.
    for retention, says in (({"raw": "30"}, "retention/raw"), ({"oneHour": "1d1y"}, "retention/oneHour")):
        values_file.write_text(yaml.safe_dump({"metricsStore": {"mode": "thanos", "thanos": {"objstore": {
            "existingSecret": "thanos-bucket", "retention": retention}}}}))
        done = helm("template", RELEASE, "-f", str(values_file))
        assert done.returncode != 0 and says in done.stderr, done.stderr
    values_file.write_text(yaml.safe_dump({"metricsStore": {"mode": "thanos", "thanos": {"objstore": {
        "existingSecret": "thanos-bucket", "receiveRetention": "6h"}}}}))
    assert helm("template", RELEASE, "-f", str(values_file)).returncode == 0


def test_querys_password_is_random_kept_in_the_secret_and_only_its_hash_in_the_web_config(rendered):
    secrets = {name: thanos_secret(rendered[name]) for name in (THANOS, FIVE)}
    for name, secret in secrets.items():
        assert set(secret) == {"ca.crt", "stack.crt", "stack.key", "query-password", "web.yml"}
        password = secret["query-password"]
        assert re.fullmatch(r"[A-Za-z0-9]{32}", password)
        (hashed,) = re.findall(r'"(\$2[aby]\$\d\d\$[./A-Za-z0-9]{53})"', secret["web.yml"])
        assert secret["web.yml"] == thanos.web_config_text(hashed)  # the native web config, user sparkscope
        assert password not in secret["web.yml"]
        for obj in rendered[name]:
            if obj["kind"] != "Secret":
                assert password not in "\n".join(strings_in(obj)), f"{obj['kind']}/{obj['metadata']['name']}"
    assert secrets[THANOS]["query-password"] != secrets[FIVE]["query-password"]
    # Every Thanos pod mounts the web config its --http.config names.
    for kind_name in (INGESTERS, ROUTER, QUERY):
        assert flag(args_of(rendered[THANOS], kind_name), "http.config") == ["/etc/thanos/web.yml"]


def test_an_upgrade_keeps_the_certificate_and_password_and_new_names_get_a_new_certificate(helm, tmp_path):
    """Helm's lookup answers only on a cluster; a copy of the chart reads the
    Secret a previous install left from a value instead, through the very
    template: the same names keep the CA, certificate and password (no pod
    restarts, Grafana's password still Query's); another cluster domain
    gets a new CA and certificate for the new names, the password kept."""
    copy_dir = tmp_path / "chart-with-a-cluster"
    shutil.copytree(test_chart.CHART, copy_dir)
    (copy_dir / "values.schema.json").unlink()  # it refuses the extra value below
    template = copy_dir / "templates" / "thanos-secret.yaml"
    lookup = '(lookup "v1" "Secret" .Release.Namespace $name)'
    assert lookup in template.read_text()
    template.write_text(template.read_text().replace(lookup, "(.Values.clusterHas | default dict)"))

    def install(values: dict, previous: dict | None = None) -> tuple[dict, str]:
        objects = render(helm, tmp_path, {**values, **({"clusterHas": previous} if previous else {})},
                         chart=copy_dir)
        # The pods' checksum of the names: a new certificate restarts them.
        pods = one(objects, "StatefulSet", f"{RELEASE}-ingester")["spec"]["template"]["metadata"]
        return one(objects, "Secret", THANOS_SECRET), pods["annotations"]["checksum/tls-names"]

    first, checksum = install(MATRIX[THANOS])
    again, same_checksum = install(MATRIX[THANOS], first)
    assert again["data"] == first["data"] and same_checksum == checksum
    fresh, _ = install(MATRIX[THANOS])  # what helm template does: no cluster, all new
    assert fresh["data"]["ca.crt"] != first["data"]["ca.crt"]
    assert fresh["data"]["query-password"] != first["data"]["query-password"]
    moved, new_checksum = install({**MATRIX[THANOS], "clusterDomain": "example.internal"}, first)
    for key in ("ca.crt", "stack.crt", "stack.key"):
        assert moved["data"][key] != first["data"][key], key
    for key in ("query-password", "web.yml"):
        assert moved["data"][key] == first["data"][key], key
    assert new_checksum != checksum
    assert f"*.{RELEASE}-ingester.{NAMESPACE}.svc.example.internal" in \
        moved["metadata"]["annotations"]["sparkscope.dev/tls-names"].split(",")


# --- network: who reaches each port ----------------------------------------------------------------------

def clients_of(objects: list[dict], service: str) -> dict[str, set[int]]:
    """Pods whose container arguments, environment or mounted ConfigMaps name
    service, or a pod under it (<pod>.<service>...), with a port: kind/name ->
    the ports they dial it on."""
    volumes_text = {}
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            volumes_text[obj["metadata"]["name"]] = "\n".join(strings_in(obj["data"]))
    out = {}
    for kind_name, spec in pod_specs(objects).items():
        config_maps = [s["configMap"]["name"] for v in spec.get("volumes", [])
                       for s in ([v] if "configMap" in v else v.get("projected", {}).get("sources", []))
                       if "configMap" in s]
        text = "\n".join(strings_in(spec["containers"]) + [volumes_text.get(c, "") for c in config_maps])
        ports = {int(port) for host, port in re.findall(r"([a-z0-9][a-z0-9.-]*):(\d+)", text)
                 if service in host.split(".")[:2]}
        if ports:
            out[kind_name] = ports
    return out


@pytest.mark.parametrize("values", [THANOS, FIVE, BUCKET])
def test_network_policies_admit_to_each_thanos_port_exactly_the_pods_that_use_it(rendered, values):
    objects = rendered[values]
    labels = pod_labels(objects)
    peers = MATRIX[values].get("networkPolicy", {}).get("thanosQueryPeers", [])
    servers = [(f"{RELEASE}-ingester", INGESTERS), (f"{RELEASE}-thanos-router", ROUTER),
               (f"{RELEASE}-thanos-query", QUERY)]
    if values == BUCKET:
        servers += [(f"{RELEASE}-thanos-store", STORE), (f"{RELEASE}-thanos-compact", COMPACT)]
        assert set(clients_of(objects, f"{RELEASE}-thanos-store")) == {QUERY}
    for service, server in servers:
        clients = clients_of(objects, service)
        (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"
                     and selects(o["spec"]["podSelector"], labels[server])]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        rules = policy["spec"]["ingress"]
        if not clients and not peers:
            assert rules == [], service
            continue
        (rule,) = rules
        pods = [peer for peer in rule["from"] if set(peer) == {"podSelector"}]
        admitted = {name for name, pod in labels.items() if any(selects(p["podSelector"], pod) for p in pods)}
        assert admitted == set(clients), service
        others = [peer for peer in rule["from"] if set(peer) != {"podSelector"}]
        assert others == (peers if server == QUERY else []), service
        assert {(p["port"], p["protocol"]) for p in rule["ports"]} == \
            {(port, "TCP") for ports in clients.values() for port in ports} | \
            ({(10902, "TCP")} if others else set()), service
    # Who the clients are, spelled out: Telegraf writes to the router, the router and Query reach
    # the ingesters, Grafana (when the release runs one) reads Query.
    assert set(clients_of(objects, f"{RELEASE}-ingester")) == {ROUTER, QUERY}
    assert set(clients_of(objects, f"{RELEASE}-thanos-router")) == {f"Deployment/{RELEASE}-telegraf"}
    grafana = f"Deployment/{RELEASE}-grafana"
    assert set(clients_of(objects, f"{RELEASE}-thanos-query")) == ({grafana} if grafana in labels else set())


# --- Telegraf and Grafana ----------------------------------------------------------------------------------

def test_telegraf_adds_the_thanos_output_with_the_router_and_the_client_certificate(rendered):
    objects = rendered[THANOS]
    spec = pod_specs(objects)[f"Deployment/{RELEASE}-telegraf"]
    (container,) = spec["containers"]
    assert container["args"][-2:] == ["--config", "/etc/telegraf/thanos.conf"]
    conf = one(objects, "ConfigMap", f"{RELEASE}-telegraf")["data"]["thanos.conf"]
    assert conf == (ROOT / "telegraf" / "thanos.conf").read_text()
    env = env_of(container)
    for var in re.findall(r"\$\{(\w+)", conf):  # every variable thanos.conf reads is set
        assert "value" in env[var], var
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = next(v for v in spec["volumes"] if v["name"] == mounts["/etc/telegraf-thanos"])
    assert volume["secret"]["secretName"] == THANOS_SECRET
    assert {f"/etc/telegraf-thanos/{i['path']}" for i in volume["secret"]["items"]} == {
        env["THANOS_TLS_CA"]["value"], env["THANOS_TLS_CERT"]["value"], env["THANOS_TLS_KEY"]["value"]}
    assert "query-password" not in {i["key"] for i in volume["secret"]["items"]}  # Telegraf only writes
    assert env["THANOS_REMOTE_WRITE_URL"]["value"] == \
        f"https://{RELEASE}-thanos-router.{SUFFIX}:19291/api/v1/receive"
    default = pod_specs(rendered["defaults"])[f"Deployment/{RELEASE}-telegraf"]["containers"][0]
    assert "/etc/telegraf/thanos.conf" not in default["args"] and "THANOS_REMOTE_WRITE_URL" not in env_of(default)


def test_grafana_reads_query_with_the_secrets_password_and_gets_the_promql_dashboards(rendered):
    objects = rendered[THANOS]
    config = one(objects, "ConfigMap", f"{RELEASE}-grafana")["data"]
    assert config["thanos.yaml"] == (ROOT / "grafana/thanos/datasources/thanos.yaml").read_text()
    assert config["sparkscope-thanos.yaml"] == (ROOT / "grafana/thanos/dashboards/sparkscope-thanos.yaml").read_text()
    (datasource,) = yaml.safe_load(config["thanos.yaml"])["datasources"]
    spec = pod_specs(objects)[f"Deployment/{RELEASE}-grafana"]
    (container,) = spec["containers"]
    env = env_of(container)
    for text in (config["thanos.yaml"], config["sparkscope-thanos.yaml"]):
        for var in re.findall(r"\$\{(\w+)\}", text):
            assert var in env, var
    assert env["THANOS_QUERY_URL"]["value"] == f"http://{RELEASE}-thanos-query:10902"
    assert env["THANOS_USER"]["value"] == thanos.USER
    assert env["THANOS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": THANOS_SECRET, "key": "query-password"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert [i["key"] for i in volumes[mounts["/etc/grafana/provisioning/datasources"]]["configMap"]["items"]] == \
        ["influxdb.yaml", "thanos.yaml"]
    assert [i["key"] for i in volumes[mounts["/etc/grafana/provisioning/dashboards"]]["configMap"]["items"]] == \
        ["sparkscope.yaml", "sparkscope-thanos.yaml"]
    # The alert rules with those on Spark's metrics in PromQL, under the name Grafana reads, in place
    # of the InfluxDB ones (the same uids: test_alerts_prometheus.py); the InfluxDB store keeps its own.
    assert config["sparkscope-rules-prometheus.yaml"] == \
        (ROOT / "grafana/thanos/alerting/sparkscope-rules-prometheus.yaml").read_text()
    assert volumes[mounts["/etc/grafana/provisioning/alerting"]]["configMap"]["items"] == \
        [{"key": "sparkscope-rules-prometheus.yaml", "path": "sparkscope-rules.yaml"}]
    default_spec = pod_specs(rendered["defaults"])[f"Deployment/{RELEASE}-grafana"]
    default_mounts = {m["mountPath"]: m["name"] for m in default_spec["containers"][0]["volumeMounts"]}
    assert {v["name"]: v for v in default_spec["volumes"]}[default_mounts["/etc/grafana/provisioning/alerting"]][
        "configMap"]["items"] == [{"key": "sparkscope-rules.yaml", "path": "sparkscope-rules.yaml"}]
    # The PromQL dashboards, byte for byte, where the provider reads them, on this datasource's uid.
    folder = env["SPARKSCOPE_PROMETHEUS_DASHBOARDS_DIR"]["value"]
    sources = sorted((ROOT / "dashboards-prometheus").glob("*.json"))
    assert sources
    names = []
    for source in sources:
        config_map = one(objects, "ConfigMap", f"{RELEASE}-dashboard-prometheus-{source.stem}")
        assert config_map["data"][source.name].encode() == source.read_bytes()
        assert datasource["uid"] in {d.get("uid") for d in _datasources(json.loads(source.read_text()))}
        names.append(config_map["metadata"]["name"])
    projected = volumes[mounts[folder]]["projected"]["sources"]
    assert [s["configMap"]["name"] for s in projected] == names
    # The InfluxDB store alone provisions none of it.
    default = one(rendered["defaults"], "ConfigMap", f"{RELEASE}-grafana")["data"]
    assert "thanos.yaml" not in default
    assert not [o for o in rendered["defaults"] if o["metadata"]["name"].startswith(f"{RELEASE}-dashboard-prometheus")]


def _datasources(node) -> list[dict]:
    if isinstance(node, dict):
        found = [node["datasource"]] if isinstance(node.get("datasource"), dict) else []
        return found + [d for v in node.values() for d in _datasources(v)]
    if isinstance(node, list):
        return [d for v in node for d in _datasources(v)]
    return []


# --- for real: the rendered store on this machine ------------------------------------------------------------

REAL = {"metricsStore": {"mode": "thanos", "thanos": {"ingesters": 2, "replicationFactor": 2}}}


def mounted_files(objects: list[dict], spec: dict, container: dict, into: Path) -> dict[str, Path]:
    """Every volume of the container written under into as the kubelet would
    mount it (ConfigMaps, Secrets, projections of both; empty dirs and
    claims as empty dirs): mount path -> local dir."""
    volumes = {v["name"]: v for v in spec["volumes"]}

    def data(kind: str, name: str) -> dict[str, str]:
        obj = one(objects, kind, name)
        if kind == "Secret":
            return {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}
        return obj["data"]

    out = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        sources = []
        if "configMap" in volume:
            sources = [("ConfigMap", volume["configMap"])]
        elif "secret" in volume:
            sources = [("Secret", {**volume["secret"], "name": volume["secret"]["secretName"]})]
        elif "projected" in volume:
            sources = [("ConfigMap", s["configMap"]) if "configMap" in s else ("Secret", s["secret"])
                       for s in volume["projected"]["sources"]]
        local = into / mount["mountPath"].strip("/").replace("/", "_")
        local.mkdir(parents=True)
        for kind, source in sources:
            contents = data(kind, source["name"])
            for item in source.get("items") or [{"key": k, "path": k} for k in contents]:
                (local / item["path"]).parent.mkdir(parents=True, exist_ok=True)
                (local / item["path"]).write_text(contents[item["key"]])
        out[mount["mountPath"]] = local
    return out


def test_the_rendered_store_runs_here_and_stores_what_the_charts_telegraf_sends(helm, chart_stack, tmp_path):
    """Two ingesters, the router and Query with the rendered arguments, files
    and certificate (the pods' addresses swapped for loopback ports; each
    client checks the certificate against the cluster name it would dial),
    and the rendered Telegraf writing to the router: a Spark line sent to
    Telegraf is stored on both ingesters (replication factor 2) and read back
    through Query with the Secret's password; a wrong password and a client
    without the certificate are refused."""
    objects = render(helm, tmp_path, REAL)
    binary = str(ensure_thanos(load_settings().cache_dir, quiet))
    specs = pod_specs(objects)
    names = ingester_dns_names(objects)  # host:10901 of each ingester pod
    pods = {f"{RELEASE}-ingester-{i}": INGESTERS for i in range(len(names))}
    pods.update({"router": ROUTER, "query": QUERY})
    local: dict[tuple[str, str], str] = {}  # (pod, listen flag) -> 127.0.0.1:port
    for pod, kind_name in pods.items():
        for name in ADDRESS_FLAGS[:4]:
            if flag(specs[kind_name]["containers"][0]["args"], name[2:]):
                local[(pod, name)] = f"127.0.0.1:{free_port()}"
    dialed = {address: local[(f"{RELEASE}-ingester-{i}", "--grpc-address")] for i, address in enumerate(names)}
    server_name = names[0].rsplit(":", 1)[0]  # the certificate covers every ingester's name alike
    processes = []
    try:
        for pod, kind_name in pods.items():
            spec = specs[kind_name]
            (container,) = spec["containers"]
            mounts = mounted_files(objects, spec, container, tmp_path / pod)
            if "/etc/thanos" in mounts and (mounts["/etc/thanos"] / "hashring.json").exists():
                ring = mounts["/etc/thanos"] / "hashring.json"
                text = ring.read_text()
                for address, here in dialed.items():
                    text = text.replace(f'"{address}"', f'"{here}"')
                ring.write_text(text)
            argv = []
            for arg in container["args"]:
                name, _, value = arg.partition("=")
                for path, here in mounts.items():
                    if value.startswith(path + "/"):
                        arg = f"{name}={here}{value[len(path):]}"
                if (pod, name) in local:
                    arg = f"{name}={local[(pod, name)]}"
                elif name == "--endpoint":
                    arg = f"{name}={dialed[value]}"
                argv.append(arg.replace("$(POD_NAME)", pod))
            if kind_name == ROUTER:
                argv.append(f"--remote-write.client-server-name={server_name}")
            elif kind_name == QUERY:
                argv.append(f"--grpc-client-server-name={server_name}")
            processes.append(start_group([binary, *argv], tmp_path / f"{pod}.log", env={"PATH": os.environ["PATH"]}))

        secret = thanos_secret(objects)
        query_url = f"http://{local[('query', '--http-address')]}"

        def get(path: str, password: str, **params) -> tuple[int, dict]:
            request = urllib.request.Request(f"{query_url}{path}?{urllib.parse.urlencode(params)}")
            request.add_header("Authorization", http.basic_auth(thanos.USER, password))
            try:
                with http.urlopen(request, timeout=10) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as err:
                return err.code, {}
            except OSError:
                return 0, {}

        logs = lambda: "\n".join(f"{p}: {(tmp_path / f'{p}.log').read_text()[-1500:]}" for p in pods)  # noqa: E731
        # Query takes the Secret's password, checked against the bcrypt hash of the rendered web config.
        assert wait_until(lambda: get("/api/v1/query", secret["query-password"], query="1")[0] == 200, 60), logs()
        assert get("/api/v1/query", "not-" + secret["query-password"], query="1")[0] == 401
        # ... and reaches both ingesters over the chart's mTLS, by their cluster names.
        assert wait_until(lambda: len([s for s in get("/api/v1/stores", secret["query-password"])[1]
                                       .get("data", {}).get("receive", []) if s["lastError"] is None]) == 2, 60), \
            (get("/api/v1/stores", secret["query-password"]), logs())

        # The router refuses a client without the release's certificate.
        router = local[("router", "--remote-write.address")]
        context = ssl.create_default_context(cafile=str(tmp_path / "router" / "etc_thanos" / "tls" / "ca.crt"))
        context.check_hostname = False
        with pytest.raises(OSError) as refused:
            urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(
                context=context)).open(urllib.request.Request(f"https://{router}/api/v1/receive", data=b"x"),
                                       timeout=10)
        assert not isinstance(refused.value, (urllib.error.HTTPError, ConnectionRefusedError)), refused

        # The chart's Telegraf, both configs, its certificate mounted, writing to the router by its
        # Service's name (THANOS_TLS_SERVER_NAME): a Spark line lands on both ingesters.
        spec = specs[f"Deployment/{RELEASE}-telegraf"]
        (container,) = spec["containers"]
        mounts = mounted_files(objects, spec, container, tmp_path / "telegraf")
        graphite, events = free_port(), free_port()
        env = container_env(container, chart_stack["secrets"], INFLUX_URL=chart_stack["url"],
                            GRAPHITE_LISTEN=f"127.0.0.1:{graphite}", EVENTS_LISTEN=f"127.0.0.1:{events}",
                            TELEGRAF_BUFFER_DIR=str(tmp_path / "buffer"),
                            THANOS_REMOTE_WRITE_URL=f"https://{router}/api/v1/receive")
        env = {k: localized([v], mounts)[0] for k, v in env.items()}
        argv = [str(ensure_telegraf(load_settings().cache_dir, quiet))] + localized(container["args"][1:], mounts)
        processes.append(start_group(argv, tmp_path / "telegraf.log", env=env))
        assert wait_until(lambda: influx.ping(f"http://127.0.0.1:{events}"), 30), \
            (tmp_path / "telegraf.log").read_text()[-3000:]
        app = "app-chart-thanos-1"
        name = series_name("threadpool.activeTasks", "value")
        selector = f'{name}{{{label_name(APPLICATION)}="{app}", {label_name(EXECUTOR)}="1"}}'

        def replicas() -> set[str]:
            with socket.create_connection(("127.0.0.1", graphite), 5) as conn:
                conn.sendall(f"spark.{app}.1.executor.threadpool.activeTasks 3 {int(time.time())}\n".encode())
            _, body = get("/api/v1/query", secret["query-password"], query=selector, dedup="false")
            return {r["metric"].get(thanos.REPLICA_LABEL) for r in body.get("data", {}).get("result", [])}

        assert wait_until(lambda: replicas() == {f"{RELEASE}-ingester-0", f"{RELEASE}-ingester-1"}, 60, 2), \
            (replicas(), (tmp_path / "telegraf.log").read_text()[-3000:], logs())
        status, body = get("/api/v1/query", secret["query-password"], query=selector)
        assert status == 200 and [float(r["value"][1]) for r in body["data"]["result"]] == [3.0]  # one copy, merged
        assert "x509" not in (tmp_path / "telegraf.log").read_text()
    finally:
        for proc in reversed(processes):
            stop_group(proc.pid, proc=proc)
