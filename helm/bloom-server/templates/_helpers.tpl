{{/* Chart name, truncated to the 63 characters Kubernetes names allow. */}}
{{- define "bloom-server.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name. */}}
{{- define "bloom-server.fullname" -}}
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

{{- define "bloom-server.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bloom-server.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bloom-server.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "bloom-server.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "bloom-server.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bloom-server.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "bloom-server.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The gRPC port the server listens on, from config.listen. */}}
{{- define "bloom-server.grpcPort" -}}
{{- regexFind "[0-9]+$" .Values.config.listen -}}
{{- end -}}

{{/* The port the kubelet probes: the plaintext health-only port when the gRPC port needs TLS. */}}
{{- define "bloom-server.probePort" -}}
{{- if .Values.tls.enabled -}}
{{- .Values.health.port -}}
{{- else -}}
{{- include "bloom-server.grpcPort" . -}}
{{- end -}}
{{- end -}}

{{/* "true" when the pods replicate: pod 0 the primary, the others its followers. */}}
{{- define "bloom-server.replicated" -}}
{{- if and .Values.replication.enabled (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{/* Pod 0's address through the headless Service: the primary every pod replicates from. */}}
{{- define "bloom-server.primaryAddress" -}}
{{- $name := include "bloom-server.fullname" . -}}
{{- printf "%s-0.%s-headless.%s.svc:%s" $name $name .Release.Namespace (include "bloom-server.grpcPort" .) -}}
{{- end -}}

{{/* The etcd the pods elect their primary through: etcd.endpoints, or the members of the etcd
this release deploys (etcd.deploy); empty without either. */}}
{{- define "bloom-server.etcdEndpoints" -}}
{{- if .Values.etcd.endpoints -}}
{{- .Values.etcd.endpoints -}}
{{- else if .Values.etcd.deploy -}}
{{- $name := include "bloom-server.etcdName" . -}}
{{- $members := list -}}
{{- range $i := until 3 -}}
{{- $members = append $members (printf "%s-%d.%s-headless.%s.svc:2379" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $members -}}
{{- end -}}
{{- end -}}

{{- define "bloom-server.etcdName" -}}
{{- printf "%s-etcd" (include "bloom-server.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Automatic failover: replicated pods with an etcd to elect their primary through. */}}
{{- define "bloom-server.failover" -}}
{{- if and (include "bloom-server.replicated" .) (include "bloom-server.etcdEndpoints" .) -}}true{{- end -}}
{{- end -}}

{{/* Replication needs a credential of its own: a replication token with auth, or the
operator's explicit allowUnauthenticated. Fails the render otherwise. */}}
{{- define "bloom-server.checkReplicationAuth" -}}
{{- if include "bloom-server.replicated" . -}}
{{- if and (not .Values.auth.enabled) (not .Values.replication.allowUnauthenticated) -}}
{{- fail "replicas > 1 replicate between the pods, which needs a credential of its own: set auth.enabled (and replication.tokenSecretName, a token the auth Secret lists with the replication role), or replication.allowUnauthenticated=true (unsafe: anything that reaches a pod could copy every filter or pose as a follower)" -}}
{{- end -}}
{{- if and .Values.auth.enabled (not .Values.replication.tokenSecretName) -}}
{{- fail "replicas > 1 with auth.enabled: the followers need replication.tokenSecretName, a Secret with a token the auth Secret lists with the replication role" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A group's selector labels: the release's, and with sharding.groups > 1 the group's.
Called with (list root group groups). */}}
{{- define "bloom-server.groupLabels" -}}
{{ include "bloom-server.selectorLabels" (index . 0) }}
{{- if gt (int (index . 2)) 1 }}
bloom-server.io/group: {{ printf "g%d" (index . 1) | quote }}
{{- end }}
{{- end -}}

{{/* The etcd key prefix of the release's pods: etcd.cluster, or the full name. */}}
{{- define "bloom-server.cluster" -}}
{{- .Values.etcd.cluster | default (include "bloom-server.fullname" .) -}}
{{- end -}}

{{/* Sharding needs each group to elect its primary through etcd. Fails the render otherwise. */}}
{{- define "bloom-server.checkSharding" -}}
{{- if gt (int .Values.sharding.groups) 1 -}}
{{- if not (include "bloom-server.failover" .) -}}
{{- fail "sharding.groups > 1 needs failover in each group: replicas > 1, replication.enabled, and etcd (etcd.deploy or etcd.endpoints)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
