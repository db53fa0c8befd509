{{/* Chart name, truncated to a DNS label. */}}
{{- define "mqcluster-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart unless the release name already contains the chart name. */}}
{{- define "mqcluster-operator.fullname" -}}
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

{{- define "mqcluster-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mqcluster-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mqcluster-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "mqcluster-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mqcluster
{{- end }}

{{- define "mqcluster-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mqcluster-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mqcluster-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The namespaces watched when not cluster-wide (the release namespace by default). */}}
{{- define "mqcluster-operator.watchNamespaces" -}}
{{- if .Values.watch.namespaces }}
{{- join "," .Values.watch.namespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Whether the chart renders the CRD named by the second argument: it is absent from the
cluster, or it is this release's. A CRD created outside the release (kubectl apply -f crds/
before helm install) is left to whoever created it, so the install does not fail on its
ownership; "helm template" (no cluster) renders it. */}}
{{- define "mqcluster-operator.ownsCrd" -}}
{{- $root := index . 0 }}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (index . 1) }}
{{- if not $live }}true
{{- else }}
{{- $annotations := $live.metadata.annotations | default dict }}
{{- if and (eq (get $annotations "meta.helm.sh/release-name") $root.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $root.Release.Namespace) }}true{{ end }}
{{- end }}
{{- end }}

{{/* The chart's CRDs that exist in the cluster but belong to no release of this chart. */}}
{{- define "mqcluster-operator.foreignCrds" -}}
{{- $root := . }}
{{- $names := list "brokergroups.mqcluster.io" "controllers.mqcluster.io" }}
{{- if .Values.peering.enabled }}
{{- $names = append $names (ternary "clusterkopfpeerings.kopf.dev" "kopfpeerings.kopf.dev" .Values.watch.allNamespaces) }}
{{- end }}
{{- $foreign := list }}
{{- range $name := $names }}
{{- if not (include "mqcluster-operator.ownsCrd" (list $root $name)) }}
{{- $foreign = append $foreign $name }}
{{- end }}
{{- end }}
{{- join ", " $foreign }}
{{- end }}
