{{/*
Naming and labels (chart context).
*/}}
{{- define "llmprobe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llmprobe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "llmprobe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "llmprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmprobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "llmprobe.labels" -}}
helm.sh/chart: {{ include "llmprobe.chart" . }}
{{ include "llmprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "llmprobe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "llmprobe.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The templates below take a dict, so that an inference chart that has llmprobe as a dependency can
include them with its own context:
  (dict "root" $ "values" .Values.llmprobe)
Inside this chart they are called with (dict "root" $ "values" .Values).
*/}}

{{- define "llmprobe.configMapName" -}}
{{- if .values.configMapName -}}
{{- .values.configMapName | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-llmprobe-config" .root.Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "llmprobe.image" -}}
{{- $tag := .values.image.tag -}}
{{- if and (not $tag) (eq .root.Chart.Name "llmprobe") -}}
{{- $tag = .root.Chart.AppVersion -}}
{{- end -}}
{{- if not $tag -}}
{{- fail "llmprobe: set image.tag (llmprobe.image.tag when included from another chart)" -}}
{{- end -}}
{{- printf "%s:%s" .values.image.repository $tag -}}
{{- end -}}

{{/* config.yaml as rendered into the ConfigMap. */}}
{{- define "llmprobe.configYaml" -}}
{{- $v := .values -}}
{{- $cfg := deepCopy $v.config -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%v" $v.port) -}}
{{- if $v.apiKey.existingSecret -}}
{{- $targets := list -}}
{{- range $t := $cfg.targets -}}
{{- if not (or (hasKey $t "api_key_file") (hasKey $t "api_key_env")) -}}
{{- $_ := set $t "api_key_file" (printf "%s/%s" (trimSuffix "/" $v.apiKey.mountPath) $v.apiKey.key) -}}
{{- end -}}
{{- $targets = append $targets $t -}}
{{- end -}}
{{- $_ := set $cfg "targets" $targets -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
Pod annotations that roll the pods when the config changes. In sidecar mode with the config reloader
the prober reloads itself instead, so nothing is rendered: rolling inference pods reloads models.
*/}}
{{- define "llmprobe.podAnnotations" -}}
{{- if or (eq .values.mode "deployment") (not .values.configReloader.enabled) -}}
checksum/llmprobe-config: {{ include "llmprobe.configYaml" . | sha256sum }}
{{- end -}}
{{- end -}}

{{/* The prober container, and the config reloader when enabled (list items). Used by this chart's
Deployment and by sidecar users. */}}
{{- define "llmprobe.sidecarContainer" -}}
{{- $v := .values -}}
- name: llmprobe
  image: {{ include "llmprobe.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args:
    - probe
    - --config
    - /etc/llmprobe/config.yaml
    {{- if $v.configReloader.enabled }}
    # POST /-/reload is served only with this flag; the reloader container calls it
    - --web.enable-lifecycle
    {{- end }}
    {{- range $v.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  ports:
    - name: llmprobe
      containerPort: {{ $v.port }}
      protocol: TCP
  {{- $env := concat ($v.env | default list) ($v.extraEnv | default list) }}
  {{- with $env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: llmprobe-config
      mountPath: /etc/llmprobe
      readOnly: true
    - name: llmprobe-tmp
      mountPath: /tmp
    {{- if $v.apiKey.existingSecret }}
    - name: llmprobe-api-key
      mountPath: {{ $v.apiKey.mountPath }}
      readOnly: true
    {{- end }}
    {{- range $v.extraSecretMounts }}
    - name: {{ .name }}
      mountPath: {{ .mountPath }}
      readOnly: true
      {{- with .subPath }}
      subPath: {{ . }}
      {{- end }}
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- if $v.configReloader.enabled }}
{{- $r := $v.configReloader }}
# Watches the mounted ConfigMap and asks the prober to reload it (no pod restart).
- name: llmprobe-config-reloader
  image: {{ printf "%s:%s" $r.image.repository $r.image.tag | quote }}
  imagePullPolicy: {{ $r.image.pullPolicy }}
  args:
    - --volume-dir=/etc/llmprobe
    - --webhook-url=http://127.0.0.1:{{ $v.port }}/-/reload
    - --webhook-method=POST
    - --web.listen-address=127.0.0.1:{{ $r.port }}
    {{- range $r.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  resources:
    {{- toYaml $r.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: llmprobe-config
      mountPath: /etc/llmprobe
      readOnly: true
{{- end }}
{{- end -}}

{{/* The volumes the prober container needs (list items). */}}
{{- define "llmprobe.sidecarVolumes" -}}
{{- $v := .values -}}
- name: llmprobe-config
  configMap:
    name: {{ include "llmprobe.configMapName" . }}
- name: llmprobe-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if $v.apiKey.existingSecret }}
- name: llmprobe-api-key
  secret:
    secretName: {{ $v.apiKey.existingSecret }}
    items:
      - key: {{ $v.apiKey.key }}
        path: {{ $v.apiKey.key }}
{{- end }}
{{- range $v.extraSecretMounts }}
- name: {{ .name }}
  secret:
    secretName: {{ .secretName }}
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- if hasKey . "defaultMode" }}
    defaultMode: {{ .defaultMode }}
    {{- end }}
{{- end }}
{{- with $v.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels for the Prometheus Operator objects: `release: <prometheus.release>` plus the object's own
`labels` (which win). Call with (dict "root" $ "labels" <labels>). */}}
{{- define "llmprobe.monitoringLabels" -}}
{{- $l := dict -}}
{{- with .root.Values.prometheus.release }}{{ $_ := set $l "release" . }}{{ end -}}
{{- $l = merge (deepCopy (.labels | default dict)) $l -}}
{{- with $l }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Relabelings shared by the ServiceMonitor and PodMonitor: a fixed `job` label, so the rules find
the prober whatever the release or nameOverride, then the user's own. */}}
{{- define "llmprobe.relabelings" -}}
- action: replace
  targetLabel: job
  replacement: {{ .root.Values.prometheus.job | quote }}
{{- with .relabelings }}
{{ toYaml . }}
{{- end }}
{{- end -}}
