from datetime import datetime, timedelta, timezone

import pytest

from gangkeeper.controller.leader import (
    Action,
    LeaderElector,
    LeaseRecord,
    Observation,
    claim,
    decide,
    default_identity,
    expires_at,
    micro_time,
    must_step_down,
    observe,
    release,
)
from gangkeeper.controller.reading.kube import LEASES
from sim.api import APIError

from .conftest import eventually

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/gangkeeper/leases/gangkeeper-controller"


# --- the pure decision --------------------------------------------------------------------

def held(holder, duration=15, transitions=0, renew="2026-11-30T09:00:00.000000Z"):
    return LeaseRecord(holder, duration, "2026-11-30T08:00:00.000000Z", renew, transitions)


@pytest.mark.parametrize("observation, now, action", [
    (None, 0, Action.CREATE),
    (Observation(held("me"), 0), 100, Action.RENEW),                # ours, even late: renew
    (Observation(held("other"), 0), 14.9, Action.WAIT),
    (Observation(held("other"), 0), 15, Action.ACQUIRE),            # expired by our clock
    (Observation(held("other", duration=40), 0), 30, Action.WAIT),  # the holder's duration counts
    (Observation(held("other", duration=0), 0), 15, Action.ACQUIRE),  # none written: ours
    (Observation(held(""), 0), 0, Action.ACQUIRE),                   # released
    (Observation(held("other", renew="2001-01-01T00:00:00.000000Z"), 10), 20, Action.WAIT),  # remote time ignored
])
def test_decide(observation, now, action):
    assert decide(observation, now, "me", 15) is action


def test_the_countdown_restarts_only_when_the_record_changes():
    first = observe(None, held("other"), 5)
    assert observe(first, held("other"), 9) is first
    assert observe(first, held("other", renew="2026-11-30T09:00:02.000000Z"), 9) == Observation(
        held("other", renew="2026-11-30T09:00:02.000000Z"), 9)


def test_a_takeover_counts_a_transition_and_a_renewal_does_not():
    taken = claim(held("other", transitions=3), "me", T0, 15)
    assert taken == LeaseRecord("me", 15, "2026-11-30T09:00:00.000000Z", "2026-11-30T09:00:00.000000Z", 4)
    renewed = claim(taken, "me", T0 + timedelta(seconds=2), 15)
    assert renewed.transitions == 4 and renewed.acquire_time == taken.acquire_time
    assert renewed.renew_time == "2026-11-30T09:00:02.000000Z"
    assert claim(None, "me", T0, 15).transitions == 0
    assert claim(held("", transitions=4), "me", T0, 15).transitions == 5


def test_release_leaves_no_holder_and_a_short_lease():
    released = release(held("me", transitions=2), T0)
    assert (released.holder, released.duration_seconds, released.transitions) == ("", 1, 2)


@pytest.mark.parametrize("last, now, down", [(0, 9.9, False), (0, 10, True), (5, 12, False)])
def test_step_down_after_the_renew_deadline(last, now, down):
    assert must_step_down(last, now, 10) is down


def test_expiry_counts_the_holders_duration_from_when_we_saw_the_change():
    assert expires_at(Observation(held("other", duration=40), 3), 15) == 43
    assert expires_at(Observation(held("other", duration=0), 3), 15) == 18


def test_lease_record_round_trip():
    lease = {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "x", "renewTime": "y",
                      "leaseTransitions": 2}}
    assert LeaseRecord.from_lease(lease).to_spec() == lease["spec"]
    assert LeaseRecord.from_lease({}).to_spec()["acquireTime"] is None


def test_time_format_and_identity(monkeypatch):
    assert micro_time(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)) == "2026-01-02T03:04:05.000006Z"
    monkeypatch.setenv("POD_NAME", "gangkeeper-controller-7d9f-abcde")
    identity = default_identity()
    assert identity.startswith("gangkeeper-controller-7d9f-abcde_") and identity != default_identity()


def test_timings_are_checked():
    with pytest.raises(ValueError, match="lease duration"):
        LeaderElector(None, "ns", "l", lease_duration=10, renew_deadline=10)


# --- over HTTP --------------------------------------------------------------------------------

class Candidate:
    """An elector driven step by step on a shared fake clock."""

    def __init__(self, kube, clock, name, **options):
        self.calls = []
        self.elector = LeaderElector(
            kube, "gangkeeper", "gangkeeper-controller", name, clock=lambda: clock[0],
            wall_clock=lambda: T0 + timedelta(seconds=clock[0]),
            on_started_leading=lambda: self.calls.append("started"),
            on_stopped_leading=lambda: self.calls.append("stopped"), **options)

    def step(self):
        self.elector.step()
        return self.elector.is_leader

    def watched(self, api, record):
        """The Lease changes to `record` and the watch delivers the change (the thread is not running)."""
        self.elector._seen("gangkeeper/gangkeeper-controller", LeaseRecord.from_lease(put_lease(api, record)))


@pytest.fixture
def clock():
    return [0.0]


def put_lease(api, record):
    """The Lease written as another client would write it: created, or its spec replaced."""
    body = {"metadata": {"name": "gangkeeper-controller", "namespace": "gangkeeper"}, "spec": record.to_spec()}
    try:
        return api.create(LEASES.name, body)
    except APIError:
        return api.update(LEASES.name, body)


def lease(api):
    return api.get(LEASES.name, "gangkeeper-controller", namespace="gangkeeper")["spec"]


def test_one_leader_and_a_takeover_when_it_stops_renewing(api, kube, clock):
    a, b = Candidate(kube, clock, "a"), Candidate(kube, clock, "b")
    assert a.step() and not b.step()
    assert lease(api)["holderIdentity"] == "a" and a.calls == ["started"]
    clock[0] = 2
    assert a.step() and lease(api)["renewTime"] == "2026-11-30T09:00:02.000000Z"
    clock[0] = 16  # b sees the renewal only now: its countdown starts at 16, whatever renewTime says
    assert not b.step()
    clock[0] = 30.9
    assert not b.step()
    clock[0] = 31
    assert b.step() and b.calls == ["started"]
    assert lease(api)["holderIdentity"] == "b" and lease(api)["leaseTransitions"] == 1
    assert not a.step() and a.calls == ["started", "stopped"]  # someone else holds it: step down at once


def test_a_leader_that_cannot_renew_steps_down_at_the_deadline(served, kube, clock):
    a = Candidate(kube, clock, "a")
    assert a.step()
    for second in (4, 9.9, 10):
        served.faults.answer_next("get", LEASE_PATH, 503, {"kind": "Status", "code": 503})
        clock[0] = second
        a.step()
        assert a.calls == (["started"] if second < 10 else ["started", "stopped"])
    assert sum(1 for r in served.requests if r[:2] == ("get", LEASE_PATH)) == 4  # no retries inside


def test_a_write_that_loses_the_race_is_a_failed_try(served, kube, clock):
    a, b = Candidate(kube, clock, "a"), Candidate(kube, clock, "b")
    assert a.step() and not b.step()
    clock[0] = 20
    served.faults.answer_next("patch", LEASE_PATH, 409, {"kind": "Status", "code": 409, "reason": "Conflict"})
    assert not b.step() and b.calls == []


def test_stopping_releases_the_lease_for_a_quick_takeover(api, kube, clock):
    a = Candidate(kube, clock, "a", lease_duration=1, renew_deadline=0.5, retry_period=0.01)
    a.elector.start()
    eventually(lambda: a.elector.is_leader)
    a.elector.stop()
    assert a.calls == ["started", "stopped"]
    assert lease(api)["holderIdentity"] == "" and lease(api)["leaseDurationSeconds"] == 1
    b = Candidate(kube, clock, "b")
    assert b.step() and lease(api)["leaseTransitions"] == 1


def test_a_leader_stops_acting_at_its_renew_deadline_even_before_its_loop_runs(api, kube, clock):
    a = Candidate(kube, clock, "a")
    assert a.step()
    clock[0] = 9.9
    assert a.elector.is_leader
    clock[0] = 10
    assert not a.elector.is_leader and a.calls == ["started"]  # the callback follows at the next step
    assert a.step() and a.calls == ["started", "stopped", "started"]  # a late renewal is a new term


def test_the_renew_deadline_counts_from_when_the_renewal_was_sent(kube):
    """A renewal that took 3 s to answer: the follower's countdown may have started when it was
    committed, so the leader's authority runs from the moment it sent it, not from the answer."""
    readings = iter([0.0])
    now = [3.0]
    elector = LeaderElector(kube, "gangkeeper", "gangkeeper-controller", "a",
                            clock=lambda: next(readings, now[0]), wall_clock=lambda: T0)
    elector.step()
    now[0] = 9.9
    assert elector.is_leader
    now[0] = 10
    assert not elector.is_leader


def test_a_leader_wakes_at_its_deadline_to_step_down(api, kube, clock):
    a = Candidate(kube, clock, "a")
    assert a.step()
    assert a.elector.pause() == 2
    clock[0] = 9
    assert a.elector.pause() == 1


def test_a_candidate_wakes_when_the_lease_it_watches_expires(api, kube, clock):
    b = Candidate(kube, clock, "b", random=lambda: 1.0)
    b.watched(api, held("a"))
    assert b.step() is False
    assert b.elector.pause() == pytest.approx(4.4)  # retry period × (1 + 1.2)
    clock[0] = 13
    assert b.elector.pause() == 2                    # the lease seen at 0 expires at 15
    clock[0] = 15
    assert b.elector.pause() == 0 and b.step()


def test_a_renewal_the_watch_delivers_restarts_the_countdown(api, kube, clock):
    b = Candidate(kube, clock, "b")
    b.watched(api, held("a"))
    assert not b.step()
    clock[0] = 5
    b.watched(api, held("a", renew="2026-11-30T09:00:05.000000Z"))  # seen at once, not at b's next read
    clock[0] = 15
    assert not b.step()
    clock[0] = 20
    assert b.step()


def test_the_watch_wakes_a_candidate_when_the_lease_is_released(api, served, kube):
    """A candidate between two slow tries (30 s or more) takes a released Lease at once."""
    put_lease(api, held("a", duration=60))
    started = []
    b = LeaderElector(kube, "gangkeeper", "gangkeeper-controller", "b", lease_duration=60, renew_deadline=40,
                      retry_period=30, on_started_leading=lambda: started.append(True)).start()
    try:
        eventually(lambda: any(r.verb == "watch" for r in served.requests))
        eventually(lambda: any(r[:2] == ("get", LEASE_PATH) for r in served.requests))
        put_lease(api, release(held("a"), T0))
        eventually(lambda: started == [True])
        assert lease(api)["holderIdentity"] == "b"
    finally:
        b.stop()
