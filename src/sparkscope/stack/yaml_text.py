"""Block YAML for the provisioning files, written by hand (no dependency):
mappings and lists in block style, every string double-quoted or, when it
spans lines, a literal block, and comments where a reader needs them."""

from __future__ import annotations

import json
from typing import Any, Optional


def _scalar(value: Any) -> str:
    # Every string is double-quoted (JSON escapes are YAML escapes): no value
    # reads differently in YAML 1.1 (Grafana's parser) and 1.2 (yes, on, 010).
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"no YAML scalar for {value!r}")


def _block(text: str, indent: str) -> list[str]:
    """A multi-line string as a literal block (|-), kept readable."""
    lines = text.split("\n")
    if (text != text.strip("\n") or "\t" in text or any(line != line.rstrip() for line in lines)
            or any(line.startswith(" ") for line in lines)):
        return [_scalar(text)]
    return ["|-", *[(indent + line) if line else "" for line in lines]]


def _emit(value: Any, indent: int, comments: dict[int, str]) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{key}:"
            if isinstance(item, (dict, list)) and item:
                lines.append(head)
                lines.extend(_emit(item, indent + 2, comments))
            elif isinstance(item, str) and "\n" in item:
                block = _block(item, pad + "  ")
                lines.append(f"{head} {block[0]}")
                lines.extend(block[1:])
            else:
                lines.append(f"{head} {_scalar(item) if not isinstance(item, (dict, list)) else json.dumps(item)}")
        return lines
    if isinstance(value, list):
        for item in value:
            if id(item) in comments:
                lines.extend(f"{pad}# {c}".rstrip() for c in comments[id(item)].split("\n"))
            if isinstance(item, (dict, list)) and item:
                inner = _emit(item, indent + 2, comments)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return lines
    return [pad + _scalar(value)]


def to_yaml(document: dict[str, Any], header: str, comments: Optional[dict[int, str]] = None) -> str:
    """The document as block YAML under a comment header; comments: id(list item) -> a
    comment written above that item."""
    top = [f"# {line}".rstrip() for line in header.strip("\n").split("\n")]
    return "\n".join(top + _emit(document, 0, comments or {})) + "\n"
