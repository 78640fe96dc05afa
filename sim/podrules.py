"""The pod rules of the real API server that gangkeeper depends on, as pure functions.

Scheduling gates are set at creation and only removed afterwards; while a pod is gated its
required node affinity, nodeSelector and tolerations may only grow; `spec.nodeName` is set by
binding alone; any other change of a pod's spec is refused with a diff, as the real server does.
Each function returns every error (a list of FieldError), never the first only.
"""

import difflib
import json
import re
from functools import lru_cache

from sim.quantity import canonical, parse_quantity
from sim.status import FieldError

UPDATABLE = ("`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
             "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
             "(allow it to be set to 1 if it was previously negative)")
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def validate_create(pod: dict) -> list[FieldError]:
    spec = pod.get("spec") or {}
    errors = _validate_spec(spec)
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errors.append(FieldError("spec.nodeName", "Forbidden", "cannot be set until all schedulingGates have been cleared"))
    return errors


def _validate_spec(spec: dict) -> list[FieldError]:
    errors = []
    if not spec.get("containers"):
        errors.append(FieldError("spec.containers", "Required", ""))
    for field in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(field) or []):
            errors += _not_overcommitted((container or {}).get("resources") or {}, f"spec.{field}[{i}].resources")
    names: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        name = gate.get("name", "")
        path = f"spec.schedulingGates[{i}].name"
        if not _QUALIFIED_NAME.match(name):
            errors.append(FieldError(path, "Invalid", "name part must consist of alphanumeric characters, '-', '_' "
                                     "or '.', and must start and end with an alphanumeric character", name))
        elif name in names:
            errors.append(FieldError(path, "Duplicate", value=name))
        names.add(name)
    return errors


def _not_overcommitted(resources: dict, path: str) -> list[FieldError]:
    """`ValidateResourceRequirements`: a resource that may not be overcommitted (an extended resource
    such as nvidia.com/gpu, or hugepages) is requested exactly as much as its limit, and has a limit.
    A limit alone is fine: defaulting copied it into the requests before validation."""
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    errors = []
    for name in sorted(requests):  # the Go map's order is random; sorted, the message is stable
        if _overcommit_allowed(name):
            continue
        if name not in limits:
            errors.append(FieldError(f"{path}.limits", "Required", "Limit must be set for non overcommitable resources"))
        elif _amount(requests[name]) != _amount(limits[name]):
            errors.append(FieldError(f"{path}.requests", "Invalid",
                                     f"must be equal to {name} limit of {canonical(limits[name])}",
                                     canonical(requests[name])))
    return errors


def _overcommit_allowed(name: str) -> bool:
    """`helper.IsOvercommitAllowed`: native resources (no domain, or a kubernetes.io one) but hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _amount(value: object) -> object:
    if isinstance(value, str):
        return _parsed_amount(value)
    try:
        return parse_quantity(value)
    except ValueError:
        return value  # a malformed quantity is refused on its own


@lru_cache(maxsize=1024)
def _parsed_amount(text: str) -> object:
    """A quantity written as text, parsed once: every pod update validates the same few requests and limits."""
    try:
        return parse_quantity(text)
    except ValueError:
        return text


def validate_update(old: dict, new: dict) -> list[FieldError]:
    """`ValidatePodUpdate`: what may change in a stored pod's spec, in the real order of checks."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    errors = _validate_spec(new_spec)
    errors += _only_added_tolerations(new_spec.get("tolerations"), old_spec.get("tolerations"))
    errors += _only_deleted_gates(new_spec.get("schedulingGates"), old_spec.get("schedulingGates"))
    # Equal specs are semantically equal: the plain comparison spares the two copies a metadata-only update made.
    if new_spec == old_spec:
        return errors
    old_semantic = _semantic(old_spec)
    if _semantic(new_spec) == old_semantic:
        return errors
    munged = _munge_updatable(new_spec, old_spec)
    if old_spec.get("schedulingGates"):
        errors += _munge_gated(munged, old_spec)
    if _semantic(munged) != old_semantic:
        errors.append(FieldError("spec", "Forbidden", f"pod updates may not change fields other than {UPDATABLE}\n"
                                                      f"{spec_diff(old_spec, munged)}"))
    return errors


def _munge_updatable(new_spec: dict, old_spec: dict) -> dict:
    """A copy of the new spec with every field an update may change set back to the old value."""
    munged = json.loads(json.dumps(new_spec))
    for field in ("containers", "initContainers"):
        old_images = [c.get("image") for c in old_spec.get(field) or []]
        for container, image in zip(munged.get(field) or [], old_images):
            container["image"] = image
    _restore(munged, old_spec, "activeDeadlineSeconds")
    _restore(munged, old_spec, "tolerations")
    if (old_spec.get("terminationGracePeriodSeconds") or 0) < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, old_spec, "terminationGracePeriodSeconds")
    return munged


def _munge_gated(munged: dict, old_spec: dict) -> list[FieldError]:
    """While gated, nodeSelector and required node affinity may grow; check that, then treat them as unchanged."""
    errors = []
    if (munged.get("nodeSelector") or {}) != (old_spec.get("nodeSelector") or {}):
        errors += _only_added_node_selector(munged.get("nodeSelector") or {}, old_spec.get("nodeSelector") or {})
        _restore(munged, old_spec, "nodeSelector")
    old_affinity = (old_spec.get("affinity") or {}).get("nodeAffinity")
    new_affinity = (munged.get("affinity") or {}).get("nodeAffinity")
    if _semantic(old_affinity) != _semantic(new_affinity):
        errors += _only_added_node_affinity(new_affinity, old_affinity)
        affinity = dict(munged.get("affinity") or {})
        affinity.pop("nodeAffinity", None)
        if old_affinity is not None:
            affinity["nodeAffinity"] = old_affinity
        munged["affinity"] = affinity
        if not affinity and "affinity" not in old_spec:
            del munged["affinity"]
    _restore(munged, old_spec, "schedulingGates")
    return errors


def _restore(munged: dict, old_spec: dict, field: str) -> None:
    if field in old_spec:
        munged[field] = old_spec[field]
    else:
        munged.pop(field, None)


def _only_added_tolerations(new: list | None, old: list | None) -> list[FieldError]:
    for toleration in old or []:
        wanted = {k: v for k, v in toleration.items() if k != "tolerationSeconds"}
        if not any({k: v for k, v in t.items() if k != "tolerationSeconds"} == wanted for t in new or []):
            return [FieldError("spec.tolerations", "Forbidden",
                               "existing toleration can not be modified except its tolerationSeconds")]
    return []


def _only_deleted_gates(new: list | None, old: list | None) -> list[FieldError]:
    old_names = {g.get("name") for g in old or []}
    return [FieldError(f"spec.schedulingGates[{i}].name", "Forbidden",
                       f"only deletion is allowed, but found new scheduling gate '{gate.get('name')}'")
            for i, gate in enumerate(new or []) if gate.get("name") not in old_names]


def _only_added_node_selector(new: dict, old: dict) -> list[FieldError]:
    if any(new.get(k) != v for k, v in old.items()):
        return [FieldError("spec.nodeSelector", "Invalid",
                           "only additions to spec.nodeSelector are allowed (no mutations or deletions)", new)]
    return []


def _only_added_node_affinity(new: dict | None, old: dict | None) -> list[FieldError]:
    """Every existing term may gain requirements; none may change, go or be added beside them."""
    old_terms = ((old or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if not old_terms:
        return []
    new_terms = ((new or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if len(old_terms) != len(new_terms):
        return [FieldError(path, "Invalid", "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
                           [go_node_selector_term(t) for t in new_terms])]
    return [FieldError(f"{path}[{i}]", "Invalid", "only additions are allowed (no mutations or deletions)",
                       go_node_selector_term(new_term))
            for i, (old_term, new_term) in enumerate(zip(old_terms, new_terms))
            if not _term_only_grew(new_term, old_term)]


def _term_only_grew(new: dict, old: dict) -> bool:
    for field in ("matchExpressions", "matchFields"):
        old_items, new_items = old.get(field) or [], new.get(field) or []
        if len(old_items) > len(new_items) or any(_semantic(a) != _semantic(b) for a, b in zip(old_items, new_items)):
            return False
    return True


def go_node_selector_term(term: dict) -> dict:
    """A NodeSelectorTerm as the Go internal type marshals in an error: capitalised keys, nil lists as null."""
    def requirements(items):
        if not items:
            return None
        return [{"Key": r.get("key", ""), "Operator": r.get("operator", ""), "Values": r.get("values") or None}
                for r in items]
    return {"MatchExpressions": requirements(term.get("matchExpressions")),
            "MatchFields": requirements(term.get("matchFields"))}


def _semantic(value):
    """Drop unset and empty-list fields: the Go semantic comparison treats nil and empty alike."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


# Field order of the internal `core.PodSpec` and `core.PodSecurityContext`, which the diff follows.
_SPEC_FIELDS = ("volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
                "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
                "serviceAccountName", "automountServiceAccountToken", "nodeName", "securityContext",
                "imagePullSecrets", "hostname", "subdomain", "setHostnameAsFQDN", "affinity", "schedulerName",
                "tolerations", "hostAliases", "priorityClassName", "priority", "preemptionPolicy", "dnsConfig",
                "readinessGates", "runtimeClassName", "overhead", "enableServiceLinks", "topologySpreadConstraints",
                "os", "schedulingGates", "resourceClaims", "resources")
_SECURITY_FIELDS = ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "hostUsers", "seLinuxOptions",
                    "windowsOptions", "runAsUser", "runAsGroup", "runAsNonRoot", "supplementalGroups",
                    "supplementalGroupsPolicy", "fsGroup", "fsGroupChangePolicy", "sysctls", "seccompProfile",
                    "appArmorProfile", "seLinuxChangePolicy")
_STRING_FIELDS = ("restartPolicy", "dnsPolicy", "serviceAccountName", "nodeName", "hostname", "subdomain",
                  "schedulerName", "priorityClassName")
_BOOL_FIELDS = ("hostNetwork", "hostPID", "hostIPC")
_ACRONYMS = {"dns": "DNS", "fqdn": "FQDN", "os": "OS", "pid": "PID", "ipc": "IPC", "ip": "IP", "ips": "IPs",
             "selinux": "SELinux", "fs": "FS", "id": "ID", "uid": "UID"}


def _go_name(name: str) -> str:
    words = re.findall(r"[a-z]+|[A-Z][a-z]*|[A-Z]+(?![a-z])|\d+", name.replace("seLinux", "selinux"))
    return "".join(_ACRONYMS.get(w.lower(), w[:1].upper() + w[1:]) for w in words)


_MAP_FIELDS = {"nodeSelector", "overhead", "limits", "requests", "labels", "annotations"}


def _go_struct(value, field: str = ""):
    """Struct keys capitalised as Go names them; keys of map fields (nodeSelector, limits, ...) kept."""
    if isinstance(value, dict):
        if field in _MAP_FIELDS:
            return dict(value)
        return {_go_name(k): _go_struct(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_struct(v) for v in value]
    return value


def _go_spec(spec: dict) -> dict:
    """A pod spec shaped like the internal Go struct, every field present, in declaration order."""
    out = {_go_name(f): _go_struct(spec.get(f, "" if f in _STRING_FIELDS else None), f) for f in _SPEC_FIELDS}
    security = spec.get("securityContext")
    if isinstance(security, dict):
        out["SecurityContext"] = {_go_name(f): _go_struct(security.get(f, False if f in _BOOL_FIELDS else None))
                                  for f in _SECURITY_FIELDS}
    return out


def spec_diff(old_spec: dict, new_spec: dict) -> str:
    """The unified diff of the two specs printed as Go marshals them, as the real message shows it."""
    old_lines = json.dumps(_go_spec(old_spec), indent=1).splitlines()
    new_lines = json.dumps(_go_spec(new_spec), indent=1).splitlines()
    diff = list(difflib.unified_diff(old_lines, new_lines, n=3, lineterm=""))[2:]
    return "".join(line + "\n" for line in diff)


def binding_conflict(pod: dict) -> str | None:
    """Why a binding of this pod must be refused (a 409), or None."""
    name, spec = pod["metadata"]["name"], pod.get("spec") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return f"pod {name} is being deleted, cannot be assigned to a host"
    if spec.get("nodeName"):
        return f'pod {name} is already assigned to node "{spec["nodeName"]}"'
    if spec.get("schedulingGates"):
        return f"pod {name} has non-empty .spec.schedulingGates"
    return None
