{{/* The release's name prefix: "config-sync" for a release of that name, else "<release>-config-sync". */}}
{{- define "config-sync.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "config-sync.webhookName" -}}
{{- printf "%s-webhook" (include "config-sync.fullname" .) -}}
{{- end -}}

{{/* The selector of the webhook's Pods: the kustomize base's label, and the release. */}}
{{- define "config-sync.webhookSelector" -}}
app.kubernetes.io/name: config-sync-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "config-sync.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "config-sync.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The API group and resource of each workload kind config-sync restarts: the rows of WORKLOADS in
src/kube/resources.ts (a test renders the Role and compares it with what the agent's own
permissions module asks for).
*/}}
{{- define "config-sync.workloadRule" -}}
{{- $rows := dict "Deployment" (list "apps" "deployments") "StatefulSet" (list "apps" "statefulsets") "DaemonSet" (list "apps" "daemonsets") "Rollout" (list "argoproj.io" "rollouts") -}}
{{- $row := get $rows .kind -}}
{{- if not $row -}}
{{- fail (printf "agent.namespaces: workload kind %q is not one config-sync restarts (Deployment, StatefulSet, DaemonSet, Rollout)" .kind) -}}
{{- end -}}
{{- toJson $row -}}
{{- end -}}
