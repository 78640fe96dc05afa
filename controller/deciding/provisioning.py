"""Asking an autoscaler for the nodes a waiting group needs (docs/design.md, "Autoscaled clusters").

Autoscalers add nodes only for pods that are pending and unschedulable, and every member that
gangkeeper holds back is gated: on an autoscaled cluster, a group that does not fit would wait
for ever while the cluster could grow to fit it. So a group that waits for capacity that new
nodes could supply (its NoFit is not `fixed`: not a volume or claim already on a node, not pods it
must sit beside) asks for it, by `Settings.provisioning.mode`:

  - ProvisioningRequest: one PodTemplate per distinct member shape and one request counting
    them, of the atomic class by default: the autoscaler adds all the nodes or none. Once it is
    Provisioned, the group is planned before the queue, onto what appeared, and its members are
    released with the consume annotations (`booking.release`), so that the autoscaler counts them
    against its booking. Failed, BookingExpired or CapacityRevoked is reported once (an Event
    and the Gang's condition) and asked again, as a new request, after a backoff that doubles.
  - Placeholders: one ungated pause pod per member still to place, in its shape, of a negative
    PriorityClass (any real pod preempts them; they preempt nothing), which any autoscaler sees
    pending and serves. Once one stands bound for every member, the group is planned with their
    room counted free: its members are reserved, the placeholders deleted, and the members
    released once they are gone (the preemption's wait, `preempting.waiting_for_room`).
    Placeholders not all bound within `placeholder_seconds` are taken back, and asked again
    after the backoff. A placeholder the scheduler preempted is made again.

A group asking for more than the autoscaler may add (`Provisioning.limits`) is reported once
and asks for nothing. Everything asked is taken back (deleted) once the group runs, finishes,
is rolled back, suspended or preempted, and when the group is gone (its Gang owns it all, and
the pass that sees every group deletes what no group waits for). At most one ask stands per group.
"""

from collections.abc import Iterable, Sequence
from fractions import Fraction

from gangkeeper import names
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.deciding import capacity_bodies as bodies
from gangkeeper.controller.deciding.booking import gang_of, provisioned, reserve
from gangkeeper.controller.deciding.decisions import (
    CreateObject,
    DeleteObject,
    GangEvent,
    Phase,
    Reason,
    Verdict,
)
from gangkeeper.controller.deciding.memory import Asking, Channel, News, Room
from gangkeeper.controller.deciding.reporting import report, verdict_of
from gangkeeper.controller.deciding.settings import CapacityProvisioning
from gangkeeper.controller.deciding.state import PassState, accelerators_asked
from gangkeeper.controller.model.capacity import (
    PLACEHOLDERS,
    POD_TEMPLATES,
    PROVISIONING_REQUESTS,
    Answer,
    CapacityRequest,
    attempt_of,
)
from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import Plan
from gangkeeper.controller.planning.queue import admission_view
from gangkeeper.quantity import format_quantity
from gangkeeper.wording import first_of

PLACEHOLDERS_UNBOUND = "PlaceholdersUnbound"  # how an ask by placeholders comes to nothing (the metrics' word)
# A group's state that takes back what was asked for it: it no longer waits for capacity.
_TAKEN_BACK = frozenset({Reason.ROLLED_BACK, Reason.SUSPENDED, Reason.PREEMPTED, Reason.MEMBERS_DELETED,
                         Reason.FINISHED, Reason.BOUND, Reason.TIMED_OUT})


def place_provided(state: PassState, queue: Sequence[GangView], pool: NodePool, ledger: Ledger,
                   occupancy: Occupancy) -> tuple[list[GangView], Ledger, Occupancy] | None:
    """Plan first, before the queue, the groups whose capacity came: a request provisioned for
    them, or a placeholder bound for each member to place. A group that fits is reserved (its
    placeholders deleted, its release waiting for them to go); the others stay in the queue.
    Returns the queue left and the ledger and occupancy with the reservations counted, or None
    when no group was placed this way (the queue then plans on the index's own, and may reuse the
    last pass's answers)."""
    mode = state.settings.provisioning.mode
    if mode is CapacityProvisioning.NONE or not state.index.asked:
        return None
    working, around, placed = ledger, occupancy, set()
    for view in sorted(queue, key=lambda v: v.group.first_seen):
        gang = gang_of(state, view)
        if gang is None:
            continue
        held = _bound_placeholders(state, view, gang) if mode is CapacityProvisioning.PLACEHOLDERS else None
        if held is None and (mode is not CapacityProvisioning.PROVISIONING_REQUEST or provisioned(state, view) is None):
            continue
        trial, trial_around = working.copy(), around.copy()
        for placeholder in held or ():
            trial.forget(placeholder.uid)
            trial_around.uncount(placeholder.uid)
        plan = plan_group(admission_view(view.group), pool, trial, state.settings.policy.topology, trial_around)
        if not isinstance(plan, Plan):
            continue
        apply(plan, trial, trial_around, pool)
        working, around = trial, trial_around
        placed.add(view.group.key)
        state.figures.capacity_came.append(max(state.now - view.group.first_seen, 0.0))
        reserve(state, view, plan)
        if held:
            _swap(state, view, held, plan)
        else:
            state.verdicts[view.group.key] = Verdict(Phase.ADMITTED, Reason.RESERVED,
                                                     f"{len(plan.assignments)} members reserved on the capacity "
                                                     f"provisioned for it")
    if not placed:
        return None
    return [view for view in queue if view.group.key not in placed], working, around


def ask_for_capacity(state: PassState, view: GangView) -> None:
    """Ask for the group's capacity, follow what was asked, or take it back (module docstring)."""
    gang = gang_of(state, view)
    if gang is None:
        return
    requests = [r for r in state.index.asked.requests(gang.uid) if not r.deleting]
    placeholders = [p for p in state.index.asked.placeholders(gang.uid) if not p.terminating]
    if not requests and not placeholders and state.settings.provisioning.mode is CapacityProvisioning.NONE:
        return
    verdict = verdict_of(state, view)
    if verdict.phase is Phase.ADMITTED:  # its members go where it was reserved: what still waits is not needed
        _take_back(state, view, [], placeholders if verdict.reason is not Reason.PREEMPTING else [])
        return
    if verdict.phase is not Phase.WAITING or verdict.reason in _TAKEN_BACK:
        _take_back(state, view, requests, placeholders)
        return
    if verdict.reason is not Reason.NO_FIT:
        return  # queued behind another group, short of members, backing off: what stands is kept
    no_fit = state.no_fits.get(view.group.key)
    mode = state.settings.provisioning.mode
    if mode is CapacityProvisioning.NONE or no_fit is None or no_fit.fixed:
        _take_back(state, view, requests, placeholders)
        return
    wanted = [m for m in admission_view(view.group).members if m.waiting]
    over = _over_limits(state, wanted)
    if over:
        _take_back(state, view, requests, placeholders)
        message = f"asks for more than the autoscaler may add ({over}): not asked for; waiting for capacity to come free"
        state.verdicts[view.group.key] = Verdict(Phase.WAITING, Reason.TOO_LARGE, message)
        return
    if mode is CapacityProvisioning.PROVISIONING_REQUEST:
        _take_back(state, view, [], placeholders)
        if state.capabilities.serves_provisioning_requests:
            _by_request(state, view, gang, requests, wanted, no_fit.reason)
    else:
        _take_back(state, view, requests, [])
        _by_placeholders(state, view, gang, placeholders, wanted, no_fit.reason)


def take_back_unclaimed(state: PassState, claimed: Iterable[str]) -> None:
    """Delete what was asked for Gangs that no group decided now has (their group is gone, their
    Gang kept): on the passes that decide every group."""
    asked = state.index.asked
    for gang in asked.gangs() - set(claimed):
        requests = [r for r in asked.requests(gang) if not r.deleting]
        placeholders = [p for p in asked.placeholders(gang) if not p.terminating]
        namespace = (requests[0].namespace if requests else placeholders[0].namespace)
        key = (namespace, f"gang uid {gang}")
        state.actions += _deletions(key, requests, placeholders)


# --- ProvisioningRequest ---------------------------------------------------------------------


def _by_request(state: PassState, view: GangView, gang: Workload, requests: list[CapacityRequest],
                wanted: list[Member], why: str) -> None:
    key = view.group.key
    settings = state.settings.provisioning
    current = max(requests, key=lambda r: r.attempt, default=None)
    older = [r for r in requests if r is not current]
    state.actions += _deletions(key, older, [])
    if current is None:
        _request(state, view, gang, 1, wanted)
        return
    name = f"ProvisioningRequest {current.name}"
    if current.answer is Answer.CONSUMED:  # its booking was taken, and the group waits again: ask anew
        state.actions += _deletions(key, [current], [])
        _request(state, view, gang, current.attempt + 1, wanted)
    elif current.answer.closed:
        retry_at = current.since + settings.backoff(current.attempt)
        message = f"{name} {current.answer.value.lower()}" + (f" ({current.message})" if current.message else "")
        _failed(state, view, current.answer.value, News(current.answer, current.message), message)
        if state.now >= retry_at:
            state.actions += _deletions(key, [current], [])
            _request(state, view, gang, current.attempt + 1, wanted)
            return
        state.figures.due.append(retry_at)
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING_FAILED,
                                      f"{message}; asking again in {retry_at - state.now:.0f}s")
    elif current.answer is Answer.NOT_FOUND:  # beyond what it can add now: it keeps trying by itself
        message = (f"the autoscaler finds no capacity for {name} ({current.message}); it keeps looking, and the "
                   f"group keeps waiting")
        _failed(state, view, current.answer.value, News(current.answer, current.message), message)
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING_FAILED, message)
    elif current.answer is Answer.PROVISIONED:
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING,
                                      f"{name} provisioned; waiting for its nodes to take the group: {why}")
    else:
        answer = f" ({current.message})" if current.message else ""
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING,
                                      f"waiting for the autoscaler to provision {name}{answer}: {why}")


def _request(state: PassState, view: GangView, gang: Workload, attempt: int, wanted: list[Member]) -> None:
    """The templates, then the request naming them (one chain of writes: `acting.executor`)."""
    key, settings = view.group.key, state.settings.provisioning
    templates = []
    for index, (member, count) in enumerate(bodies.shapes(wanted)):
        body = bodies.pod_template(gang, attempt, index, member)
        state.actions.append(CreateObject(key, POD_TEMPLATES, body))
        templates.append((body["metadata"]["name"], count))
    body = bodies.provisioning_request(gang, attempt, settings.provisioning_class, templates)
    state.actions.append(CreateObject(key, PROVISIONING_REQUESTS, body))
    state.figures.capacity_asked.append((view.group.key[0], _accelerators(state, wanted)))
    message = (f"asked the autoscaler for {len(wanted)} pods ({_amounts(state, wanted)}) at once: ProvisioningRequest "
               f"{body['metadata']['name']}, class {settings.provisioning_class}")
    report(state, view, GangEvent.PROVISIONING, Reason.PROVISIONING, message, force=True)
    state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING, message)


# --- placeholders ------------------------------------------------------------------------------


def _by_placeholders(state: PassState, view: GangView, gang: Workload, placeholders: list[Member],
                     wanted: list[Member], why: str) -> None:
    key, settings = view.group.key, state.settings.provisioning
    asking = state.memory.capacity.get(key, Asking(0, 0.0))
    attempt = max((attempt_of(p.labels) for p in placeholders), default=asking.attempt)
    current = [p for p in placeholders if attempt_of(p.labels) == attempt]
    state.actions += _deletions(key, [], [p for p in placeholders if attempt_of(p.labels) != attempt])
    if not current:
        if state.now < asking.retry_at:
            state.remembered.capacity[key] = asking
            state.figures.due.append(asking.retry_at)
            state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING_FAILED,
                                          f"placeholders taken back unbound; asking again in "
                                          f"{asking.retry_at - state.now:.0f}s")
            return
        _place_holders(state, view, gang, attempt + 1, wanted, range(len(wanted)))
        return
    state.remembered.capacity[key] = Asking(attempt, 0.0)
    since = min((p.created for p in current if p.created is not None), default=state.now)
    deadline = since + settings.placeholder_seconds
    bound = sum(1 for p in current if p.node)
    if state.now >= deadline:
        state.actions += _deletions(key, [], current)
        retry_at = state.now + settings.backoff(attempt)
        state.remembered.capacity[key] = Asking(attempt, retry_at)
        state.figures.due.append(retry_at)
        message = (f"{bound} of {len(current)} placeholders bound within {settings.placeholder_seconds:g}s: taken back; "
                   f"asking again in {retry_at - state.now:.0f}s")
        _failed(state, view, PLACEHOLDERS_UNBOUND, News(Reason.PROVISIONING_FAILED, str(attempt)), message)
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING_FAILED, message)
        return
    missing = _missing(gang, attempt, current, len(wanted))
    if missing:  # the scheduler preempted some, or there are more members to place now
        _place_holders(state, view, gang, attempt, wanted, missing, again=True)
    state.figures.due.append(deadline)
    state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING,
                                  f"waiting for nodes: {bound} of {len(wanted)} placeholders bound (taken back in "
                                  f"{deadline - state.now:.0f}s): {why}")


def _place_holders(state: PassState, view: GangView, gang: Workload, attempt: int, wanted: list[Member],
                   indices: Iterable[int], again: bool = False) -> None:
    key = view.group.key
    made = [bodies.placeholder(gang, attempt, index, wanted[index]) for index in indices]
    state.actions += [CreateObject(key, PLACEHOLDERS, body) for body in made]
    state.remembered.capacity[key] = Asking(attempt, 0.0)
    if again:
        return
    state.figures.capacity_asked.append((key[0], _accelerators(state, wanted)))
    message = (f"created {len(made)} placeholder pods ({_amounts(state, wanted)}), priority class "
               f"{names.PLACEHOLDER_PRIORITY_CLASS}, for the autoscaler to add nodes for: "
               f"{first_of([body['metadata']['name'] for body in made], 3)}")
    report(state, view, GangEvent.PROVISIONING, Reason.PROVISIONING, message, force=True)
    state.verdicts[key] = Verdict(Phase.WAITING, Reason.PROVISIONING, message)


def _missing(gang: Workload, attempt: int, current: list[Member], wanted: int) -> list[int]:
    """The indices of the placeholders to make again: gone (preempted), among the `wanted` first."""
    standing = {p.name for p in current}
    return [index for index in range(wanted) if bodies.object_name(gang, attempt, index) not in standing]


def _bound_placeholders(state: PassState, view: GangView, gang: Workload) -> list[Member] | None:
    """The group's placeholders when one stands bound for every member to place; else None."""
    placeholders = [p for p in state.index.asked.placeholders(gang.uid) if not p.terminating]
    wanted = sum(1 for m in admission_view(view.group).members if m.waiting)
    bound = [p for p in placeholders if p.node]
    return bound if wanted and len(bound) >= wanted else None


def _swap(state: PassState, view: GangView, held: list[Member], plan: Plan) -> None:
    """The members reserved where the placeholders stand: the placeholders go, the members are
    released once they are gone (`preempting.waiting_for_room`)."""
    key = view.group.key
    state.actions += _deletions(key, [], held)
    victims = {f"{p.namespace}/{p.name}": (p.uid, None) for p in held}
    state.remembered.preempting[key] = Room(state.now, victims, state.now)
    nodes = len(plan.nodes)
    message = (f"{len(plan.assignments)} members reserved on {nodes} nodes its {len(held)} placeholders held; "
               f"released once they are gone")
    report(state, view, GangEvent.PROVISIONING, Reason.PREEMPTING, message, force=True)
    state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING, message)


def _failed(state: PassState, view: GangView, how: str, news: News, message: str) -> None:
    """An ask that came to nothing: reported and counted once, when it is news."""
    if state.memory.reported.get((view.group.key, Channel.CAPACITY)) != news:
        state.figures.capacity_failed[how] += 1
    report(state, view, GangEvent.PROVISIONING_FAILED, Reason.PROVISIONING_FAILED, message, warning=True,
           channel=Channel.CAPACITY, news=news)


# --- both --------------------------------------------------------------------------------------


def _take_back(state: PassState, view: GangView, requests: Sequence[CapacityRequest],
               placeholders: Sequence[Member]) -> None:
    state.actions += _deletions(view.group.key, requests, placeholders)


def _deletions(key: tuple[str, str], requests: Iterable[CapacityRequest],
               placeholders: Iterable[Member]) -> list[DeleteObject]:
    deletions = []
    for request in requests:
        deletions.append(DeleteObject(key, PROVISIONING_REQUESTS, request.name, request.uid))
        deletions += [DeleteObject(key, POD_TEMPLATES, template, "") for template in request.templates]
    deletions += [DeleteObject(key, PLACEHOLDERS, p.name, p.uid) for p in placeholders]
    return deletions


def _over_limits(state: PassState, wanted: Sequence[Member]) -> str:
    """What the members ask beyond what the autoscaler may add, in words; "" when within."""
    limits = state.settings.provisioning.limits
    over = []
    for resource, limit in sorted(limits.items()):
        asked = sum((Fraction(m.requests.get(resource, 0)) for m in wanted), Fraction(0))
        if asked > limit:
            over.append(f"{format_quantity(asked)} {resource}, at most {format_quantity(limit)}")
    return "; ".join(over)


def _accelerators(state: PassState, members: Sequence[Member]) -> dict[str, float]:
    total: dict[str, float] = {}
    for member in members:
        for resource, amount in accelerators_asked(state, member.requests):
            total[resource] = total.get(resource, 0.0) + amount
    return total


def _amounts(state: PassState, members: Sequence[Member]) -> str:
    total = _accelerators(state, members)
    return ", ".join(f"{amount:g} {resource}" for resource, amount in sorted(total.items())) or "no accelerators"
