"""The Grafana versions sparkscope runs and checks its dashboards against, in
one place: docker-compose.yml, the chart, the fakes and the README must say
the same (tests/test_grafana_versions.py). docs/grafana.md says where each
number was confirmed."""

# The image compose and the chart pin: the newest 13.x patch confirmed
# (13.2.2, 2026-09-15). Never 13.0.0: that tag was pulled.
GRAFANA = "13.2.2"
# The last 12.x line, supported by Grafana until 2027-05-24: the dashboards are
# checked under its rules too, and the native runner accepts it.
GRAFANA_12 = "12.4.11"
