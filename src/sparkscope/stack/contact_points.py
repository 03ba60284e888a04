"""Where Grafana sends alerts: contact points from the ALERT_* keys of .env,
none by default.

    ALERT_WEBHOOK_URL    any HTTP endpoint: Grafana POSTs its webhook JSON there
    ALERT_SLACK_URL      a Slack incoming webhook, or a Slack-compatible one
                         (Mattermost, Rocket.Chat)
    ALERT_EMAIL_TO       addresses, separated by ';'; needs an SMTP server:
    ALERT_SMTP_ENABLED   true, and ALERT_SMTP_HOST (host:port), ALERT_SMTP_USER,
                         ALERT_SMTP_PASSWORD, ALERT_SMTP_FROM

`./sparkscope up` (either backend) calls sync() before Grafana starts: with
a key set it writes grafana/provisioning/alerting/sparkscope-contact-points.yaml,
one contact point "sparkscope" with a receiver per key and the notification
policy that sends every alert there, grouped per rule and application; with
none it removes that file. Grafana refuses to start on a contact point with
an empty URL, which is why the file exists only when a key is set. The file
names the keys (${ALERT_WEBHOOK_URL} ...), never their values: Grafana reads
them from its environment (docker-compose.yml, or the native runner:
grafana_env()), so the secrets stay in .env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from sparkscope.stack.yaml_text import to_yaml

CONTACT_POINT = "sparkscope"
FILE = "sparkscope-contact-points.yaml"
KEYS = ("ALERT_WEBHOOK_URL", "ALERT_SLACK_URL", "ALERT_EMAIL_TO", "ALERT_SMTP_ENABLED", "ALERT_SMTP_HOST",
        "ALERT_SMTP_USER", "ALERT_SMTP_PASSWORD", "ALERT_SMTP_FROM")
# Grafana's SMTP settings from the keys above (Grafana reads GF_<SECTION>_<KEY>).
SMTP_ENV = {"ALERT_SMTP_ENABLED": "GF_SMTP_ENABLED", "ALERT_SMTP_HOST": "GF_SMTP_HOST",
            "ALERT_SMTP_USER": "GF_SMTP_USER", "ALERT_SMTP_PASSWORD": "GF_SMTP_PASSWORD",
            "ALERT_SMTP_FROM": "GF_SMTP_FROM_ADDRESS"}
# key -> (receiver type, the setting it fills, fixed settings)
RECEIVERS = {
    "ALERT_WEBHOOK_URL": ("webhook", "url", {"httpMethod": "POST"}),
    "ALERT_SLACK_URL": ("slack", "url", {}),
    "ALERT_EMAIL_TO": ("email", "addresses", {"singleEmail": False}),
}
HEADER = """\
Where Grafana sends sparkscope's alerts: written by ./sparkscope up from the
ALERT_* keys of .env (src/sparkscope/stack/contact_points.py), removed when
none is set. Do not edit: change .env and run ./sparkscope up again.
Grafana replaces each ${ALERT_...} with its environment's value at start.
The policy below replaces Grafana's notification policy tree.
"""


def contacts(values: dict[str, str]) -> dict[str, str]:
    """The ALERT_* keys that are set (from .env or the environment, as settings reads them)."""
    return {key: values[key].strip() for key in KEYS if values.get(key, "").strip()}


def document(values: dict[str, str]) -> Optional[dict[str, Any]]:
    """The provisioning file's content, or None when no receiver key is set."""
    given = contacts(values)
    receivers = []
    for key, (kind, setting, fixed) in RECEIVERS.items():
        if key in given:
            uid = f"sparkscope-{kind}"
            receivers.append({"uid": uid, "type": kind, "settings": {setting: "${" + key + "}", **fixed},
                              "disableResolveMessage": False})
    if not receivers:
        return None
    return {
        "apiVersion": 1,
        "contactPoints": [{"orgId": 1, "name": CONTACT_POINT, "receivers": receivers}],
        "policies": [{"orgId": 1, "receiver": CONTACT_POINT,
                      # One message per rule and run; Grafana requires these two labels first.
                      "group_by": ["grafana_folder", "alertname", "applicationid"],
                      "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}],
    }


def render(values: dict[str, str]) -> Optional[str]:
    doc = document(values)
    return None if doc is None else to_yaml(doc, HEADER)


def warnings(values: dict[str, str]) -> list[str]:
    given = contacts(values)
    if "ALERT_EMAIL_TO" in given and (given.get("ALERT_SMTP_ENABLED", "").lower() != "true"
                                      or "ALERT_SMTP_HOST" not in given):
        return ["ALERT_EMAIL_TO is set but Grafana has no SMTP server: set ALERT_SMTP_ENABLED=true and "
                "ALERT_SMTP_HOST (host:port), ALERT_SMTP_USER, ALERT_SMTP_PASSWORD, ALERT_SMTP_FROM in .env"]
    return []


def grafana_env(values: dict[str, str]) -> dict[str, str]:
    """The environment Grafana needs for the file above (the native runner; compose
    passes the same from .env in docker-compose.yml)."""
    given = contacts(values)
    env = {key: given[key] for key in RECEIVERS if key in given}
    env.update({SMTP_ENV[key]: given[key] for key in SMTP_ENV if key in given})
    return env


def sync(alerting_dir: Path, values: dict[str, str], progress: Callable[[str], None] = print) -> Optional[Path]:
    """Write the contact points file when a receiver key is set, remove it when none is.
    Returns the file written, or None."""
    path = alerting_dir / FILE
    text = render(values)
    if text is None:
        if path.exists():
            path.unlink()
            progress(f"alerts    no ALERT_* contact key in .env: removed {path}")
        return None
    for line in warnings(values):
        progress(f"alerts    {line}")
    if not path.exists() or path.read_text() != text:
        alerting_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        kinds = ", ".join(RECEIVERS[k][0] for k in RECEIVERS if k in contacts(values))
        progress(f"alerts    notifications go to {kinds} (contact point {CONTACT_POINT!r}, {path})")
    return path
