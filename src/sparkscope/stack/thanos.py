"""The Thanos metrics store (SPARKSCOPE_METRICS_STORE=thanos): what runs, on
which ports, with which files, for the native backend.

    Telegraf --remote write--> router --gRPC, replicated--> ingester 1..N <--gRPC-- Query <--HTTP-- you

- the router (`thanos receive` without a TSDB of its own) takes Prometheus
  remote write from Telegraf and sends each series to replication_factor of
  the ingesters, chosen by the hashring (hashring.json);
- each ingester (`thanos receive` with no hashring: it stores what it is
  sent) keeps a TSDB under the state dir and serves it over gRPC;
- Query answers PromQL over every ingester, merging the replicas (each
  ingester labels its series receive_replica="<n>"; Query removes the label
  and keeps one copy).

With a replication factor of 2 a write succeeds once one ingester took it
(Thanos' quorum for 2), so with one ingester down every series still lands.

Everything binds 127.0.0.1, and every port asks for credentials: the HTTP
ports (Query's API, each receive's status page) for Basic auth (Thanos' web
config, --http.config, a bcrypt hash of the password in <state>/thanos/
password, 0600); the remote-write and gRPC ports for a client certificate
signed by the stack's own CA, which only this user holds (<state>/thanos/tls,
0700). One port cannot: Thanos 0.42 always opens a Cap'n Proto replication
listener, write only, with no authentication; it binds 127.0.0.1 and is
unused (replication goes over gRPC, --receive.replication-protocol=protobuf).

Standard library only; the native backend (native.py) starts and supervises
the processes this module describes.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

STORE_NAME = "thanos"
ROUTER = "thanos-router"
QUERY = "thanos-query"
USER = "sparkscope"  # the Basic auth user of Query's and every receive's HTTP port
# Each ingester adds this label; Query drops it and merges the copies (--query.replica-label).
REPLICA_LABEL = "receive_replica"
TENANT = "sparkscope"
# Port offsets within a process's block of ten, from the base port (THANOS_PORT).
GRPC, HTTP, REMOTE_WRITE, CAPNPROTO = 1, 2, 3, 4
PORTS_PER_PROCESS = 10


class ThanosConfigError(ValueError):
    """Settings the Thanos store cannot run with; the message says which and why."""


@dataclass(frozen=True)
class Process:
    """One Thanos process: its service name and its ports on host."""
    name: str
    host: str
    grpc: int
    http: int
    remote_write: int = 0  # receive only
    capnproto: int = 0  # receive only

    @property
    def grpc_address(self) -> str:
        return f"{self.host}:{self.grpc}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http}"

    @property
    def remote_write_url(self) -> str:
        return f"https://{self.host}:{self.remote_write}/api/v1/receive"

    def ports(self) -> list[int]:
        return [port for port in (self.grpc, self.http, self.remote_write, self.capnproto) if port]


@dataclass(frozen=True)
class Layout:
    """Where every Thanos process of one stack listens."""
    router: Process
    ingesters: tuple[Process, ...]
    query: Process
    replication_factor: int

    @property
    def processes(self) -> tuple[Process, ...]:
        """In the order they start: ingesters first (the router sends to them), Query last."""
        return (*self.ingesters, self.router, self.query)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.processes)

    def by_name(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    def hashring(self) -> list[dict]:
        """The router's hashring file: every ingester's gRPC address, one ring."""
        return [{"hashring": "default", "tenants": [], "endpoints": [p.grpc_address for p in self.ingesters]}]


def ingester_name(index: int) -> str:
    return f"thanos-receive-{index}"


def layout(base_port: int, ingesters: int = 3, replication_factor: int = 2, host: str = "127.0.0.1") -> Layout:
    """The ports of every process: blocks of ten from base_port, ingester n
    (1..) in block n, the router in block 0, Query after the last ingester.
    base_port 10900: router 10901-10904, ingester 1 10911-10914, ..., Query 10941-10942."""
    if ingesters < 1:
        raise ThanosConfigError(f"THANOS_INGESTERS={ingesters}: at least 1 ingester")
    if not 1 <= replication_factor <= ingesters:
        raise ThanosConfigError(f"THANOS_REPLICATION_FACTOR={replication_factor}: from 1 to the number of "
                                f"ingesters ({ingesters}); each series is stored on that many")
    last = base_port + PORTS_PER_PROCESS * (ingesters + 1) + HTTP
    if base_port < 1024 or last > 65535:
        raise ThanosConfigError(f"THANOS_PORT={base_port}: its {ingesters + 2} processes take ports "
                                f"{base_port + 1}-{last}; choose a base from 1024 to {65535 - (last - base_port)}")

    def block(index: int, name: str, receive: bool) -> Process:
        start = base_port + PORTS_PER_PROCESS * index
        return Process(name, host, start + GRPC, start + HTTP,
                       start + REMOTE_WRITE if receive else 0, start + CAPNPROTO if receive else 0)

    return Layout(router=block(0, ROUTER, True),
                  ingesters=tuple(block(n, ingester_name(n), True) for n in range(1, ingesters + 1)),
                  query=block(ingesters + 1, QUERY, False),
                  replication_factor=replication_factor)


# --- the files: certificates, password, web config, hashring ---------------------------

@dataclass(frozen=True)
class Files:
    """What every Thanos process (and Telegraf, and whoever queries) reads, under <state>/thanos."""
    folder: Path

    @property
    def tls(self) -> Path:
        return self.folder / "tls"

    @property
    def ca(self) -> Path:
        return self.tls / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.tls / "stack.crt"

    @property
    def key(self) -> Path:
        return self.tls / "stack.key"

    @property
    def password_file(self) -> Path:
        return self.folder / "password"

    @property
    def web_config(self) -> Path:
        return self.folder / "web.yml"

    @property
    def hashring(self) -> Path:
        return self.folder / "hashring.json"

    def data(self, name: str) -> Path:
        return self.folder / "data" / name

    def password(self) -> str:
        return self.password_file.read_text().strip()


def _write_private(path: Path, text: str) -> None:
    """path holds text, mode 0600 from its first byte, replaced whole (never half written)."""
    tmp = path.with_name(f".{path.name}.new")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(text)
    os.replace(tmp, path)


def _openssl(args: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(["openssl", *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    except FileNotFoundError:
        raise ThanosConfigError("the Thanos store needs openssl to make its certificates: install it "
                                "(Debian: apt-get install openssl)") from None
    except subprocess.TimeoutExpired:
        raise ThanosConfigError(f"openssl {args[0]} did not finish within 60 s") from None
    if done.returncode != 0:
        raise ThanosConfigError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}")


def ensure_tls(files: Files, host: str) -> None:
    """A CA of this stack's own and one certificate it signed, for host, valid
    as server and as client: every Thanos process serves with it and asks its
    clients for it (Telegraf, Query, the router). Made once; the keys are
    0600 in a 0700 folder, so only this user can present them."""
    files.tls.mkdir(mode=0o700, parents=True, exist_ok=True)
    files.tls.chmod(0o700)
    if files.ca.exists() and files.cert.exists() and files.key.exists():
        return
    old = os.umask(0o077)
    try:
        ca_key = files.tls / "ca.key"
        _openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-days", "3650", "-subj", "/CN=sparkscope thanos CA", "-keyout", ca_key.name,
                  "-out", files.ca.name, "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"], files.tls)
        _openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-subj", "/CN=sparkscope thanos", "-keyout", files.key.name, "-out", "stack.csr"], files.tls)
        extensions = files.tls / "stack.ext"
        extensions.write_text(f"subjectAltName=IP:{host},DNS:localhost\nbasicConstraints=CA:FALSE\n"
                              "keyUsage=critical,digitalSignature,keyEncipherment\n"
                              "extendedKeyUsage=serverAuth,clientAuth\n")
        _openssl(["x509", "-req", "-in", "stack.csr", "-CA", files.ca.name, "-CAkey", ca_key.name,
                  "-CAcreateserial", "-days", "3650", "-extfile", extensions.name, "-out", files.cert.name],
                 files.tls)
        for leftover in ("stack.csr", "stack.ext", "ca.srl"):
            (files.tls / leftover).unlink(missing_ok=True)
    finally:
        os.umask(old)


def web_config_text(password_hash: str) -> str:
    """Thanos' --http.config (the Prometheus exporter toolkit's web config): Basic auth, one user."""
    if not password_hash.startswith("$2"):
        raise ThanosConfigError("the web config needs a bcrypt hash of the password, not the password")
    return f'basic_auth_users:\n  {USER}: "{password_hash}"\n'


def ensure_password(files: Files, bcrypt_hash: Path) -> None:
    """A random password (0600) and the web config with its bcrypt hash, made
    by bcrypt-hash (built beside thanos) from the password on its stdin:
    never in argv. Kept across restarts; the web config follows the password."""
    files.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    files.folder.chmod(0o700)
    if not files.password_file.exists():
        _write_private(files.password_file, secrets.token_urlsafe(24) + "\n")
    stamp = files.folder / ".web.yml.for"
    # The web config is remade only when the password changed (a hash takes ~0.1 s of CPU).
    digest = _digest(files.password())
    if files.web_config.exists() and stamp.exists() and stamp.read_text() == digest:
        return
    done = subprocess.run([str(bcrypt_hash)], input=files.password() + "\n", capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise ThanosConfigError(f"bcrypt-hash failed: {done.stderr.strip()}")
    _write_private(files.web_config, web_config_text(done.stdout.strip()))
    _write_private(stamp, digest)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_hashring(files: Files, plan: Layout) -> None:
    files.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(files.hashring, json.dumps(plan.hashring(), indent=2) + "\n")


# --- the command lines ----------------------------------------------------------------

def _tls_server(prefix: str, files: Files) -> list[str]:
    """Serve TLS and require a client certificate signed by the stack's CA."""
    return [f"--{prefix}-cert={files.cert}", f"--{prefix}-key={files.key}", f"--{prefix}-client-ca={files.ca}"]


def _retention(retention: str) -> str:
    """SPARKSCOPE_RETENTION as Thanos' TSDB retention (the same units but INF, which is Thanos' 0: keep all)."""
    return "0d" if retention.upper() == "INF" else retention


def receive_argv(thanos: Path, plan: Layout, process: Process, files: Files, retention: str) -> list[str]:
    """`thanos receive` as the router (process is plan.router: the hashring, no
    TSDB kept) or as an ingester (a TSDB, no hashring: it stores what it is sent)."""
    argv = [str(thanos), "receive", "--log.level=info", "--log.format=logfmt",
            f"--grpc-address={process.grpc_address}", f"--http-address={process.host}:{process.http}",
            f"--remote-write.address={process.host}:{process.remote_write}",
            f"--receive.capnproto-address={process.host}:{process.capnproto}",
            f"--http.config={files.web_config}",
            *_tls_server("grpc-server-tls", files), *_tls_server("remote-write.server-tls", files),
            f"--receive.default-tenant-id={TENANT}",
            f"--tsdb.path={files.data(process.name)}"]
    if process is plan.router:
        # Receive refuses to start without an external label; the router keeps no
        # blocks, so its label marks nothing stored (the ingesters label theirs).
        return argv + ['--label=receive_role="router"',
                       f"--receive.hashrings-file={files.hashring}", "--receive.hashrings-file-refresh-interval=1m",
                       f"--receive.replication-factor={plan.replication_factor}",
                       "--receive.replication-protocol=protobuf",
                       # The router reaches the ingesters with the stack's certificate.
                       "--remote-write.client-tls-secure", f"--remote-write.client-tls-cert={files.cert}",
                       f"--remote-write.client-tls-key={files.key}", f"--remote-write.client-tls-ca={files.ca}"]
    index = plan.ingesters.index(process) + 1
    return argv + [f'--label={REPLICA_LABEL}="{index}"', f"--tsdb.retention={_retention(retention)}"]


def query_argv(thanos: Path, plan: Layout, files: Files) -> list[str]:
    query = plan.query
    return [str(thanos), "query", "--log.level=info", "--log.format=logfmt",
            f"--grpc-address={query.grpc_address}", f"--http-address={query.host}:{query.http}",
            f"--http.config={files.web_config}", *_tls_server("grpc-server-tls", files),
            *[f"--endpoint={p.grpc_address}" for p in plan.ingesters],
            "--grpc-client-tls-secure", f"--grpc-client-tls-cert={files.cert}",
            f"--grpc-client-tls-key={files.key}", f"--grpc-client-tls-ca={files.ca}",
            f"--query.replica-label={REPLICA_LABEL}"]


def telegraf_env(plan: Layout, files: Files) -> dict[str, str]:
    """What telegraf/thanos.conf reads: where the router takes remote write, and the client certificate."""
    return {"THANOS_REMOTE_WRITE_URL": plan.router.remote_write_url, "THANOS_TLS_CA": str(files.ca),
            "THANOS_TLS_CERT": str(files.cert), "THANOS_TLS_KEY": str(files.key)}
