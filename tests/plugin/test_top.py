"""`kubectl gang top`: the Gangs' groups by phase — waiting first, the longest waiting first —
with what each holds or asks for, and a tally per phase."""

from gangkeeper.plugin.render import top_table
from gangkeeper.plugin.top import top
from tests.plugin.world import NOW, gang


def status(phase, accelerators, waiting_since=None, present=2):
    found = {"phase": phase, "reason": {"Waiting": "NoFit", "Running": "Bound"}.get(phase, "Reserved"),
             "present": present, "minCount": 2, "accelerators": accelerators,
             "conditions": [{"type": "Admitted", "status": "True", "message": f"{phase.lower()} message"}]}
    if waiting_since:
        found["waitingSince"] = waiting_since
    return found


def gangs():
    return [gang("run", "run", 2, status=status("Running", 16))[1],
            gang("new", "new", 2, status=status("Waiting", 8, "2025-01-01T00:09:00Z"))[1],
            gang("old", "old", 2, namespace="lab", status=status("Waiting", 32, "2025-01-01T00:00:00Z"))[1],
            gang("fresh", "fresh", 2)[1]]


def test_groups_come_by_phase_the_longest_waiting_first():
    answer = top(gangs(), NOW)
    assert [(g["gang"], g["phase"], g["waitingSeconds"]) for g in answer["groups"]] == [
        ("old", "Waiting", 600), ("new", "Waiting", 60), ("run", "Running", None), ("fresh", "Pending", None)]
    assert answer["phases"] == {"Waiting": {"groups": 2, "accelerators": 40}, "Running": {"groups": 1, "accelerators": 16},
                                "Pending": {"groups": 1, "accelerators": 0}}


def test_the_table_for_people():
    assert top_table(top(gangs(), NOW, ["secret (cannot list gangs.gangkeeper.io: forbidden)"])).splitlines() == [
        "NAMESPACE   GANG    PHASE     REASON   PODS   ACCELERATORS   WAITING",
        "lab         old     Waiting   NoFit    2/2    32             10m",
        "team        new     Waiting   NoFit    2/2    8              60s",
        "team        run     Running   Bound    2/2    16             -",
        "team        fresh   Pending   -        0/2    0              -",
        "",
        "Waiting: 2 groups, 40 accelerators; Running: 1 group, 16 accelerators; Pending: 1 group, 0 accelerators",
        "Skipped: secret (cannot list gangs.gangkeeper.io: forbidden)"]
