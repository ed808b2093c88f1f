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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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
{{- include "llmprobe.registryImage" (dict "root" .root "repository" .values.image.repository "tag" $tag) -}}
{{- end -}}

{{/* "<global.imageRegistry>/<repository>:<tag>", the registry only when set (a mirror for every
image the chart renders). Takes (dict "root" $ "repository" R "tag" T). */}}
{{- define "llmprobe.registryImage" -}}
{{- $registry := dig "global" "imageRegistry" "" (.root.Values | toJson | fromJson) -}}
{{- if $registry -}}
{{- /* a repository that names its registry (ghcr.io/..., host:port/...) gets the mirror instead */ -}}
{{- $parts := splitList "/" .repository -}}
{{- $path := .repository -}}
{{- if and (gt (len $parts) 1) (or (contains "." (first $parts)) (contains ":" (first $parts)) (eq (first $parts) "localhost")) -}}
{{- $path = join "/" (rest $parts) -}}
{{- end -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) $path .tag -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* "true" when the config reloader runs: configReloader.enabled, or, left null, in sidecar mode
(a config change must reload the prober, never roll the inference pods). */}}
{{- define "llmprobe.reloaderEnabled" -}}
{{- $e := .values.configReloader.enabled -}}
{{- if kindIs "bool" $e -}}
{{- if $e }}true{{ end -}}
{{- else if eq .values.mode "sidecar" -}}
true
{{- end -}}
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
{{- /* the release API's tokens, from their Secrets' mounted files */ -}}
{{- range $field, $t := dict "release_token_file" $v.releaseApi.markerToken "release_read_token_file" $v.releaseApi.readToken -}}
{{- if $t.existingSecret -}}
{{- $detect := $cfg.detect | default dict -}}
{{- if hasKey $detect $field -}}
{{- fail (printf "config.detect.%s is set by releaseApi: remove it from config.detect" $field) -}}
{{- end -}}
{{- $_ := set $detect $field (printf "%s/%s/%s" (trimSuffix "/" $v.releaseApi.mountPath) (include "llmprobe.releaseTokenDir" $field) $t.key) -}}
{{- $_ := set $cfg "detect" $detect -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The directory under releaseApi.mountPath of a release API token, by its config field. */}}
{{- define "llmprobe.releaseTokenDir" -}}
{{- if eq . "release_token_file" }}marker{{ else }}read{{ end -}}
{{- end -}}

{{/*
Pod annotations that roll the pods when the config changes: deployment mode only (the prober pod
holds no state). In sidecar mode nothing is rendered, whatever the reloader: rolling inference pods
reloads their models, so the config reloader (or a manual POST /-/reload) applies a change instead.
*/}}
{{- define "llmprobe.podAnnotations" -}}
{{- if eq .values.mode "deployment" -}}
checksum/llmprobe-config: {{ include "llmprobe.configYaml" . | sha256sum }}
{{- end -}}
{{- end -}}

{{/* The prober (and reloader) as native sidecars, for the inference pod's `initContainers:`
(Kubernetes >= 1.29): `restartPolicy: Always` keeps them running beside the engine, started before
it and stopped after it. Takes the same dict as llmprobe.sidecarContainer. */}}
{{- define "llmprobe.nativeSidecarContainers" -}}
{{- include "llmprobe.sidecarContainer" (merge (dict "native" true) .) -}}
{{- end -}}

{{/* The prober container, and the config reloader when enabled (list items). Used by this chart's
Deployment and by sidecar users. */}}
{{- define "llmprobe.sidecarContainer" -}}
{{- $v := .values -}}
{{- $reloader := include "llmprobe.reloaderEnabled" . -}}
- name: llmprobe
  image: {{ include "llmprobe.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if .native }}
  restartPolicy: Always
  {{- end }}
  args:
    - probe
    - --config
    - /etc/llmprobe/config.yaml
    {{- if $reloader }}
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
  {{- $env := concat (.shardEnv | default list) ($v.env | default list) ($v.extraEnv | default list) }}
  {{- with $env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- /* No probes in sidecar mode: the inference pod's Ready condition includes every container, so
  a failing prober probe (or a restart it causes) would take a GPU replica out of its Service. A
  stuck prober shows as LLMProbeProberDown instead. */}}
  {{- if eq $v.mode "deployment" }}
  {{- with $v.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
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
    {{- if $v.releaseApi.markerToken.existingSecret }}
    - name: llmprobe-release-marker-token
      mountPath: {{ printf "%s/marker" (trimSuffix "/" $v.releaseApi.mountPath) }}
      readOnly: true
    {{- end }}
    {{- if $v.releaseApi.readToken.existingSecret }}
    - name: llmprobe-release-read-token
      mountPath: {{ printf "%s/read" (trimSuffix "/" $v.releaseApi.mountPath) }}
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
{{- if $reloader }}
{{- $r := $v.configReloader }}
# Watches the mounted ConfigMap and asks the prober to reload it (no pod restart).
- name: llmprobe-config-reloader
  image: {{ include "llmprobe.registryImage" (dict "root" .root "repository" $r.image.repository "tag" $r.image.tag) | quote }}
  imagePullPolicy: {{ $r.image.pullPolicy }}
  {{- if .native }}
  restartPolicy: Always
  {{- end }}
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
{{- with $v.releaseApi.markerToken }}{{ if .existingSecret }}
- name: llmprobe-release-marker-token
  secret:
    secretName: {{ .existingSecret }}
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}{{ end }}
{{- with $v.releaseApi.readToken }}{{ if .existingSecret }}
- name: llmprobe-release-read-token
  secret:
    secretName: {{ .existingSecret }}
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}{{ end }}
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
