{{/* The namespace every namespaced object names itself (deploy/base does the same: no transformer). */}}
{{- define "gangkeeper.namespace" -}}
{{- required "namespace.name is required" .Values.namespace.name -}}
{{- end -}}

{{/* True (non-empty) when the namespace is not the one the commands default to. */}}
{{- define "gangkeeper.customNamespace" -}}
{{- if ne (include "gangkeeper.namespace" .) "gangkeeper" -}}true{{- end -}}
{{- end -}}

{{/* The controller's user as the API server names it: its service account in our namespace. The
     webhook's --controller-username and the validating webhook's matchCondition both use it. */}}
{{- define "gangkeeper.controllerUsername" -}}
{{- printf "system:serviceaccount:%s:gangkeeper-controller" (include "gangkeeper.namespace" .) -}}
{{- end -}}

{{/* The label deploy/base's kustomization puts on every object. */}}
{{- define "gangkeeper.labels" -}}
app.kubernetes.io/part-of: gangkeeper
{{- end -}}

{{/* A component's selector labels: (dict "component" "webhook"). */}}
{{- define "gangkeeper.selectorLabels" -}}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/name: gangkeeper
{{- end -}}

{{/* repository:tag for a component: (dict "root" $ "image" .Values.webhook.image). */}}
{{- define "gangkeeper.image" -}}
{{- $image := merge (deepCopy (.image | default dict)) .root.Values.image -}}
{{- printf "%s:%s" (required "image.repository is required" $image.repository) (toString ($image.tag | default .root.Chart.AppVersion)) -}}
{{- end -}}

{{- define "gangkeeper.pullPolicy" -}}
{{- $image := merge (deepCopy (.image | default dict)) .root.Values.image -}}
{{- $image.pullPolicy | default "IfNotPresent" -}}
{{- end -}}

{{/* A map of flags as container args, one "--name=value" each, sorted by name; true renders
     "--name", false or null nothing. (dict "flags" .Values.controller.flags "fixed" (list ...)
     "values" (dict "flag" "the value that sets it")); "values" is optional. */}}
{{- define "gangkeeper.flags" -}}
{{- $values := .values | default dict }}
{{- range $name, $value := .flags }}
{{- if has $name $.fixed }}
{{- fail (printf "--%s is set by the chart and cannot be changed through flags" $name) }}
{{- end }}
{{- with get $values $name }}
{{- fail (printf "--%s is set by the value %s: set that instead of the flag" $name .) }}
{{- end }}
{{- if kindIs "bool" $value }}
{{- if $value }}
- {{ printf "--%s" $name | quote }}
{{- end }}
{{- else if not (kindIs "invalid" $value) }}
{{- $text := toString $value }}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $text = toString (int64 $value) }}
{{- end }}
- {{ printf "--%s=%s" $name $text | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The optional scheduling fields of a component's pod spec. */}}
{{- define "gangkeeper.podPlacement" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gangkeeper.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
