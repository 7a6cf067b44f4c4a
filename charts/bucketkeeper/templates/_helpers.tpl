{{- define "bucketkeeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bucketkeeper.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "bucketkeeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bucketkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bucketkeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "bucketkeeper.labels" -}}
helm.sh/chart: {{ include "bucketkeeper.chart" . }}
{{ include "bucketkeeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bucketkeeper
{{- end }}

{{/*
The manager's image, which the mover Jobs run too: repository@digest when a digest is
given, else repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "bucketkeeper.image" -}}
{{- $i := .Values.image -}}
{{- if $i.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $i.digest) -}}
{{- fail (printf "image.digest %q is not a digest: sha256: and 64 hex digits, as cosign verify prints it" $i.digest) -}}
{{- end -}}
{{- printf "%s@%s" $i.repository $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $i.repository ($i.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end }}

{{- define "bucketkeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bucketkeeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The port of a bind address such as ":8443" or "0.0.0.0:8443". */}}
{{- define "bucketkeeper.port" -}}
{{- splitList ":" . | last | int }}
{{- end }}

{{/* Whether a bind address serves at all ("" and "0" turn a server off). */}}
{{- define "bucketkeeper.serves" -}}
{{- if and . (ne . "0") }}true{{ end }}
{{- end }}

{{/*
"true" when the receiver takes the cluster-wide key, "" otherwise; fails when the
values ask for half of it. The cluster-wide key reaches every namespace, so an
existingSecret alone (the chart's only key before namespaced keys) is refused rather
than silently kept.
*/}}
{{- define "bucketkeeper.receiverClusterWideKey" -}}
{{- $r := .Values.receiver -}}
{{- if and $r.enabled $r.existingSecret (not $r.clusterWideKey) -}}
{{- fail "receiver.existingSecret is a key for every namespace: its holder may probe any StorageBucket and learn which claims use a bucket name. Set receiver.clusterWideKey=true to accept it so, or give each caller a key of its namespaces (a Secret labelled bucketkeeper.io/secret-role=receiver-key in the release namespace) and unset receiver.existingSecret." -}}
{{- end -}}
{{- if and $r.enabled $r.clusterWideKey (not $r.existingSecret) -}}
{{- fail "receiver.clusterWideKey=true needs receiver.existingSecret: the Secret holding the cluster-wide key" -}}
{{- end -}}
{{- if and $r.enabled $r.clusterWideKey -}}true{{- end -}}
{{- end -}}

{{- define "bucketkeeper.receiverSecretDir" -}}
/etc/bucketkeeper/receiver
{{- end }}

{{- define "bucketkeeper.receiverTLSDir" -}}
/etc/bucketkeeper/receiver-tls
{{- end }}
