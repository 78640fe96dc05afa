"""The answers as tables for people, laid out as `kubectl describe` and `kubectl get` lay theirs
out: `Field:` lines, then tables with upper-case headers and columns three spaces apart."""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from gangkeeper.wording import first_of

NONE = "<none>"
GAP = "   "


def why_table(answer: Mapping, now: float) -> str:
    lines = _group(answer, now)
    events = answer.get("events")
    lines += ["", "Events:"] + (_indented(table(
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"),
        [(_age_of(e["lastSeen"], now), e["type"], e["reason"], e["object"], e["message"]) for e in events]))
        if events else [f"  {NONE if events is not None else 'not read'}"])
    return "\n".join(lines + _not_read(answer)) + "\n"


def plan_table(answer: Mapping, now: float) -> str:
    lines: list[str] = [f"Warning: {warning}" for warning in answer.get("warnings") or ()]
    groups = answer.get("groups") or ()
    for group in groups:
        lines += ([""] if lines else []) + _group(group, now)
    if not groups:
        lines.append("No group: gangkeeper would gate none of these pods.")
    for left in answer.get("leftOut") or ():
        lines.append(f"Not planned: {left}")
    return "\n".join(lines + _not_read(answer)) + "\n"


def top_table(answer: Mapping) -> str:
    groups = answer.get("groups") or []
    lines = table(("NAMESPACE", "GANG", "PHASE", "REASON", "PODS", "ACCELERATORS", "WAITING"),
                  [(g["namespace"], g["gang"], g["phase"], g["reason"] or "-", f"{g['present']}/{g['minCount']}",
                    g["accelerators"], _age(g["waitingSeconds"]) if g["waitingSeconds"] is not None else "-")
                   for g in groups]) if groups else ["No Gangs found."]
    phases = answer.get("phases") or {}
    if phases:
        lines += ["", "; ".join(f"{phase}: {tally['groups']} {'group' if tally['groups'] == 1 else 'groups'}, "
                                f"{tally['accelerators']} accelerators" for phase, tally in phases.items())]
    lines += [f"Skipped: {skipped}" for skipped in answer.get("skipped") or ()]
    return "\n".join(lines) + "\n"


def _group(answer: Mapping, now: float) -> list[str]:
    fields = [("Group", f"{answer['namespace']}/{answer['group']}"), ("Gang", answer.get("gang") or NONE),
              ("Owner", answer.get("owner") or NONE), ("Found by", answer["foundBy"]),
              ("Size", f"{answer['present']} pods present of min count {answer['minCount']}, priority "
                       f"{answer['priority']}"),
              ("Verdict", answer["verdict"]), ("Why", answer["reason"])]
    if answer.get("constraint"):
        fields.append(("Constraint", answer["constraint"]))
    status = answer.get("status")
    if status:
        says = ", ".join(str(part) for part in (status.get("phase"), status.get("reason")) if part)
        fields.append(("Gang says", f"{says}: {status['message']}" if status.get("message") else says))
    queue = answer.get("queue")
    if queue:
        ahead = [f"{g['group']} ({g['verdict']})" for g in queue["ahead"]]
        fields.append(("Queue", f"{queue['position']} of {queue['of']} waiting to be admitted; ahead: "
                                f"{first_of(ahead, 5) if ahead else 'none'}"))
    preemption = answer.get("preemption")
    if preemption is not None:
        victims = preemption["victims"]
        fields.append(("Preemption", f"{len(victims)} to preempt: {preemption['reason']}" if victims
                       else f"none: {preemption['reason']}"))
    lines = [f"{name + ':':<12}{value}" for name, value in fields]
    lines += ["", *table(("MEMBER", "STATE", "NODE", "ACCELERATORS"),
                         [(m["pod"], m["state"], m["node"] or "-", m["accelerators"]) for m in answer["members"]])]
    placement = answer.get("placement")
    if placement:
        lines += ["", *table(("NODE", "PODS"), [(n["node"], ", ".join(n["pods"])) for n in placement["nodes"]])]
    if preemption is not None and preemption["victims"]:
        lines += ["", *table(("VICTIM", "OWNER", "PRIORITY", "PODS", "ACCELERATORS", "NODES"),
                             [(v["name"], v["owner"] or v["kind"], v["priority"], v["pods"], v["accelerators"],
                               ", ".join(v["nodes"])) for v in preemption["victims"]])]
    closest = answer.get("closest")
    if closest:
        lines += ["", *table(("CLOSEST NODE", "FREE", "TAKES", "LACKS"),
                             [(c["node"], " ".join(f"{r}={v}" for r, v in c["free"].items()), c["takes"],
                               c["lacks"] or "-") for c in closest])]
    return lines


def _not_read(answer: Mapping) -> list[str]:
    unread = answer.get("notRead") or []
    return ["", f"Not read: {'; '.join(unread)}. The answer leaves them out."] if unread else []


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Columns as wide as their widest cell, the last one unpadded."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    return [GAP.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


def _indented(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def _age_of(stamp: str | None, now: float) -> str:
    if not stamp:
        return "-"
    try:
        return _age(now - datetime.fromisoformat(stamp).timestamp())
    except ValueError:
        return stamp


def _age(seconds: float) -> str:
    """As kubectl writes an age: 45s, 12m, 5h, 3d."""
    seconds = max(0, int(seconds))
    for unit, size, below in (("s", 1, 120), ("m", 60, 120 * 60), ("h", 3600, 48 * 3600)):
        if seconds < below:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"
