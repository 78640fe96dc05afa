"""The answers as tables for people: `kubectl describe`'s `Field:` lines, then tables with
upper-case headers and columns three spaces apart; what could not be read said last."""

from gangkeeper.plugin.render import plan_table, why_table
from tests.plugin.world import NOW, node, running, waiting, why


def test_a_group_that_preempts_shows_its_nodes_and_its_victims():
    answer = why([node("a"), node("b"), *running("low", ["a", "b"]), *waiting("urgent", 2, priority=100)],
                 "urgent-0", events=[])
    assert why_table(answer, NOW).splitlines() == [
        "Group:      team/urgent",
        "Gang:       <none>",
        "Owner:      <none>",
        "Found by:   explicit",
        "Size:       2 pods present of min count 2, priority 100",
        "Verdict:    Preempts",
        "Why:        it fits once lower-priority work is preempted: the controller reserves these nodes, preempts, "
        "and releases the members once the victims are gone",
        "Queue:      1 of 1 waiting to be admitted; ahead: none",
        "Preemption: 1 to preempt: taken whole, all of priority below 100",
        "",
        "MEMBER     STATE   NODE   ACCELERATORS",
        "urgent-0   gated   -      8",
        "urgent-1   gated   -      8",
        "",
        "NODE   PODS",
        "a      urgent-0",
        "b      urgent-1",
        "",
        "VICTIM     OWNER   PRIORITY   PODS   ACCELERATORS   NODES",
        "team/low   group   0          2      16             a, b",
        "",
        "Events:",
        "  <none>"]


def test_events_show_their_age_and_what_was_not_read_comes_last():
    events = [{"type": "Normal", "reason": "NoFit", "message": "no room", "lastTimestamp": "2025-01-01T00:07:00Z",
               "involvedObject": {"kind": "Gang", "name": "train"}}]
    answer = why([node("a"), *running("busy", ["a"]), *waiting("train", 1)], "train-0", events=events)
    answer["notRead"] = ["persistentvolumes (forbidden)"]
    assert why_table(answer, NOW).splitlines()[-5:] == [
        "Events:",
        "  LAST SEEN   TYPE     REASON   OBJECT       MESSAGE",
        "  3m          Normal   NoFit    Gang/train   no room",
        "",
        "Not read: persistentvolumes (forbidden). The answer leaves them out."]


def test_a_plan_says_its_warnings_first_and_what_it_left_out_last():
    answer = {"kind": "GangPlan", "groups": [], "leftOut": ["TrainJob t: its pods come from elsewhere"],
              "warnings": ["namespace team is not labelled gangkeeper.io/enforce=true"], "notRead": []}
    assert plan_table(answer, NOW).splitlines() == [
        "Warning: namespace team is not labelled gangkeeper.io/enforce=true",
        "No group: gangkeeper would gate none of these pods.",
        "Not planned: TrainJob t: its pods come from elsewhere"]
