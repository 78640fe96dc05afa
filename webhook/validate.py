"""/validate policy: guard our gate, keep placeholder pods the controller's, and refuse
declarations the controller could not act on.

Pure: an AdmissionRequest in, a Verdict out with *every* problem at once, each naming the field,
the value and what is accepted, so that one `kubectl apply` shows the user all there is to fix.
Warnings go where the request is allowed but probably not what was meant.
"""

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gangkeeper import integrations, names
from gangkeeper.identity import LABEL_VALUE_RULE, classify, is_valid_label_value, placeholder_for
from gangkeeper.integrations.finding import LABEL_KEY_RULE, is_valid_label_key
from gangkeeper.webhook.patch import has_gate
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import AdmissionRequest
from gangkeeper.wording import first_of

TIMEOUT_RANGE = (0, 2**31 - 1)
_SHOWN_CHARS = 64
_SHOWN_DEPTH = 32  # nesting shown in a refusal, at most

# The annotations that declare a group's topology, and the size a slice size must divide.
_TOPOLOGY_DECLARATIONS = tuple(("annotations", key) for key in (*names.TOPOLOGY_ANNOTATIONS,
                                                                 names.MIN_COUNT_ANNOTATION))
_SLICE_SIZE_WHAT = "the members in one slice"
_SLICE_LABEL_WHAT = "the node label key every member of a slice shares one value of, such as nvidia.com/gpu.clique"
_DIVISORS_SHOWN = 12


@dataclass(frozen=True)
class Verdict:
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return not self.problems

    @property
    def message(self) -> str:
        count = len(self.problems)
        return f"gangkeeper refused this request ({count} problem{'s' * (count != 1)}): " + "; ".join(self.problems)


def validate(request: AdmissionRequest, policy: Policy) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict(reason=f"{request.operation}: nothing to check")
    new, old = request.object or {}, request.old_object or {}
    if request.group == names.GANG_GROUP and request.kind == names.GANG_KIND:
        if request.sub_resource == "status":
            return _verdict(reservation_problems(old, new, request.username, policy.controller_username), (),
                            f"{names.GANG_KIND} status {request.operation}")
        return _verdict(gang_problems(new), (), f"{names.GANG_KIND} {request.operation}")
    if request.group or request.kind != "Pod":
        return Verdict(reason=f"{request.kind}: nothing to check")
    ledger = controller_annotation_problems(old, new, request.username, policy.controller_username)
    what = "pod" if placeholder_for(new) is None else "placeholder pod"
    if request.operation == "CREATE":
        # No warning for an accelerator request that differs from its limit: the API server refuses
        # such a pod (extended resources are never overcommitted) before validating webhooks run.
        warnings = _min_count_warnings(new, request, policy)
        return _verdict([*placeholder_creation_problems(new, request.username, policy.controller_username),
                         *declaration_problems(new), *ledger], warnings, f"{what} CREATE")
    problems = [*gate_removal_problems(old, new, request.username, policy.controller_username),
                *group_change_problems(old, new),
                *placeholder_change_problems(old, new, request.username),
                *ledger,
                *declaration_problems(new, changed_keys(old, new))]
    return _verdict(problems, (), f"{what} UPDATE")


def _verdict(problems: Iterable[str], warnings: Iterable[str], what: str) -> Verdict:
    problems = tuple(problems)
    reason = f"{what}: {len(problems)} problem(s)" if problems else f"{what}: valid"
    return Verdict(problems, tuple(warnings), reason)


# --- pods ----------------------------------------------------------------------------------


def gate_removal_problems(old: Mapping, new: Mapping, username: str, controller_username: str) -> list[str]:
    """Only the controller removes our gate: anyone else would let one member of a group
    start alone, which is exactly what gang scheduling exists to prevent."""
    if not has_gate(old) or has_gate(new) or username == controller_username:
        return []
    namespace = (new.get("metadata") or {}).get("namespace") or (old.get("metadata") or {}).get("namespace")
    where = f" -n {namespace}" if namespace else ""
    return [f"spec.schedulingGates: {username or 'an anonymous user'} removed the gate {names.SCHEDULING_GATE}; "
            f"only {controller_username} may remove it, once capacity for the whole group is reserved "
            f"(why its group waits: kubectl get {names.GANG_PLURAL}{where}, column Reason)"]


def group_change_problems(old: Mapping, new: Mapping) -> list[str]:
    """A gated pod's group, and where the webhook found it, are fixed: the controller counts the
    pod as a member of that group, and the source tells it whether the pod belongs to the job."""
    if not has_gate(old):
        return []
    problems = []
    for section, key in (("labels", names.GROUP_LABEL), ("labels", names.PARENT_LABEL),
                         ("annotations", names.GROUP_SOURCE_ANNOTATION)):
        before, after = _metadata(old, section).get(key), _metadata(new, section).get(key)
        if before != after:
            problems.append(f"metadata.{section}[{key}]: changed from {_shown(before)} to {_shown(after)} while the "
                            f"pod is gated by {names.SCHEDULING_GATE}; the group of a gated pod cannot change "
                            f"(delete and re-create the pod)")
    return problems


def placeholder_creation_problems(pod: Mapping, username: str, controller_username: str) -> list[str]:
    """Only the controller creates placeholders. The webhook never gates one, so anyone else's would
    start at once, its gang scheduling skipped, or pass for capacity that a waiting group asked for."""
    group = placeholder_for(pod)
    if group is None or username == controller_username:
        return []
    return [f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: {username or 'an anonymous user'} created a pod labelled "
            f"{_shown(group)}; only {controller_username} creates placeholder pods (pause pods holding capacity for "
            f"a waiting group, never gated); remove the label"]


def placeholder_change_problems(old: Mapping, new: Mapping, username: str) -> list[str]:
    """A pod is a placeholder from its creation to its deletion, or never: a member that became one
    would no longer count in its group, and a placeholder that stopped being one would hold its node
    outside every group, beyond the controller's clean-up."""
    before, after = placeholder_for(old), placeholder_for(new)
    if before == after:
        return []
    if before is None:
        change = f"set to {_shown(after)}"
    elif after is None:
        change = f"removed (it was {_shown(before)})"
    else:
        change = f"changed from {_shown(before)} to {_shown(after)}"
    return [f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: {change} by {username or 'an anonymous user'}; it is set "
            f"at creation only: a placeholder keeps it, for the group it was created for, until the controller "
            f"deletes the pod, and no other pod can take it (leave it as it was)"]


# The reservation ledger: a pod whose owner could write these would reserve a node of its own
# choosing, or reset its bind timeout.
CONTROLLER_ANNOTATIONS = (names.RESERVED_NODE_ANNOTATION, names.RELEASED_AT_ANNOTATION)


def controller_annotation_problems(old: Mapping, new: Mapping, username: str, controller_username: str) -> list[str]:
    """Only the controller writes the reservation annotations, on creation (nobody) or after."""
    if username == controller_username:
        return []
    before, after = _metadata(old, "annotations"), _metadata(new, "annotations")
    return [f"metadata.annotations[{key}]: {'set' if key not in before else 'changed'} to {_shown(after.get(key))} "
            f"by {username or 'an anonymous user'}; only {controller_username} writes it"
            for key in CONTROLLER_ANNOTATIONS if before.get(key) != after.get(key)]


def reservation_problems(old: Mapping, new: Mapping, username: str, controller_username: str) -> list[str]:
    """Only the controller writes a Gang's `status.reservations`: an entry books a node for a pod,
    which the controller then releases without it ever having waited its turn."""
    if username == controller_username:
        return []
    before, after = _reservations(old), _reservations(new)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if not changed:
        return []
    return [f"status.reservations: {username or 'an anonymous user'} changed the entries of "
            f"{first_of(changed, 5)}; only {controller_username} writes them (the nodes it booked for the group's "
            f"members)"]


def _reservations(gang: Mapping) -> Mapping:
    found = (gang.get("status") or {}).get("reservations")
    return found if isinstance(found, Mapping) else {}


def declaration_problems(pod: Mapping, keys: Iterable[tuple[str, str]] | None = None) -> list[str]:
    """Problems with the pod's group declarations; only those of `keys` ((section, key) pairs)
    when given, so that an update is judged on what it changes."""
    wanted = None if keys is None else set(keys)
    problems = []
    for (section, key), check in _CHECKS.items():
        value = _metadata(pod, section).get(key)
        if value is not None and (wanted is None or (section, key) in wanted):
            problem = check(value)
            if problem:
                problems.append(f"metadata.{section}[{key}]: {_shown(value)} is not accepted: {problem}")
    if wanted is None or wanted & set(integrations.GROUP_DECLARATIONS):
        problems.extend(_conflicting_groups(pod))
    if wanted is None or wanted & set(_TOPOLOGY_DECLARATIONS):
        problems.extend(_slice_problems(_metadata(pod, "annotations")))
    return problems


def changed_keys(old: Mapping, new: Mapping) -> set[tuple[str, str]]:
    """(section, key) of every label and annotation that an update adds or changes."""
    changed = set()
    for section in ("labels", "annotations"):
        before, after = _metadata(old, section), _metadata(new, section)
        changed |= {(section, key) for key, value in after.items() if before.get(key) != value}
    return changed


def _conflicting_groups(pod: Mapping) -> list[str]:
    declared = {f"metadata.{section}[{key}]={_shown(value)}": value
                for section, key in integrations.GROUP_DECLARATIONS if (value := _metadata(pod, section).get(key))}
    if len(set(declared.values())) <= 1:
        return []
    return [f"the pod names different groups: {', '.join(declared)}; "
            "declare one group, or give every declaration the same name"]


def _slice_problems(annotations: Mapping) -> list[str]:
    """A slice needs its label and its size, and a group it divides when the pod says its size.

    Only the pod's own min count is known here: the size an owner declares (a Job, PyTorchJob
    or JobSet) is the controller's to check, and it reports a group it does not divide."""
    label, size = names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, names.TOPOLOGY_SLICE_SIZE_ANNOTATION
    low, high = names.SLICE_SIZE_RANGE
    if label in annotations and size not in annotations:
        return [f"metadata.annotations[{size}]: missing; metadata.annotations[{label}] needs it: write "
                f"{_SLICE_SIZE_WHAT}, a whole number from {low} to {high}, or remove {label}"]
    if size in annotations and label not in annotations:
        return [f"metadata.annotations[{label}]: missing; metadata.annotations[{size}] needs it: write "
                f"{_SLICE_LABEL_WHAT}, or remove {size}"]
    slice_size, min_count = annotations.get(size), annotations.get(names.MIN_COUNT_ANNOTATION)
    if (slice_size is None or min_count is None or _CHECKS[("annotations", size)](slice_size)
            or _CHECKS[("annotations", names.MIN_COUNT_ANNOTATION)](min_count)):
        return []  # unset, or refused on its own
    problem = _not_dividing(int(slice_size), int(min_count), f"metadata.annotations[{names.MIN_COUNT_ANNOTATION}]")
    return [f"metadata.annotations[{size}]: {_shown(slice_size)} is not accepted: {problem}"] if problem else []


def _not_dividing(slice_size: int, group_size: int, where: str) -> str:
    """Why `slice_size` does not fit a group of `group_size` declared at `where`; "" when it does."""
    if group_size % slice_size == 0:
        return ""
    small = [n for n in range(1, math.isqrt(group_size) + 1) if group_size % n == 0]
    divisors = sorted({*small, *(group_size // n for n in small)})
    fitting = (", ".join(map(str, divisors[:-1])) + f" or {divisors[-1]}" if 1 < len(divisors) <= _DIVISORS_SHOWN
               else f"a divisor of {group_size}")
    return (f"a group of {group_size} ({where}) is not a multiple of it; "
            f"write a slice size that divides {group_size}: {fitting}")


def _whole_number(low: int, high: int, what: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12
                and low <= int(value) <= high):
            return ""
        return f"write {what}, a whole number from {low} to {high}"

    return check


_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_OBJECT_NAME_MAX = 253


def _is_object_name(value: str) -> bool:
    return len(value) <= _OBJECT_NAME_MAX and _OBJECT_NAME.fullmatch(value) is not None


def _group_name(value: object) -> str:
    if isinstance(value, str) and value and is_valid_label_value(value):
        return ""
    return f"a group name must be a non-empty label value ({LABEL_VALUE_RULE})"


def _parent_name(value: object) -> str:
    if isinstance(value, str) and _is_object_name(value):
        return ""
    return (f"write the name of a parent Gang in the pod's namespace (lower-case letters, digits, '-' and '.', "
            f"at most {_OBJECT_NAME_MAX} characters; a label value, so at most 63)")


def _label_key(value: object) -> str:
    return "" if is_valid_label_key(value) else f"write {LABEL_KEY_RULE}"


_CHECKS: dict[tuple[str, str], Callable[[object], str]] = {
    ("annotations", names.MIN_COUNT_ANNOTATION): _whole_number(*names.MIN_COUNT_RANGE, "the group's minimum size"),
    ("annotations", names.SCHEDULE_TIMEOUT_ANNOTATION): _whole_number(*TIMEOUT_RANGE, "a number of seconds"),
    ("labels", names.GROUP_LABEL): _group_name,
    ("labels", names.PARENT_LABEL): _parent_name,
    ("annotations", names.TOPOLOGY_REQUIRED_ANNOTATION): _label_key,
    ("annotations", names.TOPOLOGY_PREFERRED_ANNOTATION): _label_key,
    ("annotations", names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION): _label_key,
    ("annotations", names.TOPOLOGY_SLICE_SIZE_ANNOTATION): _whole_number(*names.SLICE_SIZE_RANGE, _SLICE_SIZE_WHAT),
}


# Annotations that declare something of the pod's group: on a pod in no group they do nothing.
_GROUP_ANNOTATIONS = (names.MIN_COUNT_ANNOTATION, *names.TOPOLOGY_ANNOTATIONS)


def _min_count_warnings(pod: Mapping, request: AdmissionRequest, policy: Policy) -> list[str]:
    annotations = _metadata(pod, "annotations")
    present = [key for key in _GROUP_ANNOTATIONS if key in annotations]
    if not present:
        return []
    found = classify(pod, namespace=request.namespace, excluded_namespaces=policy.excluded_namespaces,
                     accelerator_patterns=policy.accelerator_patterns)
    if found.identity is not None and found.identity.source == names.SOURCE_ACCELERATOR_POD:
        # A lone accelerator pod is a group of one whatever it declares: its min count is not read.
        if names.MIN_COUNT_ANNOTATION not in present:
            return []
        return [f"metadata.annotations[{names.MIN_COUNT_ANNOTATION}] has no effect: with no group label and no "
                f"owner gangkeeper knows, this pod is a group of one ({found.reason}); to schedule it with others, "
                f"give each of them the label {names.GROUP_LABEL}=NAME"]
    if found.is_member:
        return []
    return [f"metadata.annotations[{key}] has no effect: the pod is in no group ({found.reason})" for key in present]


# --- Gang objects --------------------------------------------------------------------------


def gang_problems(gang: Mapping) -> list[str]:
    spec = gang.get("spec") or {}
    problems = []
    low_groups, high_groups = names.MIN_GROUP_COUNT_RANGE
    if "minCount" not in spec and "minGroupCount" not in spec:
        problems.append(f"spec.minCount: missing; write the group's minimum size, from "
                        f"{names.MIN_COUNT_RANGE[0]} to {names.MIN_COUNT_RANGE[1]} (or, for a parent of Gangs, "
                        f"spec.minGroupCount, from {low_groups} to {high_groups})")
    elif "minCount" in spec and "minGroupCount" in spec:
        problems.append(f"spec.minGroupCount: {_shown(spec['minGroupCount'])} is not accepted beside spec.minCount: "
                        f"a Gang is a group of pods (spec.minCount) or a parent of Gangs (spec.minGroupCount), "
                        f"not both: remove one")
    for field, (low, high) in (("minCount", names.MIN_COUNT_RANGE), ("scheduleTimeoutSeconds", TIMEOUT_RANGE),
                               ("minGroupCount", names.MIN_GROUP_COUNT_RANGE)):
        value = spec.get(field)
        if field in spec and not (type(value) is int and low <= value <= high):
            problems.append(f"spec.{field}: {_shown(value)} is not accepted: write a whole number from {low} to {high}")
    if "groupName" in spec:
        problem = _group_name(spec["groupName"])
        if problem:
            problems.append(f"spec.groupName: {_shown(spec['groupName'])} is not accepted: {problem}")
    elif not is_valid_label_value(name := (gang.get("metadata") or {}).get("name", "")):
        problems.append(f"metadata.name: {_shown(name)} cannot name a group: set spec.groupName "
                        f"to a label value ({LABEL_VALUE_RULE})")
    if "parent" in spec:
        problems.extend(_parent_problems(spec["parent"], (gang.get("metadata") or {}).get("name", "")))
    if "topology" in spec:
        problems.extend(gang_topology_problems(spec))
    return problems


def _parent_problems(parent: object, name: str) -> list[str]:
    """`spec.parent`: the name of another Gang of the namespace (whether it exists, and the tree's
    shape, the controller checks: `controller.cache.trees`)."""
    if not (isinstance(parent, str) and _is_object_name(parent)):
        return [f"spec.parent: {_shown(parent)} is not accepted: write the name of a parent Gang in the same "
                f"namespace (lower-case letters, digits, '-' and '.', at most {_OBJECT_NAME_MAX} characters)"]
    if parent == name:
        return [f"spec.parent: {_shown(parent)} is not accepted: a Gang cannot be its own parent; write the name "
                f"of another Gang, one with spec.minGroupCount"]
    return []


def gang_topology_problems(spec: Mapping) -> list[str]:
    """`spec.topology` as the members' topology annotations: label keys, and a slice size that
    comes with its label and divides `spec.minCount`."""
    topology = spec["topology"]
    fields = names.GANG_TOPOLOGY_FIELDS
    if not isinstance(topology, dict):
        return [f"spec.topology: {_shown(topology)} is not accepted: write an object with any of {', '.join(fields)}"]
    problems = []
    for field in fields[:3]:
        if field in topology and not is_valid_label_key(topology[field]):
            problems.append(f"spec.topology.{field}: {_shown(topology[field])} is not accepted: write {LABEL_KEY_RULE}")
    low, high = names.SLICE_SIZE_RANGE
    size = topology.get("sliceSize")
    valid_size = size if type(size) is int and low <= size <= high else None
    if "sliceSize" in topology and valid_size is None:
        problems.append(f"spec.topology.sliceSize: {_shown(size)} is not accepted: write {_SLICE_SIZE_WHAT}, "
                        f"a whole number from {low} to {high}")
    if "sliceRequired" in topology and "sliceSize" not in topology:
        problems.append(f"spec.topology.sliceSize: missing; spec.topology.sliceRequired needs it: write "
                        f"{_SLICE_SIZE_WHAT}, a whole number from {low} to {high}, or remove spec.topology.sliceRequired")
    elif "sliceSize" in topology and "sliceRequired" not in topology:
        problems.append(f"spec.topology.sliceRequired: missing; spec.topology.sliceSize needs it: write "
                        f"{_SLICE_LABEL_WHAT}, or remove spec.topology.sliceSize")
    if "minGroupCount" in spec:
        problems += [f"spec.topology.{field}: {_shown(topology[field])} is not accepted on a parent "
                     f"(spec.minGroupCount): a parent confines its children to one domain (spec.topology.required "
                     f"or preferred); give slices to its children" for field in fields[2:] if field in topology]
    min_count, (fewest, most) = spec.get("minCount"), names.MIN_COUNT_RANGE
    if valid_size is not None and type(min_count) is int and fewest <= min_count <= most:
        problem = _not_dividing(valid_size, min_count, "spec.minCount")
        if problem:
            problems.append(f"spec.topology.sliceSize: {size} is not accepted: {problem}")
    return problems


# --- small readers -------------------------------------------------------------------------


def _metadata(obj: Mapping, section: str) -> Mapping:
    return (obj.get("metadata") or {}).get(section) or {}


def _labels(obj: Mapping) -> Mapping:
    return _metadata(obj, "labels")


def _shown(value: object) -> str:
    """The value as the user wrote it, cut so that a huge value does not flood the message.

    A value nested deeper than `_SHOWN_DEPTH` is not shown (found by bench/fuzz.py: a Gang's
    minCount nested 1,000 levels deep); the depth is measured without recursion, so the answer
    does not depend on the interpreter's recursion limit, which libraries may change."""
    if _depth(value) > _SHOWN_DEPTH:
        return f"(a JSON {type(value).__name__} nested too deeply to show)"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _depth(value: object) -> int:
    """How deeply lists and objects nest in a JSON value (0 for a scalar)."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth + 1)
            if deepest > _SHOWN_DEPTH:
                return deepest
            pending += [(child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest
