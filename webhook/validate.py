"""/validate policy: guard our gate and refuse declarations the controller could not act on.

Pure: an AdmissionRequest in, a Verdict out with *every* problem at once, each naming the field,
the value and what is accepted, so that one `kubectl apply` shows the user all there is to fix.
Warnings go where the request is allowed but probably not what was meant.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gangkeeper import names
from gangkeeper.identity import LABEL_VALUE_RULE, classify, is_valid_label_value
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import is_accelerator
from gangkeeper.webhook.patch import has_gate
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import AdmissionRequest

TIMEOUT_RANGE = (0, 2**31 - 1)
_SHOWN_CHARS = 64
_SHOWN_DEPTH = 32  # nesting shown in a refusal, at most

# Where a pod may declare its group, in the words of the field path.
_GROUP_DECLARATIONS = (
    ("labels", names.GROUP_LABEL),
    ("labels", names.NATIVE_POD_GROUP_LABEL),
    ("labels", names.PLUGINS_POD_GROUP_LABEL),
    ("annotations", names.VOLCANO_GROUP_ANNOTATION),
)


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
        return _verdict(gang_problems(new), (), f"{names.GANG_KIND} {request.operation}")
    if request.group or request.kind != "Pod":
        return Verdict(reason=f"{request.kind}: nothing to check")
    ledger = controller_annotation_problems(old, new, request.username, policy.controller_username)
    if request.operation == "CREATE":
        warnings = [*accelerator_warnings(new, policy.accelerator_patterns), *_min_count_warnings(new, request, policy)]
        return _verdict([*declaration_problems(new), *ledger], warnings, "pod CREATE")
    problems = [*gate_removal_problems(old, new, request.username, policy.controller_username),
                *group_change_problems(old, new),
                *ledger,
                *declaration_problems(new, changed_keys(old, new))]
    return _verdict(problems, (), "pod UPDATE")


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
    return [f"spec.schedulingGates: {username or 'an anonymous user'} removed the gate {names.SCHEDULING_GATE}; "
            f"only {controller_username} may remove it, once capacity for the whole group is reserved"]


def group_change_problems(old: Mapping, new: Mapping) -> list[str]:
    """A gated pod's group, and where the webhook found it, are fixed: the controller counts the
    pod as a member of that group, and the source tells it whether the pod belongs to the job."""
    if not has_gate(old):
        return []
    problems = []
    for section, key in (("labels", names.GROUP_LABEL), ("annotations", names.GROUP_SOURCE_ANNOTATION)):
        before, after = _metadata(old, section).get(key), _metadata(new, section).get(key)
        if before != after:
            problems.append(f"metadata.{section}[{key}]: changed from {_shown(before)} to {_shown(after)} while the "
                            f"pod is gated by {names.SCHEDULING_GATE}; the group of a gated pod cannot change "
                            f"(delete and re-create the pod)")
    return problems


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
    if wanted is None or wanted & set(_GROUP_DECLARATIONS):
        problems.extend(_conflicting_groups(pod))
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
                for section, key in _GROUP_DECLARATIONS if (value := _metadata(pod, section).get(key))}
    if len(set(declared.values())) <= 1:
        return []
    return [f"the pod names different groups: {', '.join(declared)}; "
            "declare one group, or give every declaration the same name"]


def _whole_number(low: int, high: int, what: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        digits = isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12
        return "" if digits and low <= int(value) <= high else f"write {what}, a whole number from {low} to {high}"

    return check


def _group_name(value: object) -> str:
    if isinstance(value, str) and value and is_valid_label_value(value):
        return ""
    return f"a group name must be a non-empty label value ({LABEL_VALUE_RULE})"


_CHECKS: dict[tuple[str, str], Callable[[object], str]] = {
    ("annotations", names.MIN_COUNT_ANNOTATION): _whole_number(*names.MIN_COUNT_RANGE, "the group's minimum size"),
    ("annotations", names.SCHEDULE_TIMEOUT_ANNOTATION): _whole_number(*TIMEOUT_RANGE, "a number of seconds"),
    ("labels", names.GROUP_LABEL): _group_name,
}


def accelerator_warnings(pod: Mapping, patterns: Iterable[str]) -> list[str]:
    """Accelerators are not overcommitted: a request that differs from its limit is a mistake."""
    patterns = tuple(patterns)
    spec = pod.get("spec") or {}
    warnings = []
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or ():
            resources = container.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            for resource in sorted(set(requests) & set(limits)):
                if is_accelerator(resource, patterns) and not _same_quantity(requests[resource], limits[resource]):
                    warnings.append(
                        f"spec.{kind}[{container.get('name', '?')}].resources: {resource} request "
                        f"{requests[resource]} differs from limit {limits[resource]}; write the same number in both")
    return warnings


def _min_count_warnings(pod: Mapping, request: AdmissionRequest, policy: Policy) -> list[str]:
    if names.MIN_COUNT_ANNOTATION not in _metadata(pod, "annotations"):
        return []
    found = classify(pod, namespace=request.namespace, excluded_namespaces=policy.excluded_namespaces,
                     accelerator_patterns=policy.accelerator_patterns)
    if found.is_member:
        return []
    return [f"metadata.annotations[{names.MIN_COUNT_ANNOTATION}] has no effect: the pod is in no group ({found.reason})"]


def _same_quantity(a: object, b: object) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return True  # the API server refuses a malformed quantity with its own message


# --- Gang objects --------------------------------------------------------------------------


def gang_problems(gang: Mapping) -> list[str]:
    spec = gang.get("spec") or {}
    problems = []
    if "minCount" not in spec:
        problems.append(f"spec.minCount: missing; write the group's minimum size, from "
                        f"{names.MIN_COUNT_RANGE[0]} to {names.MIN_COUNT_RANGE[1]}")
    for field, (low, high) in (("minCount", names.MIN_COUNT_RANGE), ("scheduleTimeoutSeconds", TIMEOUT_RANGE)):
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
