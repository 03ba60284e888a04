"""Prometheus remote write (1.0) from Python, standard library only: the
WriteRequest protobuf and its snappy framing written by hand, enough for a
test to send chosen samples at chosen times (Telegraf stamps its own).

Snappy's block format allows a body of literals only (no compression), which
every decoder reads: a varint of the length, then literal elements."""

from __future__ import annotations

import ssl
import struct
import urllib.request
from pathlib import Path


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # wire type 2: length-delimited
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def write_request(series: list[tuple[dict[str, str], list[tuple[int, float]]]]) -> bytes:
    """prometheus.WriteRequest: timeseries (1) of labels (1: name 1, value 2), sorted by
    name, and samples (2: value 1 as a double, timestamp 2 in ms)."""
    out = b""
    for labels, samples in series:
        body = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in sorted(labels.items()))
        body += b"".join(_field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(ms))
                         for ms, value in samples)
        out += _field(1, body)
    return out


def snappy_block(data: bytes) -> bytes:
    """data in snappy's block format, as literals of at most 65536 bytes."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 65536):
        chunk = data[start:start + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def send(url: str, series: list[tuple[dict[str, str], list[tuple[int, float]]]], ca: Path, cert: Path,
         key: Path, timeout: float = 30) -> int:
    """POST the samples to a remote-write endpoint over mTLS; returns the HTTP status."""
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(cert), str(key))
    request = urllib.request.Request(url, data=snappy_block(write_request(series)), method="POST", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0"})
    with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
        return resp.status
