"""What a pass says: Events and audit lines when a group's state changed (not every pass: what
was last reported is remembered per channel), its Gang's status when that did, and its members
what they have news of (`telling`); the group's verdict, and where its Gang is."""

from collections.abc import Mapping, Sequence

from gangkeeper import names
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.deciding import elastic, gangs, incomplete, telling
from gangkeeper.controller.deciding.decisions import GangEvent, Involved, Phase, Reason, Report, SaveGang, Verdict
from gangkeeper.controller.deciding.gangs import DEGRADED
from gangkeeper.controller.deciding.memory import Channel, News, Strength
from gangkeeper.controller.deciding.state import PassState
from gangkeeper.controller.deciding.timeouts import schedule_timed_out
from gangkeeper.controller.model.objects import Workload


def report(state: PassState, view: GangView, event: GangEvent, reason: Reason | str, message: str, *,
           pods: Sequence[str] = (), warning: bool = False, force: bool = False, channel: Channel = Channel.STATE,
           news: News | None = None, on_pods: bool = False) -> None:
    """A Report, unless the same news was reported last time on this channel (Events follow changes)."""
    key = view.group.key
    news = news if news is not None else News(reason)
    state.remembered.reported[(key, channel)] = news
    if force or state.memory.reported.get((key, channel)) != news:
        uids = {facts.member.name: facts.member.uid for facts in view.pods} if pods else {}
        state.actions.append(Report(key, event, reason, message, involved(state, view),
                                    tuple(Involved("v1", "Pod", pod, uids.get(pod, "")) for pod in pods), warning,
                                    on_pods))


def involved(state: PassState, view: GangView) -> Involved:
    """The Gang when there is (or will be) one, else the group's first pod. A Gang this pass
    creates has no uid yet: the executor learns it when it writes the Gang (`controller.acting.executor`)."""
    place = gang_place(state, view)
    if place is not None and (view.problem is None or place.existing is not None):
        return Involved(gangs.API_VERSION, names.GANG_KIND, place.name,
                        place.existing.uid if place.existing is not None else "")
    first = view.pods[0].member
    return Involved("v1", "Pod", first.name, first.uid)


def about(workload: Workload) -> Involved:
    """An owner or a Gang, as the Event on it names it."""
    return Involved(workload.api_version, workload.kind, workload.name, workload.uid)


def gang_place(state: PassState, view: GangView) -> gangs.GangPlace | None:
    """Where the group's Gang is or goes, when it keeps one."""
    found = state.places.get(view.group.key)
    if found is not None and found[0] is view:
        return found[1]
    place = gangs.find_gang(view, state.workloads) if gangs.keeps_gang(view, state.capabilities.serves_gangs) else None
    state.places[view.group.key] = (view, place)
    return place


def verdict_of(state: PassState, view: GangView) -> Verdict:
    """The group's verdict; one whose decision broke (`_guarded`) waits, as far as anyone can tell."""
    return state.verdicts.get(view.group.key) or incomplete_or_queued(state, view)


def incomplete_or_queued(state: PassState, view: GangView) -> Verdict:
    """A waiting group's verdict before the queue has its say: members missing (named by its Gang's
    name, else its label, with where its size came from), or waiting its turn."""
    group = view.group
    present = sum(1 for m in group.members if not m.terminal)
    if present < group.min_count:
        place = gang_place(state, view)
        ours = place is not None and place.existing is not None and place.existing.disposable
        return Verdict(Phase.WAITING, Reason.INCOMPLETE,
                       incomplete.waiting_for_members(view, place.name if place is not None else view.label, ours))
    return Verdict(Phase.WAITING, Reason.QUEUED,
                   f"{present} of {group.min_count} pods present; waiting for a planning pass")


# Waiting for reasons whose news the pass's parts report themselves: a rollback, and what an
# autoscaler was asked and answered (`controller.deciding.provisioning`).
_REPORTED_BY_THEMSELVES = frozenset({Reason.ROLLED_BACK, Reason.PROVISIONING, Reason.PROVISIONING_FAILED})


def report_and_status(state: PassState, view: GangView) -> None:
    """Events and audit lines when the group's state changed, its Gang's status when that did, and
    its members what they have news of (`telling.tell`).

    A waiting group is reported when the reason it waits changes (the Gang's status carries the
    details, which change with every bit of capacity freed); a problem, when its message does.
    """
    key, verdict = view.group.key, verdict_of(state, view)
    if verdict.phase is Phase.WAITING and verdict.reason not in _REPORTED_BY_THEMSELVES:
        problem = view.problem is not None
        report(state, view, GangEvent.WAITING, verdict.reason, verdict.message, warning=problem,
               news=News(verdict.reason, verdict.message if problem else None))
    elif verdict.phase is Phase.RUNNING:
        if key in state.memory.complete_at and state.memory.reported.get((key, Channel.STATE)) != News(Reason.BOUND):
            # First seen bound since it was complete.
            state.figures.bound_after.append(state.now - state.memory.complete_at[key])
        report(state, view, GangEvent.BOUND, Reason.BOUND, verdict.message)
    timed_out = verdict.reason is Reason.TIMED_OUT or (verdict.phase is Phase.WAITING
                                                       and schedule_timed_out(state, view.group))
    if timed_out:
        report(state, view, GangEvent.TIMED_OUT, Reason.TIMED_OUT,
               f"not admitted within {view.group.schedule_timeout_seconds:g}s"
               + ("; given up" if verdict.phase is Phase.FAILED else "; still waiting"),
               warning=True, channel=Channel.TIMEOUT)
    stuck = None
    if verdict.phase is Phase.WAITING and verdict.reason is Reason.INCOMPLETE:
        stuck = stuck_incomplete(state, view)
    save_status(state, view, verdict, timed_out, state.preempted.get(key), stuck=stuck,
                strength=strength_of(state, view, verdict))
    on = involved(state, view)
    gang, reported_on = (on.name, None) if on.kind == names.GANG_KIND else (None, on.uid)
    telling.tell(state, view, verdict, gang, reported_on)


def gang_status_of(state: PassState, view: GangView) -> Mapping | None:
    """The status of the group's Gang as it exists; None when it has none yet."""
    place = gang_place(state, view)
    return place.existing.status if place is not None and place.existing is not None else None


def strength_of(state: PassState, view: GangView, verdict: Verdict) -> Strength | None:
    """A group admitted or running: its members placed and its peak, remembered for the next pass
    (`controller.deciding.elastic`), and an Event and audit line when it becomes degraded (fewer
    placed than its peak) and when it recovers, once each: a Gang that says it is degraded already
    (a restart) is not told again."""
    if verdict.phase not in (Phase.ADMITTED, Phase.RUNNING):
        return None
    key, group, status = view.group.key, view.group, gang_status_of(state, view)
    found = elastic.strength(group, elastic.previous_peak(state.memory, group, status))
    if found is None:
        return None
    state.remembered.strengths[key] = found
    news = News(Reason.MEMBERS_LOST)
    was = (state.memory.reported.get((key, Channel.DEGRADED)) == news
           or any(c.get("type") == DEGRADED and c.get("status") == "True" for c in (status or {}).get("conditions") or ()))
    if found.degraded and was:
        state.remembered.reported[(key, Channel.DEGRADED)] = news
    elif found.degraded:
        report(state, view, GangEvent.DEGRADED, Reason.MEMBERS_LOST,
               f"running degraded: {elastic.condition_message(found, group)}: it lost members placed (a node drained "
               f"or failed, a member preempted or deleted); it keeps running while at least {group.min_count} stay "
               f"placed, and their replacements are placed as room frees", warning=True, channel=Channel.DEGRADED)
    elif was:
        report(state, view, GangEvent.RECOVERED, Reason.RECOVERED,
               f"recovered: {found.placed}/{found.peak} members placed, min {group.min_count}",
               channel=Channel.DEGRADED)
    return found


def stuck_incomplete(state: PassState, view: GangView) -> str | None:
    """What to say of a gated group short of members when no new one arrived for the set time
    (`controller.deciding.incomplete`): a Warning Event on its Gang and on each of its pods, and an audit
    line, once when it becomes stuck and again only when what it says changes. None while members
    still arrive; the pass then falls due when the set time will have passed."""
    key, threshold = view.group.key, state.settings.incomplete_group_seconds
    arrival = incomplete.last_arrival(view.group, state.memory.arrivals.get(key), key in state.memory.first_seen,
                                      state.now)
    state.remembered.arrivals[key] = arrival
    if not incomplete.stuck(arrival, state.now, threshold):
        state.figures.due.append(arrival.since + threshold)
        return None
    message = incomplete.message(view, threshold)
    state.figures.stuck[key[0]] += 1
    report(state, view, GangEvent.STUCK, Reason.INCOMPLETE_GROUP, message, warning=True,
           channel=Channel.INCOMPLETE, news=News(Reason.INCOMPLETE_GROUP, message),
           pods=[facts.member.name for facts in view.pods if not facts.member.terminal], on_pods=True)
    return message


def save_status(state: PassState, view: GangView, verdict: Verdict, timed_out: bool, preempted: str | None = None,
                *, now: bool = False, stuck: str | None = None, strength: Strength | None = None) -> None:
    """Write the group's Gang status when it changed (or `now`, when the change must show at once);
    `stuck` says what a group stuck incomplete waits for, `strength` what an admitted or running
    one has placed and had."""
    key = view.group.key
    place = gang_place(state, view)
    if place is None or (place.existing is None and view.problem is not None):
        return
    current = (place.existing.status if place.existing is not None else None) or {}
    attempts = state.remembered.rollbacks.get(key, (0, 0.0))[0]
    rollback = verdict.message if key in state.figures.rolled_back else None
    status = gangs.gang_status(view, verdict, timed_out, attempts, state.settings.accelerator_patterns, current,
                               state.now, rollback, preempted, stuck, strength)
    if place.existing is not None and not now:
        due = gangs.status_due(current, status, state.memory.status_written.get(key), state.now)
        if due is None or due > state.now:
            state.figures.due += [due] if due is not None else []  # the pass then writes the details
            return
    state.remembered.status_written[key] = state.now
    state.actions.append(SaveGang(key, place.name, status,
                                  None if place.existing is not None else gangs.gang_body(view, place.name)))
