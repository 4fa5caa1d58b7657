{{/* Names */}}
{{- define "aileron.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "aileron.fullname" -}}
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

{{- define "aileron.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of one component: (dict "root" $ "component" "control-plane").
app.kubernetes.io/name is aileron-<component>: the pool's Kubernetes driver admits
connections to instances only from pods named aileron-control-plane.
*/}}
{{- define "aileron.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-%s" (include "aileron.name" .root) .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "aileron.labels" -}}
{{ include "aileron.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: aileron
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ include "aileron.chart" .root }}
{{- end -}}

{{- define "aileron.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "aileron.runnerImage" -}}
{{- printf "%s:%s" .Values.pool.runnerImage.repository (default .Chart.AppVersion .Values.pool.runnerImage.tag) -}}
{{- end -}}

{{- define "aileron.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "aileron.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the account to run as when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the root key and the URLs: the operator's, or the chart's when it has anything to hold. */}}
{{- define "aileron.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else if or (eq .Values.mode "server") .Values.secrets.rootKeys -}}
{{- include "aileron.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "aileron.hasRootKeys" -}}
{{- if or .Values.secrets.existingSecret .Values.secrets.rootKeys (eq .Values.mode "server") -}}true{{- end -}}
{{- end -}}

{{- define "aileron.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- tpl .Values.publicUrl . -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- printf "%s://%s" (ternary "https" "http" (gt (len .Values.ingress.tls) 0)) (first .Values.ingress.hosts).host -}}
{{- else -}}
{{- printf "http://%s.%s.svc:%v" (include "aileron.fullname" .) .Release.Namespace .Values.service.port -}}
{{- end -}}
{{- end -}}

{{/* What every pod and container of the chart runs under: the restricted Pod Security Standard. */}}
{{- define "aileron.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "aileron.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The environment every process of the image shares: settings from the ConfigMap, the
URLs from the Secret, the root key as a file.
*/}}
{{- define "aileron.commonEnv" -}}
{{- if eq .Values.mode "server" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef: { name: {{ include "aileron.secretName" . }}, key: database-url }
- name: REDIS_URL
  valueFrom:
    secretKeyRef: { name: {{ include "aileron.secretName" . }}, key: redis-url }
{{ end -}}
{{- if include "aileron.hasRootKeys" . -}}
- name: AILERON_ROOT_KEY_FILE
  value: /etc/aileron/secrets/root-keys
{{- end -}}
{{- end -}}

{{- define "aileron.rootKeysVolume" -}}
{{- if include "aileron.hasRootKeys" . -}}
- name: root-keys
  secret:
    secretName: {{ include "aileron.secretName" . }}
    items: [{ key: root-keys, path: root-keys }]
    defaultMode: 288 # 0440: the group (fsGroup) reads it, nobody writes
{{- end -}}
{{- end -}}

{{- define "aileron.rootKeysMount" -}}
{{- if include "aileron.hasRootKeys" . -}}
- name: root-keys
  mountPath: /etc/aileron/secrets
  readOnly: true
{{- end -}}
{{- end -}}

{{/* Refuses a values set that cannot work, naming the value. */}}
{{- define "aileron.validate" -}}
{{- if eq .Values.mode "server" -}}
{{- if not .Values.secrets.existingSecret -}}
{{- $_ := required "server mode: set secrets.databaseUrl (postgres://…) or secrets.existingSecret" .Values.secrets.databaseUrl -}}
{{- $_ := required "server mode: set secrets.redisUrl (redis://…) or secrets.existingSecret" .Values.secrets.redisUrl -}}
{{- $_ := required "server mode: set secrets.rootKeys (openssl rand -base64 32) or secrets.existingSecret; every replica must share one root key" .Values.secrets.rootKeys -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.pool.driver "kubernetes") (eq .Values.pool.namespace .Release.Namespace) -}}
{{- fail "pool.namespace must not be the release's namespace: the pool's NetworkPolicies deny all traffic there that they do not allow" -}}
{{- end -}}
{{- if and (eq .Values.sandboxes.driver "kubernetes") (eq .Values.sandboxes.namespace .Release.Namespace) -}}
{{- fail "sandboxes.namespace must not be the release's namespace: the sandboxes' NetworkPolicies deny all traffic there that they do not allow" -}}
{{- end -}}
{{- if and (eq .Values.sandboxes.driver "kubernetes") (eq .Values.pool.driver "kubernetes") (eq .Values.sandboxes.namespace .Values.pool.namespace) -}}
{{- fail "sandboxes.namespace must not be pool.namespace: the sandboxes' Role reads the Secrets of its namespace (the runners' tokens), and there it would read every pool instance's credentials" -}}
{{- end -}}
{{- end -}}

{{/* Whether the control plane calls the Kubernetes API (a driver on Kubernetes): only then is a token mounted. */}}
{{- define "aileron.usesKubernetes" -}}
{{- if or (eq .Values.pool.driver "kubernetes") (eq .Values.sandboxes.driver "kubernetes") -}}true{{- end -}}
{{- end -}}

{{/*
A namespace where tenants' code runs: (dict "root" $ "component" "pool" "name" "aileron-pool").
The API server refuses any pod the restricted Pod Security Standard would not admit.
*/}}
{{- define "aileron.restrictedNamespace" -}}
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .name }}
  labels:
    {{- include "aileron.labels" (dict "root" .root "component" .component) | nindent 4 }}
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/audit: restricted
    pod-security.kubernetes.io/warn: restricted
{{- end -}}

{{/* Binds the Role of a component (named like it) in a namespace to the control plane's ServiceAccount: (dict "root" $ "component" "pool" "namespace" "aileron-pool"). */}}
{{- define "aileron.roleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "aileron.fullname" .root }}-{{ .component }}
  namespace: {{ .namespace }}
  labels:
    {{- include "aileron.labels" (dict "root" .root "component" .component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "aileron.fullname" .root }}-{{ .component }}
subjects:
  - kind: ServiceAccount
    name: {{ include "aileron.serviceAccountName" .root }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/*
Nothing in a namespace where tenants' code runs sends or receives anything unless a policy
allows it, and only this release's control-plane pods reach a workload there, on its ports:
(dict "root" $ "component" "pool" "namespace" "aileron-pool" "selector" <podSelector> "ports" (list 8080)).
The drivers' own policies admit the control plane too (AILERON_POD_NAMESPACE); this one also
covers what they made before they knew its namespace.
*/}}
{{- define "aileron.tenantPolicies" -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "aileron.fullname" .root }}-{{ .component }}-default-deny
  namespace: {{ .namespace }}
  labels:
    {{- include "aileron.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "aileron.fullname" .root }}-{{ .component }}-from-control-plane
  namespace: {{ .namespace }}
  labels:
    {{- include "aileron.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  podSelector:
    {{- toYaml .selector | nindent 4 }}
  policyTypes: [Ingress]
  ingress:
    - from:
        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: {{ .root.Release.Namespace }}
          podSelector:
            matchLabels:
              {{- include "aileron.selectorLabels" (dict "root" .root "component" "control-plane") | nindent 14 }}
      ports:
        {{- range .ports }}
        - protocol: TCP
          port: {{ . }}
        {{- end }}
{{- end -}}

{{- define "aileron.sandboxImage" -}}
{{- printf "%s:%s" .Values.sandboxes.image.repository (default .Chart.AppVersion .Values.sandboxes.image.tag) -}}
{{- end -}}
