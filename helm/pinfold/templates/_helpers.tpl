{{/* Chart name. */}}
{{- define "pinfold.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name (release-based). */}}
{{- define "pinfold.fullname" -}}
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

{{- define "pinfold.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "pinfold.labels" -}}
helm.sh/chart: {{ include "pinfold.chart" . }}
{{ include "pinfold.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pinfold
{{- end }}

{{- define "pinfold.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pinfold.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pinfold.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pinfold.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pinfold.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret holding database-url and encryption-key. */}}
{{- define "pinfold.secretName" -}}
{{- default (printf "%s-secrets" (include "pinfold.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/* The services `pinfold serve --services` knows, in order. */}}
{{- define "pinfold.serviceNames" -}}
{{- list "tenancy" "registry" "resolve" "scope" "guard" | toJson -}}
{{- end }}

{{/*
The Deployments to render, as JSON {"roles": [...]}: one combined
Deployment serving every service, or one per service in split mode. Each
role carries its resource name, component label, --services value,
replicas, resources and autoscaling.
*/}}
{{- define "pinfold.roles" -}}
{{- $full := include "pinfold.fullname" . -}}
{{- $names := include "pinfold.serviceNames" . | fromJsonArray -}}
{{- $base := dict "replicaCount" .Values.replicaCount "resources" .Values.resources "autoscaling" .Values.autoscaling -}}
{{- $roles := list -}}
{{- if eq .Values.mode "split" -}}
{{- range $r := $names -}}
{{- $over := index $.Values.roles $r | default dict -}}
{{- $roles = append $roles (dict "name" (printf "%s-%s" $full $r) "component" $r "services" $r "replicaCount" (default $base.replicaCount $over.replicaCount) "resources" (default $base.resources $over.resources) "autoscaling" (merge (deepCopy (default dict $over.autoscaling)) $base.autoscaling)) -}}
{{- end -}}
{{- else if eq .Values.mode "combined" -}}
{{- $roles = append $roles (dict "name" $full "component" "server" "services" (join "," $names) "replicaCount" $base.replicaCount "resources" $base.resources "autoscaling" $base.autoscaling) -}}
{{- else -}}
{{- fail (printf "mode must be \"combined\" or \"split\", not %q" .Values.mode) -}}
{{- end -}}
{{- dict "roles" $roles | toJson -}}
{{- end }}

{{/*
The Ingress paths, as JSON {"pathType": ..., "routes": [{"path", "role"}]}.
Combined: plain prefixes to the one Service. Split: the API families live
under /v1/tenants/{tenant}/ (and the subregistry under /t/{tenant}/v0.1),
which no standard Ingress prefix can express,
so the paths are regular expressions (ingress-nginx `use-regex`, which tries
longer paths first); what no family claims goes to tenancy. /healthz,
/readyz and /metrics are never exposed (probes and Prometheus reach the pods
directly). docs/OPERATIONS.md has the same table.
*/}}
{{- define "pinfold.ingressRoutes" -}}
{{- $t := "/v1/tenants/[^/]+" -}}
{{- if eq .Values.mode "split" -}}
{{- $routes := list
  (dict "path" (printf "%s/servers(/|$)" $t) "role" "registry")
  (dict "path" (printf "%s/import(/|$)" $t) "role" "registry")
  (dict "path" (printf "%s/jwks\\.json$" $t) "role" "registry")
  (dict "path" "/t/[^/]+/v0\\.1(/|$)" "role" "registry")
  (dict "path" (printf "%s/sessions(/|$)" $t) "role" "resolve")
  (dict "path" (printf "%s/servers/[^/]+/versions/[^/]+/scopes$" $t) "role" "scope")
  (dict "path" (printf "%s/servers/[^/]+/guard$" $t) "role" "guard")
  (dict "path" (printf "%s/(providers|scopes|grants)(/|$)" $t) "role" "scope")
  (dict "path" "/v1(/|$)" "role" "tenancy")
  (dict "path" "/docs(/|$)" "role" "tenancy")
  (dict "path" "/openapi\\.json$" "role" "tenancy")
  (dict "path" "/\\.well-known/oauth-protected-resource$" "role" "tenancy") -}}
{{- dict "pathType" "ImplementationSpecific" "routes" $routes | toJson -}}
{{- else -}}
{{- $routes := list
  (dict "path" "/v1" "role" "server")
  (dict "path" "/t" "role" "server")
  (dict "path" "/docs" "role" "server")
  (dict "path" "/openapi.json" "role" "server")
  (dict "path" "/.well-known/oauth-protected-resource" "role" "server") -}}
{{- dict "pathType" "Prefix" "routes" $routes | toJson -}}
{{- end -}}
{{- end }}

{{/* Environment shared by the servers and the migration Job. */}}
{{- define "pinfold.secretEnv" -}}
- name: PINFOLD_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "pinfold.secretName" . }}
      key: {{ .Values.secrets.databaseUrlKey }}
{{- end }}

{{/* The Secret holding the /metrics scrape token (metrics.token). */}}
{{- define "pinfold.metricsSecretName" -}}
{{- default (printf "%s-metrics" (include "pinfold.fullname" .)) .Values.metrics.token.existingSecret }}
{{- end }}

{{/* Where the pods find the scrape token. */}}
{{- define "pinfold.metricsTokenDir" -}}
/etc/pinfold/metrics
{{- end }}
