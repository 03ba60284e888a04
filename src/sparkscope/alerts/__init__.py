"""Grafana alert rules, written as code, provisioned as files.

rules.py holds one entry per rule, thresholds.py every number they use,
provisioning.py turns them into Grafana 12's file-provisioning format, and
stack/contact_points.py (./sparkscope up runs it) writes where notifications go from the contact keys in
.env (none by default). Regenerate after a change:

    .venv/bin/python -m sparkscope.generate

which runs every generator in order, this package's (generate.py) after the dashboards': it writes grafana/provisioning/alerting/sparkscope-rules.yaml,
with stack/yaml_text.py; Grafana reads it at start (the compose image mounts grafana/provisioning/, the native
runner points GF_PATHS_PROVISIONING at it). tests/test_alerts.py fails when
the checked-in file differs from what this package writes, decodes it strictly
with tools/dashcheck, and evaluates every rule on real runs as Grafana would.
Each rule links the live dashboard's panel by its id, read here from the
checked-in dashboards/spark-executors.json: regenerate after the dashboards.
"""
