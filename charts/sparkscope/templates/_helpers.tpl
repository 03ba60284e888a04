{{/* Object names start with this: the release name unless fullnameOverride.
At most 40 characters, so "<name>-influxdb-headless" stays a DNS label. */}}
{{- define "sparkscope.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "sparkscope.labels" -}}
app.kubernetes.io/name: sparkscope
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Labels that pick one part's pods: (dict "root" $ "component" "telegraf"). */}}
{{- define "sparkscope.selectorLabels" -}}
app.kubernetes.io/name: sparkscope
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sparkscope.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "sparkscope.fullname" .)) -}}
{{- end -}}

{{/* An environment variable from the Secret: (dict "root" $ "name" "INFLUX_PASSWORD" "key" "influxdb-write-password"). */}}
{{- define "sparkscope.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sparkscope.secretName" .root }}
      key: {{ .key }}
{{- end -}}

{{- define "sparkscope.influxURL" -}}
http://{{ include "sparkscope.fullname" . }}-influxdb:{{ .Values.influxdb.service.port | int64 }}
{{- end -}}

{{/* Telegraf's Service as Spark reaches it from any namespace. */}}
{{- define "sparkscope.telegrafHost" -}}
{{ include "sparkscope.fullname" . }}-telegraf.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{- define "sparkscope.image" -}}
{{ .repository }}:{{ .tag }}
{{- end -}}

{{/* Spark's settings, as `./sparkscope conf` makes them (src/sparkscope/spark/conf.py):
spark-conf/spark-defaults.conf in file order with the Graphite sink pointed at
the Telegraf Service, then the annotator's. A JSON list of [key, value]. */}}
{{- define "sparkscope.sparkProperties" -}}
{{- $sink := "spark.metrics.conf.*.sink.graphite." -}}
{{- $override := dict (print $sink "host") (include "sparkscope.telegrafHost" .) (print $sink "port") (toString (int64 .Values.telegraf.ports.graphite)) (print $sink "prefix") .Values.spark.prefix (print $sink "period") (toString (int64 .Values.spark.periodSeconds)) -}}
{{- $props := list -}}
{{- $seen := dict -}}
{{- range $raw := splitList "\n" (.Files.Get "files/spark-conf/spark-defaults.conf") -}}
{{- $line := trim $raw -}}
{{- if and $line (not (hasPrefix "#" $line)) (not (hasPrefix "!" $line)) -}}
{{- if not (regexMatch "^[^\\s=:]+\\s*[=:\\s]\\s*.*$" $line) -}}
{{- fail (printf "files/spark-conf/spark-defaults.conf: not a 'key=value' line: %s" $line) -}}
{{- end -}}
{{- $key := regexReplaceAll "^([^\\s=:]+)\\s*[=:\\s]\\s*(.*)$" $line "${1}" -}}
{{- $value := regexReplaceAll "^([^\\s=:]+)\\s*[=:\\s]\\s*(.*)$" $line "${2}" -}}
{{- $_ := set $seen $key true -}}
{{- /* The sink's filter sends only what Telegraf keeps: with unreadMetrics pass, everything. */ -}}
{{- if not (and (eq $key (print $sink "regex")) (eq $.Values.telegraf.unreadMetrics "pass")) -}}
{{- $props = append $props (list $key (get $override $key | default $value)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := list (print $sink "host") (print $sink "port") (print $sink "prefix") (print $sink "period") -}}
{{- if not (hasKey $seen $key) -}}
{{- $props = append $props (list $key (get $override $key)) -}}
{{- end -}}
{{- end -}}
{{- if .Values.spark.annotator.enabled -}}
{{- /* As annotator_properties in src/sparkscope/spark/conf.py (tests/test_chart.py compares):
the listener, the profiler plugin (idle until ./sparkscope profile asks) and the
container memory plugin (each pod's cgroup limit, working set and OOM kills). */ -}}
{{- /* The jar: a path in the image (local://) on the driver's and executors' class
path, fetched by no executor; a URL in spark.jars (jar_properties in conf.py). */ -}}
{{- $jar := .Values.spark.annotator.jar -}}
{{- $path := $jar -}}
{{- if hasPrefix "local://" $jar -}}
{{- $path = trimPrefix "local://" $jar -}}
{{- else if hasPrefix "file://" $jar -}}
{{- $path = trimPrefix "file://" $jar -}}
{{- end -}}
{{- if contains "://" $path -}}
{{- $props = append $props (list "spark.jars" $jar) -}}
{{- else -}}
{{- $props = append $props (list "spark.driver.extraClassPath" $path) -}}
{{- $props = append $props (list "spark.executor.extraClassPath" $path) -}}
{{- end -}}
{{- $props = append $props (list "spark.plugins" "dev.sparkscope.annotator.ListenerPlugin,dev.sparkscope.annotator.ProfilerPlugin,dev.sparkscope.annotator.ContainerMemoryPlugin") -}}
{{- $props = append $props (list "spark.sparkscope.influx.url" (printf "http://%s:%d" (include "sparkscope.telegrafHost" .) (int64 .Values.telegraf.ports.events))) -}}
{{- if .Values.events.auth -}}
{{- $props = append $props (list "spark.sparkscope.influx.username" .Values.events.user) -}}
{{- /* The password by name only: Spark writes its settings into the driver's ConfigMap;
the driver and executor pods get the value from the Secret as an environment variable. */ -}}
{{- $ref := printf "%s:events-password" (include "sparkscope.secretName" .) -}}
{{- $props = append $props (list "spark.sparkscope.influx.passwordEnv" "SPARKSCOPE_EVENTS_PASSWORD") -}}
{{- $props = append $props (list "spark.kubernetes.driver.secretKeyRef.SPARKSCOPE_EVENTS_PASSWORD" $ref) -}}
{{- $props = append $props (list "spark.kubernetes.executor.secretKeyRef.SPARKSCOPE_EVENTS_PASSWORD" $ref) -}}
{{- end -}}
{{- end -}}
{{- toJson $props -}}
{{- end -}}

{{/* A shell word as Python's shlex.quote writes it (what ./sparkscope conf prints). */}}
{{- define "sparkscope.shellQuote" -}}
{{- if regexMatch "^[A-Za-z0-9_@%+=:,./-]+$" . -}}
{{ . }}
{{- else -}}
'{{ replace "'" "'\"'\"'" . }}'
{{- end -}}
{{- end -}}

{{/* spark-submit flags, one a line: --conf k=v ... as ./sparkscope conf prints them
(spark.jars as --jars). The events password is not among them: the pods read it from the Secret. */}}
{{- define "sparkscope.submitFlags" -}}
{{- $flags := list -}}
{{- range $kv := include "sparkscope.sparkProperties" . | fromJsonArray -}}
{{- if eq (index $kv 0) "spark.jars" -}}
{{- $flags = append $flags (printf "--jars %s" (include "sparkscope.shellQuote" (index $kv 1))) -}}
{{- else -}}
{{- $flags = append $flags (printf "--conf %s" (include "sparkscope.shellQuote" (printf "%s=%s" (index $kv 0) (index $kv 1)))) -}}
{{- end -}}
{{- end -}}
{{- join "\n" $flags -}}
{{- end -}}

{{/* What both host probes read: their node's name as the host tag (Telegraf
runs on another node and would tag them with its own), and the events
listener's user and password. */}}
{{- define "sparkscope.probeEnv" -}}
- name: SPARKSCOPE_HOST
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- if .Values.events.auth }}
- name: SPARKSCOPE_EVENTS_USER
  value: {{ .Values.events.user | quote }}
{{ include "sparkscope.secretEnv" (dict "root" . "name" "SPARKSCOPE_EVENTS_PASSWORD" "key" "events-password") }}
{{- end }}
{{- end -}}

{{/* metricsStore.mode, checked: influxdb, remote with its write URL, or thanos
with a replication factor its ingesters can hold and a retention Thanos reads. */}}
{{- define "sparkscope.metricsStore" -}}
{{- $m := .Values.metricsStore -}}
{{- if not (has $m.mode (list "influxdb" "remote" "thanos")) -}}
{{- fail (printf "metricsStore.mode %q: use influxdb, remote or thanos" $m.mode) -}}
{{- end -}}
{{- if eq $m.mode "thanos" -}}
{{- $t := $m.thanos -}}
{{- if or (lt (int64 $t.replicationFactor) 1) (gt (int64 $t.replicationFactor) (int64 $t.ingesters)) -}}
{{- fail (printf "metricsStore.thanos.replicationFactor %v: from 1 to the number of ingesters (%v); each series is stored on that many" $t.replicationFactor $t.ingesters) -}}
{{- end -}}
{{- with $t.objstore.existingSecret -}}
{{- $duration := "^([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$" -}}
{{- range $key, $value := dict "receiveRetention" $t.objstore.receiveRetention "retention.raw" $t.objstore.retention.raw "retention.fiveMinutes" $t.objstore.retention.fiveMinutes "retention.oneHour" $t.objstore.retention.oneHour -}}
{{- if or (not (regexMatch $duration (toString $value))) (eq (toString $value) "") -}}
{{- fail (printf "metricsStore.thanos.objstore.%s %q: a duration as Thanos reads them, largest unit first (36h, 30d, 1y2w; 0d keeps forever)" $key (toString $value)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if regexMatch "[0-9](ns|u)" .Values.influxdb.retention -}}
{{- fail (printf "influxdb.retention %q: the Thanos store keeps points as long, and Thanos takes ms, s, m, h, d, w (not ns or u)" .Values.influxdb.retention) -}}
{{- end -}}
{{- end -}}
{{- if eq $m.mode "remote" -}}
{{- if not (regexMatch "^https?://[^\\s\"\\\\]+$" $m.remote.writeURL) -}}
{{- fail (printf "metricsStore.remote.writeURL %q: the http(s) URL of your store's remote-write endpoint, without quotes or spaces" $m.remote.writeURL) -}}
{{- end -}}
{{- if regexMatch "^https?://[^/]*@" $m.remote.writeURL -}}
{{- fail "metricsStore.remote.writeURL: no credentials in the URL; put the Authorization header in metricsStore.remote.authSecret" -}}
{{- end -}}
{{- end -}}
{{- $m.mode -}}
{{- end -}}

{{/* The Thanos store (metricsStore.mode thanos): names, ports, what every
process reads. The command lines are those src/sparkscope/stack/thanos.py
gives the native store (receive_argv, query_argv), addresses apart; the files
sit under /etc/thanos as under the native <state>/thanos (tls/ca.crt,
tls/stack.crt, tls/stack.key, web.yml, hashring.json): tests/test_chart.py
compares the two. */}}
{{- define "sparkscope.thanos.ingester" -}}
{{ include "sparkscope.fullname" . }}-ingester
{{- end -}}

{{- define "sparkscope.thanos.router" -}}
{{ include "sparkscope.fullname" . }}-thanos-router
{{- end -}}

{{- define "sparkscope.thanos.query" -}}
{{ include "sparkscope.fullname" . }}-thanos-query
{{- end -}}

{{- define "sparkscope.thanos.store" -}}
{{ include "sparkscope.fullname" . }}-thanos-store
{{- end -}}

{{- define "sparkscope.thanos.compact" -}}
{{ include "sparkscope.fullname" . }}-thanos-compact
{{- end -}}

{{/* Whether the release has a bucket (metricsStore.thanos.objstore.existingSecret): "true" or "". */}}
{{- define "sparkscope.thanos.bucket" -}}
{{- if .Values.metricsStore.thanos.objstore.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "sparkscope.thanos.secret" -}}
{{ include "sparkscope.fullname" . }}-thanos
{{- end -}}

{{/* Ports inside the pods: Thanos' own defaults. */}}
{{- define "sparkscope.thanos.grpcPort" -}}10901{{- end -}}
{{- define "sparkscope.thanos.httpPort" -}}10902{{- end -}}
{{- define "sparkscope.thanos.remoteWritePort" -}}19291{{- end -}}

{{/* The cluster DNS suffix of the release's Services: <namespace>.svc.<clusterDomain>. */}}
{{- define "sparkscope.thanos.svcSuffix" -}}
{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/* Every ingester's gRPC address by its stable DNS name (the StatefulSet's
pod <sts>-<i> under its headless Service), one per line: the hashring's
endpoints and Query's. */}}
{{- define "sparkscope.thanos.ingesterEndpoints" -}}
{{- $sts := include "sparkscope.thanos.ingester" . -}}
{{- $suffix := include "sparkscope.thanos.svcSuffix" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.metricsStore.thanos.ingesters) -}}
{{- $out = append $out (printf "%s-%d.%s.%s:%s" $sts $i $sts $suffix (include "sparkscope.thanos.grpcPort" $)) -}}
{{- end -}}
{{- join "\n" $out -}}
{{- end -}}

{{/* The names the store's certificate is valid for (comma-separated): every
ingester under its headless Service, and the router's and Query's Services. */}}
{{- define "sparkscope.thanos.tlsNames" -}}
{{- $suffix := include "sparkscope.thanos.svcSuffix" . -}}
{{- $names := list (printf "*.%s.%s" (include "sparkscope.thanos.ingester" .) $suffix) -}}
{{- $services := list (include "sparkscope.thanos.router" .) (include "sparkscope.thanos.query" .) -}}
{{- if include "sparkscope.thanos.bucket" . -}}
{{- $services = append $services (include "sparkscope.thanos.store" .) -}}
{{- end -}}
{{- range $service := $services -}}
{{- $names = append $names $service -}}
{{- $names = append $names (printf "%s.%s" $service $.Release.Namespace) -}}
{{- $names = append $names (printf "%s.%s" $service $suffix) -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* The files every Thanos process reads, at the native store's relative
paths under /etc/thanos: the certificate and key (all processes serve and
connect with the one the release made), the CA, the web config (Basic auth:
the bcrypt hash of Query's password); the router's hashring too. */}}
{{- define "sparkscope.thanos.filesVolume" -}}
- name: thanos
  projected:
    # 0440: the keys readable by the pod's group (fsGroup) only.
    defaultMode: 288
    sources:
      - secret:
          name: {{ include "sparkscope.thanos.secret" .root }}
          items:
            - {key: ca.crt, path: tls/ca.crt}
            - {key: stack.crt, path: tls/stack.crt}
            - {key: stack.key, path: tls/stack.key}
            - {key: web.yml, path: web.yml}
      {{- if and .objstore (include "sparkscope.thanos.bucket" .root) }}
      # The user's objstore config, at the native store's path (<state>/thanos/objstore.yml).
      - secret:
          name: {{ .root.Values.metricsStore.thanos.objstore.existingSecret }}
          items:
            - {key: objstore.yml, path: objstore.yml}
      {{- end }}
      {{- if .hashring }}
      - configMap:
          name: {{ include "sparkscope.fullname" .root }}-thanos-hashring
          items:
            - {key: hashring.json, path: hashring.json}
      {{- end }}
{{- end -}}

{{/* What `thanos receive` runs with on the router and on every ingester (receive_argv's first part). */}}
{{- define "sparkscope.thanos.receiveArgs" -}}
- receive
- --log.level=info
- --log.format=logfmt
{{- /* gRPC: an ingester's serves the router's writes and Query's reads; the
router's (its StoreAPI, holding nothing) is asked by nobody and stays inside its pod. */}}
- --grpc-address={{ if .router }}127.0.0.1{{ else }}0.0.0.0{{ end }}:{{ include "sparkscope.thanos.grpcPort" . }}
- --http-address=0.0.0.0:{{ include "sparkscope.thanos.httpPort" . }}
{{- /* The router takes remote write from Telegraf; an ingester's port is unused
(the router replicates over gRPC) and stays inside its pod. */}}
- --remote-write.address={{ if .router }}0.0.0.0{{ else }}127.0.0.1{{ end }}:{{ include "sparkscope.thanos.remoteWritePort" . }}
{{- /* Thanos 0.42 always opens a Cap'n Proto replication listener without
authentication; unused (--receive.replication-protocol=protobuf), so it binds the pod's loopback. */}}
- --receive.capnproto-address=127.0.0.1:19391
- --http.config=/etc/thanos/web.yml
- --grpc-server-tls-cert=/etc/thanos/tls/stack.crt
- --grpc-server-tls-key=/etc/thanos/tls/stack.key
- --grpc-server-tls-client-ca=/etc/thanos/tls/ca.crt
- --remote-write.server-tls-cert=/etc/thanos/tls/stack.crt
- --remote-write.server-tls-key=/etc/thanos/tls/stack.key
- --remote-write.server-tls-client-ca=/etc/thanos/tls/ca.crt
- --receive.default-tenant-id=sparkscope
- --tsdb.path=/var/thanos/data
{{- end -}}
