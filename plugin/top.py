"""`top`: the groups by phase, from their Gangs, where the controller writes each group's state
(phase, reason, members present of min count, accelerators, and since when a waiting group waits).

Waiting groups come first, the longest waiting first, then those admitted, running and finished;
a Gang whose status the controller has not written yet is `Pending`. A lone accelerator pod
(a group of one) keeps no Gang and is not listed.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime

PENDING = "Pending"
PHASES = ("Waiting", "Admitted", "Running", PENDING, "Succeeded", "Failed")


def top(gangs: Iterable[Mapping], now: float, skipped: Iterable[str] = ()) -> dict:
    """The Gangs' groups, in phase order, and a count and the accelerators of each phase."""
    groups = sorted((_row(gang, now) for gang in gangs), key=_order)
    phases: dict[str, dict] = {}
    for row in groups:
        tally = phases.setdefault(row["phase"], {"groups": 0, "accelerators": 0})
        tally["groups"] += 1
        tally["accelerators"] += row["accelerators"]
    return {"kind": "GangTop", "groups": groups, "phases": phases, "skipped": list(skipped)}


def _row(gang: Mapping, now: float) -> dict:
    metadata, status = gang.get("metadata") or {}, gang.get("status") or {}
    admitted: Mapping = next((c for c in status.get("conditions") or () if c.get("type") == "Admitted"), {})
    since = _epoch(status.get("waitingSince"))
    return {"namespace": metadata.get("namespace"), "gang": metadata.get("name"),
            "phase": status.get("phase") or PENDING, "reason": status.get("reason") or "",
            "present": status.get("present", 0), "minCount": status.get("minCount", (gang.get("spec") or {}).get("minCount")),
            "accelerators": status.get("accelerators") or 0,
            "waitingSeconds": max(0, int(now - since)) if since is not None else None,
            "message": admitted.get("message") or ""}


def _order(row: Mapping) -> tuple:
    phase = row["phase"]
    rank = PHASES.index(phase) if phase in PHASES else len(PHASES)
    return rank, -(row["waitingSeconds"] or 0), row["namespace"] or "", row["gang"] or ""


def _epoch(stamp: object) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) and stamp else None
    except ValueError:
        return None
