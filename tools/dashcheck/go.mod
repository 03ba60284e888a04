module sparkscope.dev/tools/dashcheck

go 1.21

require github.com/grafana/grafana-foundation-sdk/go v0.0.22

require gopkg.in/yaml.v3 v3.0.1
