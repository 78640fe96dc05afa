"""PriorityClasses and the Priority admission plugin, as kube-apiserver v1.36 applies them.

On a pod's create, before any webhook (plugin/pkg/admission/priority):
  - `spec.priorityClassName` names a PriorityClass, whose `value` and `preemptionPolicy` the pod
    gets; without a name, the class with `globalDefault: true` if there is one (its name is
    written into the pod too), else priority 0 and `PreemptLowerPriority`;
  - a class that does not exist, or a `spec.priority` / `spec.preemptionPolicy` the pod sets
    itself that differs from what the class gives, is refused (403, the plugin's words);
  - a second class with `globalDefault: true` is refused by the same plugin (403).
The API server creates the two system classes at start (`SYSTEM_CLASSES`). A class a user
creates must be at most 1,000,000,000, must not be named `system-…`, and only one may be the
global default; its value and preemption policy cannot change.

Not modelled: the `PodPriority` per-namespace quota restrictions (`ResourceQuota` scopes).
"""

from collections.abc import Callable, Mapping

from sim.status import FieldError

PRIORITY_CLASSES = "priorityclasses"
HIGHEST_USER_DEFINABLE = 1_000_000_000
DEFAULT_PREEMPTION = "PreemptLowerPriority"
POLICIES = (DEFAULT_PREEMPTION, "Never")
SYSTEM_CLASSES = ({"name": "system-node-critical", "value": 2_000_001_000,
                   "description": "Used for system critical pods that must not be moved from their current node."},
                  {"name": "system-cluster-critical", "value": 2_000_000_000,
                   "description": "Used for system critical pods that must run in the cluster, but can be moved "
                                  "to another node if necessary."})

Lookup = Callable[[str], Mapping | None]


class Refused(Exception):
    """The plugin's refusal, worded as the API server returns it after `pods "NAME" is forbidden: `."""


def system_class(definition: Mapping) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": definition["name"]}, "value": definition["value"], "globalDefault": False,
            "description": definition["description"], "preemptionPolicy": DEFAULT_PREEMPTION}


def admit_pod(spec: dict, class_named: Lookup, default_class: Callable[[], Mapping | None]) -> None:
    """Resolve the pod's priority in place, or raise `Refused`."""
    name = spec.get("priorityClassName") or ""
    if name:
        priority_class = class_named(name)
        if priority_class is None:
            raise Refused(f"no PriorityClass with name {name} was found")
    else:
        priority_class = default_class()
        if priority_class is not None:
            spec["priorityClassName"] = priority_class["metadata"]["name"]
    value = priority_class["value"] if priority_class is not None else 0
    policy = (priority_class.get("preemptionPolicy") if priority_class is not None else None) or DEFAULT_PREEMPTION
    if spec.get("priority") is not None and spec["priority"] != value:
        raise Refused(f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; priority "
                      f"admission controller computed {value} from the given PriorityClass name")
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
        raise Refused(f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in pod "
                      f"spec; priority admission controller computed {policy} from the given PriorityClass name")
    spec["priority"], spec["preemptionPolicy"] = value, policy


def class_problems(obj: Mapping, others: list[Mapping], old: Mapping | None = None) -> list[FieldError]:
    """What the API refuses in a PriorityClass; `others` are the classes stored."""
    problems = []
    name = obj.get("metadata", {}).get("name", "")
    value = obj.get("value")
    system = any(definition["name"] == name for definition in SYSTEM_CLASSES)
    if not isinstance(value, int) or isinstance(value, bool):
        problems.append(FieldError("value", "Required", "must be an integer"))
    elif value > HIGHEST_USER_DEFINABLE and not system:
        problems.append(FieldError("value", "Forbidden", f"maximum allowed value of a user defined priority is "
                                                         f"{HIGHEST_USER_DEFINABLE}"))
    if name.startswith("system-") and not system:
        problems.append(FieldError("metadata.name", "Invalid", "priority class names with 'system-' prefix are "
                                                               "reserved for system use only", name))
    if obj.get("preemptionPolicy") not in POLICIES:
        problems.append(FieldError("preemptionPolicy", "NotSupported", ", ".join(f'"{p}"' for p in sorted(POLICIES)),
                                   obj.get("preemptionPolicy")))
    if old is not None and obj.get("value") != old.get("value"):
        problems.append(FieldError("value", "Forbidden", "may not be changed in an update."))
    if old is not None and obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
        problems.append(FieldError("preemptionPolicy", "Invalid", "field is immutable", obj.get("preemptionPolicy")))
    return problems


def second_default(obj: Mapping, others: list[Mapping]) -> str | None:
    """The admission plugin's refusal of a second global default (403), or None."""
    name = obj.get("metadata", {}).get("name", "")
    default = next((o["metadata"]["name"] for o in others if o.get("globalDefault") and o["metadata"]["name"] != name),
                   None)
    if obj.get("globalDefault") and default is not None:
        return f"PriorityClass {default} is already marked as default. Only one default can exist"
    return None
