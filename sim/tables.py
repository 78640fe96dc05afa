"""Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): what `kubectl get` prints.

The real server turns objects into rows with its printers (`pkg/printers/internalversion`) and a
custom resource's rows from its CRD's `additionalPrinterColumns`; the cells below are computed the
same way, for pods, nodes, namespaces and events (the printers transcribed) and for custom
resources with printer columns. Every other kind gets NAME and AGE, as a custom resource without
printer columns does. The server always fills the wide columns (priority 1); kubectl shows them
with `-o wide`. Ages are counted on the API server's clock, as on a real server.

A list asked as `as=PartialObjectMetadataList` (the same group) is the objects' metadata alone.
"""

from __future__ import annotations

import json

from sim.clock import epoch
from sim.kinds import Kind

TABLE_GROUP = "meta.k8s.io"
_NAME = {"name": "Name", "type": "string", "format": "name", "priority": 0,
         "description": "Name must be unique within a namespace. Is required when creating resources, although some "
                        "resources may allow a client to request the generation of an appropriate name automatically. "
                        "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
                        "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"}
_AGE_DESCRIPTION = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is "
                    "not guaranteed to be set in happens-before order across separate operations. Clients may not set "
                    "this value. It is represented in RFC3339 form and is in UTC.")


def _column(name: str, description: str = "", priority: int = 0, type_: str = "string") -> dict:
    return {"name": name, "type": type_, "format": "", "description": description, "priority": priority}


_AGE = _column("Age", _AGE_DESCRIPTION)
_POD_COLUMNS = [
    _NAME,
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column("Restarts", "The number of times the containers in this pod have been restarted and when the last "
                        "container in this pod has restarted."),
    _AGE,
    _column("IP", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
                  "allocated.", 1),
    _column("Node", "NodeName indicates in which node this pod is scheduled.", 1),
    _column("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
                              "cannot be scheduled right away as preemption victims receive their graceful "
                              "termination periods.", 1),
    _column("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.", 1),
]
_NODE_COLUMNS = [
    _NAME, _column("Status", "The status of the node"), _column("Roles", "The roles of the node"), _AGE,
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
    _column("External-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
    _column("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
    _column("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
    _column("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
                                 "containerd://1.4.2).", 1),
]
_NAMESPACE_COLUMNS = [_NAME, _column("Status", "The status of the namespace"), _AGE]
_EVENT_COLUMNS = [
    _column("Last Seen", "The last time that this event was seen."), _column("Type", "Type of this event."),
    _column("Reason", "Reason is why the action was taken."), _column("Object", "The object this Event is about."),
    _column("Subobject", "The subobject this Event is about.", 1), _column("Source", "The source of this event.", 1),
    _column("Message", "A human-readable description of the status of this operation."),
    _column("First Seen", "The first time that this event was seen.", 1),
    _column("Count", "The number of times this event has occurred.", 1), _column("Name", "The name of the event.", 1),
]
_DEFAULT_COLUMNS = [_NAME, _AGE]


def wanted_table(accept: str) -> str | None:
    """The Table version (`v1`, `v1beta1`) the Accept header asks for before plain JSON, else None."""
    for media in accept.split(","):
        kind, params = _media(media)
        if params.get("as") == "Table" and params.get("g") == TABLE_GROUP and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
        if kind in ("application/json", "*/*", "application/*") and "as" not in params:
            return None
    return None


def wanted_metadata(accept: str) -> bool:
    """Whether the Accept header asks for a list of the objects' metadata alone
    (`as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`) before plain JSON."""
    for media in accept.split(","):
        kind, params = _media(media)
        if (params.get("as"), params.get("g"), params.get("v")) == ("PartialObjectMetadataList", TABLE_GROUP, "v1"):
            return True
        if kind in ("application/json", "*/*", "application/*") and "as" not in params:
            return False
    return False


def metadata_list(objects: list[dict], meta: dict) -> dict:
    """A PartialObjectMetadataList of `objects`: what a metadata-only informer reads."""
    return {"kind": "PartialObjectMetadataList", "apiVersion": f"{TABLE_GROUP}/v1", "metadata": meta,
            "items": [_partial(obj) for obj in objects]}


def _media(text: str) -> tuple[str, dict[str, str]]:
    kind, *params = [part.strip() for part in text.split(";")]
    return kind.lower(), dict(p.split("=", 1) for p in params if "=" in p)


def table(kind: Kind, objects: list[dict], now: float, *, version: str = "v1", printer_columns: list[dict] | None = None,
          include_object: str = "Metadata", headers: bool = True, meta: dict | None = None) -> dict:
    """A meta.k8s.io Table of `objects`, rows in order; `printer_columns` are a CRD's, when it has them."""
    columns, cells = _printer(kind, printer_columns)
    rows = []
    for obj in objects:
        row = {"cells": cells(obj, now), "object": _row_object(obj, include_object)}
        conditions = _conditions(kind, obj)
        if conditions:
            row["conditions"] = conditions
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"{TABLE_GROUP}/{version}", "metadata": meta or {},
            "columnDefinitions": columns if headers else None, "rows": rows}


def _printer(kind: Kind, printer_columns: list[dict] | None):
    if printer_columns:
        return _custom_columns(printer_columns), lambda obj, now: _custom_cells(printer_columns, obj, now)
    if kind.group == "" and kind.plural in _BUILT_IN:
        return _BUILT_IN[kind.plural]
    return _DEFAULT_COLUMNS, lambda obj, now: [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"), now)]


def _row_object(obj: dict, include: str) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return _partial(obj)


def _partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{TABLE_GROUP}/v1", "metadata": obj["metadata"]}


def _conditions(kind: Kind, obj: dict) -> list[dict]:
    phase = (obj.get("status") or {}).get("phase") if kind.plural == "pods" and not kind.group else None
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed "
                                                                                          "successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return []


# --- ages ----------------------------------------------------------------------------------

def age(stamp: str | None, now: float) -> str:
    """`translateTimestampSince`: how long ago, as `duration.HumanDuration` words it."""
    if not stamp:
        return "<unknown>"
    return human_duration(now - epoch(stamp))


def human_duration(seconds_: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    seconds = int(seconds_)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m" if seconds % 60 == 0 else f"{minutes}m{seconds % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


# --- pods: printPod ------------------------------------------------------------------------

def pod_status(pod: dict) -> str:
    """The STATUS column: the phase, refined by gates, init and container states and deletion."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or ()):
        reason = "SchedulingGated"
    initializing, reason = _init_reason(spec, status, reason)
    if not initializing or _condition_true(status, "Initialized"):
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = (f"Signal:{terminated['signal']}" if terminated.get("signal")
                          else f"ExitCode:{terminated.get('exitCode', 0)}")
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(status, "Ready") else "NotReady"
    deleting = pod["metadata"].get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason


def _init_reason(spec: dict, status: dict, reason: str) -> tuple[bool, str]:
    restartable = {c["name"] for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
    statuses = status.get("initContainerStatuses") or []
    for position, container in enumerate(statuses):
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if container.get("name") in restartable and container.get("started"):
            continue
        if terminated is not None:
            if terminated.get("reason"):
                return True, f"Init:{terminated['reason']}"
            return True, (f"Init:Signal:{terminated['signal']}" if terminated.get("signal")
                          else f"Init:ExitCode:{terminated.get('exitCode', 0)}")
        if waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return True, f"Init:{waiting['reason']}"
        return True, f"Init:{position}/{len(spec.get('initContainers') or ())}"
    return False, reason


def _condition_true(status: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ())


def _pod_cells(pod: dict, now: float) -> list:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    restartable = {c["name"] for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or ()) + len(restartable)
    ready = sum(1 for c in status.get("containerStatuses") or ()
                if c.get("ready") and ((c.get("state") or {}).get("running") is not None))
    ready += sum(1 for c in status.get("initContainerStatuses") or ()
                 if c.get("name") in restartable and c.get("started") and c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ())
    restarts += sum(int(c.get("restartCount") or 0) for c in status.get("initContainerStatuses") or ()
                    if c.get("name") in restartable)
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    readiness = "<none>"
    if gates:
        passed = sum(1 for gate in gates if _condition_true(status, gate.get("conditionType", "")))
        readiness = f"{passed}/{len(gates)}"
    return [pod["metadata"]["name"], f"{ready}/{total}", pod_status(pod), str(restarts),
            age(pod["metadata"].get("creationTimestamp"), now), (ips[0].get("ip") if ips else "") or "<none>",
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", readiness]


# --- nodes, namespaces, events -------------------------------------------------------------

def _node_cells(node: dict, now: float) -> list:
    status, labels = node.get("status") or {}, node["metadata"].get("labels") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    states = [] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in labels if k.startswith("node-role.kubernetes.io/")}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "") or "<none>"
    return [node["metadata"]["name"], ",".join(states), ",".join(r for r in roles if r) or "<none>",
            age(node["metadata"].get("creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _namespace_cells(namespace: dict, now: float) -> list:
    return [namespace["metadata"]["name"], (namespace.get("status") or {}).get("phase", ""),
            age(namespace["metadata"].get("creationTimestamp"), now)]


def _event_cells(event: dict, now: float) -> list:
    first = age(event.get("firstTimestamp") or event.get("eventTime"), now)
    last = age(event["lastTimestamp"], now) if event.get("lastTimestamp") else first
    involved = event.get("involvedObject") or {}
    target = involved.get("kind", "").lower() + (f"/{involved['name']}" if involved.get("name") else "")
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    origin = f"{component}, {source['host']}" if source.get("host") else component
    return [last, event.get("type", ""), event.get("reason", ""), target, involved.get("fieldPath", ""), origin,
            (event.get("message") or "").strip(), first, int(event.get("count") or 1), event["metadata"]["name"]]


_BUILT_IN = {"pods": (_POD_COLUMNS, _pod_cells), "nodes": (_NODE_COLUMNS, _node_cells),
             "namespaces": (_NAMESPACE_COLUMNS, _namespace_cells), "events": (_EVENT_COLUMNS, _event_cells)}


# --- custom resources: additionalPrinterColumns ---------------------------------------------

def _custom_columns(printer_columns: list[dict]) -> list[dict]:
    return [_NAME] + [{"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
                       "description": c.get("description", ""), "priority": c.get("priority", 0)}
                      for c in printer_columns]


def _custom_cells(printer_columns: list[dict], obj: dict, now: float) -> list:
    cells: list = [obj["metadata"]["name"]]
    for column in printer_columns:
        value = json_path(obj, column["jsonPath"])
        if value is None:
            cells.append(None)
        elif column.get("type") == "date":
            cells.append(age(value, now) if isinstance(value, str) else None)
        elif column.get("type") == "integer":
            cells.append(value if isinstance(value, int) and not isinstance(value, bool) else None)
        elif column.get("type") == "string":
            cells.append(value if isinstance(value, str) else _as_text(value))
        else:
            cells.append(value)
    return cells


def _as_text(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value).lower() if isinstance(value, bool) else str(value)


def json_path(obj: dict, path: str):
    """A printer column's simple JSONPath (`.status.phase`, `.spec.items[0].name`); None when absent."""
    node = obj
    for part in path.strip().strip("{}").lstrip(".").split("."):
        name, _, index = part.partition("[")
        if name:
            node = node.get(name) if isinstance(node, dict) else None
        if index:
            position = index.rstrip("]")
            node = node[int(position)] if isinstance(node, list) and position.lstrip("-").isdigit() \
                and -len(node) <= int(position) < len(node) else None
        if node is None:
            return None
    return node
