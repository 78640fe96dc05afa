"""What a member says about itself: an Event on the pod (`kubectl describe pod`) when it first
waits and whenever the reason changes, and one when it is released with its group; and which
members a pass tells.

Users look at their pods, not at Gangs: a gated pod whose Events say nothing gets a ticket filed.
So each member is told, in its group's words (the same as its Gang's `Admitted` condition), with
the reason its Gang shows:
  - waiting (its group's verdict Waiting, or Failed by its schedule timeout, or admitted and
    waiting for the work it preempts to go): `Waiting: ` and the verdict, then where to look
    further, `(kubectl get gang NAME -n NS)`: `Waiting: required topology.kubernetes.io/zone:
    needs 32 nvidia.com/gpu in one zone; … (kubectl get gang train-3f9c -n ml)`. A group short of
    members says it in one sentence that names the group (`incomplete.waiting_for_members`):
    `Waiting for 1 more pod of group half (1 of 2 present; gangkeeper.io/min-count=2)`. A
    declaration problem (sizes that disagree, say) is a Warning;
  - released: `Released to node-3 with its group of 8` (reason Released);
  - rolled back or preempted: its group's own report says so on each of its pods
    (`rollback`, `preempting`); that is remembered as told, nothing more is written.
Not told: a member reserved and released by the next pass (its release is told), a member
waiting to join a group that runs (an elastic extra, a replacement: its Gang says how many are
placed), and the pod a group without a Gang reports on (its group's Events are on it already).

Once per change: what each member was told is remembered (`memory.Told`): the reason and, for a
group that does not fit, the constraint it is short of (capacity freed changes the numbers, not
the reason); for a problem its message; for a release the node. Numbers that change with every
pod (members present, GPUs free) are not news: the Event says what held when it was written, the
Gang what holds now. A member that waits on for the same reason is told it again every
`RETELL_SECONDS` (in the same words, that bumps its Event's count and keeps the Event, which the API
server would otherwise delete an hour after it was written). A member told of its release is
forgotten (a gate removed never comes back).

Bounded: a pass tells at most `Settings.pod_events_per_pass` members, releases first, then the
members of the groups waiting longest; the rest are told by the passes that follow, which fall
due `TELL_AGAIN_SECONDS` later. After a restart the memory is empty: each waiting member is told
once more what it waits for; in the same words, that bumps the count of the Event it has (the
executor names Events after their words, `controller.acting.executor`), else a new Event says it.
"""

from collections.abc import Mapping
from operator import attrgetter
from typing import NamedTuple

from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.deciding.decisions import EVENT_MESSAGE_MAX, Involved, Phase, Reason, TellPod, Verdict
from gangkeeper.controller.deciding.memory import Told
from gangkeeper.controller.deciding.state import PassState
from gangkeeper.controller.model.members import GroupKey

TELL_AGAIN_SECONDS = 1.0  # a pass that left members untold is followed by another this soon
# A member still waiting for the same reason is told again this long after, so that its Event does
# not age out: the API server keeps an Event an hour after its last write (`--event-ttl`).
RETELL_SECONDS = 1800.0
# Verdicts whose report is on each of the group's pods already (`Report.on_pods`).
_TOLD_BY_THEIR_REPORT = frozenset({Reason.ROLLED_BACK, Reason.PREEMPTED})


class Telling(NamedTuple):
    """A member to tell, and where it ranks among this pass's (`tell_chosen`); its Event is made
    only if it is chosen."""

    rank: tuple
    group: GroupKey
    uid: str
    pod: str
    told: Told
    message: str
    warning: bool


class _News(NamedTuple):
    told: Told
    message: str
    warning: bool = False


def tell(state: PassState, view: GangView, verdict: Verdict, gang: str | None, reported_on: str | None) -> None:
    """Find which of the group's members have news since they were last told (module docstring)
    and remember what the others were told. `gang` names the group's Gang (None: it has none),
    `reported_on` the pod its reports go to when it has none. Settings that tell none ask nothing."""
    if not state.settings.pod_events_per_pass:
        return
    key = view.group.key
    before: Mapping[str, Told] = state.memory.told.get(key, {})
    released = state.released.get(key)
    waiting = _waiting(state, view, verdict, gang)
    hushed = verdict.reason in _TOLD_BY_THEIR_REPORT
    remembered: dict[str, Told] = {}
    size = None
    for position, facts in enumerate(view.pods):  # every pass, for every waiting member: kept lean
        member = facts.member
        uid = member.uid
        said = before.get(uid)
        node = released.get(uid) if released else None
        if node is None and member.gated:
            if hushed:
                remembered[uid] = Told(verdict.reason, "", state.now)
                continue
            if waiting is None or (said is not None and waiting.told.same(said)
                                   and state.now - said.at < RETELL_SECONDS):
                if said is not None:  # nothing to tell now, or told already
                    remembered[uid] = said
                continue
            news = waiting
        else:
            if node is None:  # released: by a pass that had no room to tell it, or told already (forgotten)
                if said is None or said.reason is Reason.RELEASED:
                    continue
                node = member.node or member.reserved_node
                if not node:
                    continue
            if size is None:
                size = sum(1 for m in view.group.members if not m.terminal and (m.node or m.reserved_node))
            news = _News(Told(Reason.RELEASED, node, state.now), released_words(node, size))
            if said is not None and news.told.same(said):
                remembered[uid] = said
                continue
        if member.terminal or uid == reported_on:
            continue
        if said is not None:
            remembered[uid] = said
        rank = (0 if node else 1, view.group.first_seen, key, position)
        state.untold.append(Telling(rank, key, uid, member.name, *news))
    if remembered:
        state.remembered.told[key] = remembered


def tell_chosen(state: PassState) -> None:
    """Tell this pass's share of the members with news (module docstring); the pass falls due
    again soon when some are left."""
    limit = state.settings.pod_events_per_pass
    chosen = sorted(state.untold, key=attrgetter("rank"))[:limit]
    for telling in chosen:
        state.actions.append(TellPod(telling.group, Involved("v1", "Pod", telling.pod, telling.uid),
                                     telling.told.reason, telling.message, telling.warning))
        state.remembered.told.setdefault(telling.group, {})[telling.uid] = telling.told
    if limit and len(state.untold) > limit:
        state.figures.due.append(state.now + TELL_AGAIN_SECONDS)


def released_words(node: str, size: int) -> str:
    return f"Released to {node} with its group of {size}" if size > 1 else f"Released to {node}"


def _waiting(state: PassState, view: GangView, verdict: Verdict, gang: str | None) -> _News | None:
    """What the group's gated members are told while it waits; None while it is not waiting, or
    its report told them (module docstring)."""
    waits = (verdict.phase is Phase.WAITING or verdict.reason is Reason.PREEMPTING
             or (verdict.phase is Phase.FAILED and verdict.reason is Reason.TIMED_OUT))
    if not waits or verdict.reason in _TOLD_BY_THEIR_REPORT:
        return None
    problem = view.problem is not None
    no_fit = state.no_fits.get(view.group.key) if verdict.reason is Reason.NO_FIT else None
    detail = verdict.message if problem else ",".join(no_fit.limiting) if no_fit is not None else ""
    return _News(Told(verdict.reason, detail, state.now), waiting_words(verdict, gang, view.group.key[0]), problem)


def waiting_words(verdict: Verdict, gang: str | None, namespace: str) -> str:
    """What a waiting member is told (module docstring): its group's verdict and where to look
    further, the verdict cut short rather than the hint when both would not fit in an Event."""
    if verdict.reason is Reason.INCOMPLETE:  # the sentence names the group
        return verdict.message
    said = (f"{verdict.message[:1].upper()}{verdict.message[1:]}" if verdict.phase is Phase.FAILED
            else f"Waiting: {verdict.message}")
    hint = f" (kubectl get gang {gang} -n {namespace})" if gang is not None else ""
    if len(said) + len(hint) > EVENT_MESSAGE_MAX:
        said = said[:EVENT_MESSAGE_MAX - len(hint) - 1] + "…"
    return said + hint
