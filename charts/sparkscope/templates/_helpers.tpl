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
{{- $props = append $props (list "spark.extraListeners" "dev.sparkscope.annotator.AnnotatorListener") -}}
{{- $props = append $props (list "spark.plugins" "dev.sparkscope.annotator.ProfilerPlugin,dev.sparkscope.annotator.ContainerMemoryPlugin") -}}
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

{{/* metricsStore.mode, checked: influxdb, or remote with its write URL. */}}
{{- define "sparkscope.metricsStore" -}}
{{- $m := .Values.metricsStore -}}
{{- if not (has $m.mode (list "influxdb" "remote")) -}}
{{- fail (printf "metricsStore.mode %q: use influxdb or remote" $m.mode) -}}
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
