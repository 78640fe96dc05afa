"""Asking an autoscaler for a waiting group's nodes (controller/deciding/provisioning.py), pass after
pass on the stand-in API (tests/controller/world.py): one ProvisioningRequest or one placeholder per
member, what the group does with what comes of it, and nothing left behind."""

import copy
from dataclasses import replace
from fractions import Fraction

from gangkeeper import names
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import (
    CreateObject,
    DeleteObject,
    Phase,
    Reason,
    Release,
    Report,
)
from gangkeeper.controller.deciding.settings import CapacityProvisioning, Provisioning, Settings
from tests.controller.builders import node_object
from tests.controller.world import NOW, NS, Run, World, booked, member_object, of, reports, rfc3339

GROUP = "train"


def _status(world: World) -> tuple[str, str]:
    """The Gang's Admitted condition: its reason and message."""
    gang = world.gang(GROUP)
    (admitted,) = [c for c in gang["status"]["conditions"] if c["type"] == "Admitted"]
    return admitted["reason"], admitted["message"]


def waiting_job(mode: CapacityProvisioning, *, members: int = 4, nodes: int = 2, **provisioning) -> Run:
    """`members` × 8-GPU members of one group on `nodes` 8-GPU nodes that each hold another's 8 GPUs."""
    world = World([node_object(f"n{i}") for i in range(nodes)])
    for i in range(nodes):
        world.add(member_object(f"busy-{i}", group=f"busy-{i}", min_count=1, gated=False, node_name=f"n{i}",
                                phase="Running"))
    for i in range(members):
        world.add(member_object(f"{GROUP}-{i}", group=GROUP, min_count=members,
                                node_selector={"cloud.example.com/accelerator": "h100"},
                                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    return Run(world, Settings(provisioning=Provisioning(mode=mode, **provisioning)))


def new_nodes(world: World, count: int, prefix: str = "new") -> None:
    for i in range(count):
        world.node(f"{prefix}-{i}", labels={"cloud.example.com/accelerator": "h100"})


def answered(world: World, condition: str, *, reason: str = "", message: str = "", at: float = NOW) -> dict:
    """The group's request, with the autoscaler's condition set."""
    (request,) = world.requests()
    request = copy.deepcopy(request)
    stamp = rfc3339(at)
    request.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": condition, "status": "True", "reason": reason, "message": message, "lastTransitionTime": stamp})
    world.put_request(request)
    return request


def ours(objects: list[dict]) -> list[dict]:
    """The objects asked for the group (the latecomer asks for its own)."""
    return [o for o in objects if o["metadata"]["name"].startswith(f"gangkeeper-{GROUP}-")]


# --- ProvisioningRequest ---------------------------------------------------------------------------


def test_a_group_short_of_nodes_asks_for_them_once_in_one_request_of_its_shape():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    first = run.step()
    assert of(first, CreateObject) == [], "its Gang is made first: what is asked for it is owned by it"
    asked = run.step()
    (template,) = run.world.templates()
    (request,) = run.world.requests()
    gang = run.world.gang(GROUP)
    spec = template["template"]["spec"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert container["resources"]["requests"] == {"cpu": "4", "memory": str(64 * 2**30), "nvidia.com/gpu": "8"}
    assert spec["nodeSelector"] == {"cloud.example.com/accelerator": "h100"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert request["spec"] == {"provisioningClassName": names.BEST_EFFORT_ATOMIC_SCALE_UP,
                               "podSets": [{"podTemplateRef": {"name": template["metadata"]["name"]}, "count": 4}]}
    for made in (template, request):
        assert made["metadata"]["ownerReferences"][0]["uid"] == gang["metadata"]["uid"]
        assert made["metadata"]["labels"][names.CAPACITY_FOR_LABEL] == gang["metadata"]["uid"]
    (said,) = reports(asked, "gang.provisioning")
    assert "32 nvidia.com/gpu" in said.message and request["metadata"]["name"] in said.message
    assert asked.decided_phases[(NS, GROUP)] == "Waiting"
    assert _status(run.world) == (Reason.PROVISIONING.value, said.message)
    for _ in range(3):
        assert of(run.step(), CreateObject) == [], "at most one request stands for a group"


def test_a_provisioned_group_is_placed_first_on_the_new_nodes_and_consumes_the_booking():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    request = answered(run.world, "Provisioned", reason="Provisioned")
    new_nodes(run.world, 4)
    run.world.add(member_object("latecomer-0", group="latecomer", min_count=1, gpus=8, created="2024-01-01T00:00:00Z"))
    reserving = run.step()
    assert sorted(b.node for b in booked(reserving, GROUP)) == ["new-0", "new-1", "new-2", "new-3"]
    assert booked(reserving, "latecomer") == [], "the nodes provisioned for the group are its, though the other came first"
    releasing = run.step()
    releases = of(releasing, Release)
    assert len(releases) == 4
    for release in releases:
        added = {op["path"]: op["value"] for op in release.patch if op["op"] == "add"}
        assert added["/metadata/annotations/autoscaling.x-k8s.io~1consume-provisioning-request"] == \
            request["metadata"]["name"]
        assert added["/metadata/annotations/autoscaling.x-k8s.io~1provisioning-class-name"] == \
            names.BEST_EFFORT_ATOMIC_SCALE_UP
    assert request in run.world.requests(), "the booking stands until the group runs"
    run.world.bind()
    run.step()
    assert ours(run.world.requests()) == [] and ours(run.world.templates()) == [], "taken back once the group runs"


def test_a_failed_request_is_reported_once_and_asked_again_after_a_backoff_that_doubles():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    first = run.world.requests()[0]["metadata"]["name"]
    answered(run.world, "Failed", reason="FailedToCreatePods", message="no node group fits", at=run.now)
    failing = run.step()
    (said,) = reports(failing, "gang.provisioning_failed")
    assert said.warning and "no node group fits" in said.message
    assert _status(run.world)[0] == Reason.PROVISIONING_FAILED.value
    assert "asking again in 60s" in _status(run.world)[1]
    quiet = [run.step(10) for _ in range(5)]
    assert not any(reports(o, "gang.provisioning_failed") or of(o, CreateObject) for o in quiet)
    run.now += 15
    again = run.step()
    assert {(a.resource.kind, a.name) for a in of(again, DeleteObject)} >= {("ProvisioningRequest", first)}
    (second,) = run.world.requests()
    assert second["metadata"]["labels"][names.CAPACITY_ATTEMPT_LABEL] == "2"
    assert len(run.world.templates()) == 1, "the first attempt's template went with its request"
    answered(run.world, "Failed", reason="FailedToCreatePods", message="no node group fits", at=run.now)
    assert reports(run.step(), "gang.provisioning_failed") == [], "the same answer is not news"
    assert "asking again in 120s" in _status(run.world)[1]


def test_a_request_the_autoscaler_finds_no_capacity_for_is_reported_once_and_left_to_it():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    (request,) = run.world.requests()
    request = copy.deepcopy(request)
    request["status"] = {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2027-01-15T08:00:00Z"},
        {"type": "Provisioned", "status": "False", "reason": names.CAPACITY_NOT_FOUND_REASON,
         "message": "Capacity is not found, CA will try to find it later.", "lastTransitionTime": "2027-01-15T08:00:00Z"}]}
    run.world.put_request(request)
    told = run.step()
    (said,) = reports(told, "gang.provisioning_failed")
    assert said.warning and "finds no capacity" in said.message and "keeps looking" in said.message
    later = [run.step(600) for _ in range(3)]
    assert not any(reports(o, "gang.provisioning_failed") or of(o, CreateObject) or of(o, DeleteObject) for o in later), \
        "the autoscaler retries by itself: the request stands, nothing is asked again"
    assert _status(run.world)[0] == Reason.PROVISIONING_FAILED.value


def test_a_booking_its_consumers_took_is_no_failure():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    answered(run.world, "BookingExpired", reason=names.BOOKING_CONSUMED_REASON, message="all pods scheduled")
    again = run.step()
    assert reports(again, "gang.provisioning_failed") == [] and again.capacity_failed == {}
    (request,) = run.world.requests()
    assert request["metadata"]["labels"][names.CAPACITY_ATTEMPT_LABEL] == "2", "the group waits again: it asks anew"


def test_an_expired_booking_is_asked_again():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    answered(run.world, "Provisioned", reason="Provisioned", at=run.now)
    answered(run.world, "BookingExpired", reason="BookingExpired", message="capacity not used in 10m", at=run.now)
    expired = run.step()
    (said,) = reports(expired, "gang.provisioning_failed")
    assert "bookingexpired" in said.message.lower()
    run.now += 61
    run.step()
    (request,) = run.world.requests()
    assert request["metadata"]["labels"][names.CAPACITY_ATTEMPT_LABEL] == "2"


def test_a_group_asking_for_more_than_the_autoscaler_may_add_asks_for_nothing_and_says_so_once():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST, limits={"nvidia.com/gpu": Fraction(24)})
    run.step()
    told = run.step()
    assert run.world.requests() == [] and of(told, CreateObject) == []
    reason, message = _status(run.world)
    assert reason == Reason.TOO_LARGE.value
    assert "32 nvidia.com/gpu, at most 24" in message
    events = [r for r in of(told, Report) if r.reason == Reason.TOO_LARGE]
    assert len(events) == 1
    assert not any(r.reason == Reason.TOO_LARGE for r in of(run.step(), Report))


def test_a_group_kept_out_by_pods_it_must_sit_beside_asks_for_nothing():
    world = World([node_object("n0")])
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(2):
        pod = member_object(f"{GROUP}-{i}", group=GROUP, min_count=2, gpus=4)
        pod["spec"]["affinity"] = affinity
        world.add(pod)
    run = Run(world, Settings(provisioning=Provisioning(mode=CapacityProvisioning.PROVISIONING_REQUEST)))
    for _ in range(3):
        assert of(run.step(), CreateObject) == []


def test_without_the_provisioning_request_api_nothing_is_asked():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.capabilities = ApiCapabilities(serves_provisioning_requests=False)
    for _ in range(3):
        assert of(run.step(), CreateObject) == []
    assert _status(run.world)[0] == Reason.NO_FIT.value


def test_a_request_whose_group_is_gone_is_deleted_on_the_pass_that_sees_every_group():
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    run.step()
    run.step()
    for i in range(4):
        run.world.delete(f"{NS}/{GROUP}-{i}")
    run.step()
    assert run.world.requests() == [] and run.world.templates() == []


# --- placeholders -----------------------------------------------------------------------------------


def placeholders(world: World) -> list[dict]:
    return [p for p in world.pods.values() if names.CAPACITY_FOR_LABEL in (p["metadata"].get("labels") or {})]


def test_placeholders_stand_in_for_every_member_ungated_and_of_the_lowest_priority():
    run = waiting_job(CapacityProvisioning.PLACEHOLDERS)
    run.step()
    asked = run.step()
    made = placeholders(run.world)
    assert len(made) == 4
    gang_uid = run.world.gang(GROUP)["metadata"]["uid"]
    for pod in made:
        assert "schedulingGates" not in pod["spec"]
        assert names.GROUP_LABEL not in pod["metadata"]["labels"], "no group counts a placeholder"
        assert pod["metadata"]["labels"][names.CAPACITY_FOR_LABEL] == gang_uid
        assert pod["spec"]["priorityClassName"] == names.PLACEHOLDER_PRIORITY_CLASS
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert pod["spec"]["nodeSelector"] == {"cloud.example.com/accelerator": "h100"}
    (said,) = reports(asked, "gang.provisioning")
    assert names.PLACEHOLDER_PRIORITY_CLASS in said.message
    assert of(run.step(), CreateObject) == [], "made once"


def bind_placeholders(world: World, nodes: list[str]) -> None:
    for pod, node in zip(placeholders(world), nodes):
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
        world.add(pod)


def test_bound_placeholders_are_swapped_for_the_members_who_are_released_once_they_are_gone():
    run = waiting_job(CapacityProvisioning.PLACEHOLDERS)
    run.step()
    run.step()
    new_nodes(run.world, 4)
    bind_placeholders(run.world, [f"new-{i}" for i in range(3)])
    assert booked(run.step(), GROUP) == [], "three of four placeholders bound: not yet"
    bind_placeholders(run.world, [f"new-{i}" for i in range(4)])
    swapping = run.step()
    assert sorted(b.node for b in booked(swapping, GROUP)) == [f"new-{i}" for i in range(4)]
    deleted = of(swapping, DeleteObject)
    assert sorted(a.name for a in deleted) == sorted(p["metadata"]["name"] for p in placeholders_before(swapping))
    assert of(swapping, Release) == []
    assert placeholders(run.world) == []
    released = of(run.step(), Release)
    assert sorted(r.node for r in released) == [f"new-{i}" for i in range(4)]


def placeholders_before(outcome) -> list[dict]:
    return [{"metadata": {"name": a.name}} for a in of(outcome, DeleteObject) if a.resource.kind == "Pod"]


def test_a_preempted_placeholder_is_made_again():
    run = waiting_job(CapacityProvisioning.PLACEHOLDERS)
    run.step()
    run.step()
    gone = placeholders(run.world)[1]["metadata"]["name"]
    run.world.delete(f"{NS}/{gone}")
    again = of(run.step(), CreateObject)
    assert [a.body["metadata"]["name"] for a in again] == [gone]


def test_placeholders_not_bound_in_time_are_taken_back_and_asked_again_after_the_backoff():
    run = waiting_job(CapacityProvisioning.PLACEHOLDERS, placeholder_seconds=100)
    run.step()
    run.step()
    created = rfc3339(run.now - 1)
    for pod in placeholders(run.world):
        pod["metadata"]["creationTimestamp"] = created
        run.world.add(pod)
    run.now += 100
    expired = run.step()
    assert len([a for a in of(expired, DeleteObject) if a.resource.kind == "Pod"]) == 4
    assert reports(expired, "gang.provisioning_failed")
    run.now += 30
    assert placeholders(run.world) == [] and of(run.step(), CreateObject) == []
    run.now += 31
    run.step()
    assert {p["metadata"]["labels"][names.CAPACITY_ATTEMPT_LABEL] for p in placeholders(run.world)} == {"2"}


def test_placeholders_of_a_group_that_fits_by_other_means_are_taken_back():
    run = waiting_job(CapacityProvisioning.PLACEHOLDERS)
    run.step()
    run.step()
    new_nodes(run.world, 4, prefix="freed")
    reserving = run.step()
    assert len(booked(reserving, GROUP)) == 4
    assert len([a for a in of(reserving, DeleteObject) if a.resource.kind == "Pod"]) == 4


def test_with_provisioning_off_nothing_is_asked():
    run = waiting_job(CapacityProvisioning.NONE)
    for _ in range(3):
        outcome = run.step()
        assert of(outcome, CreateObject) == []
    assert outcome.decided_phases[(NS, GROUP)] == Phase.WAITING.value


# --- what it reads, what it builds, what it counts --------------------------------------------------


def request_object(*conditions: tuple[str, str, str]) -> dict:
    return {"metadata": {"name": "r", "namespace": NS, "uid": "u", "creationTimestamp": "2027-01-01T00:00:00Z",
                         "labels": {names.CAPACITY_FOR_LABEL: "gang-uid", names.CAPACITY_ATTEMPT_LABEL: "3"}},
            "spec": {"provisioningClassName": "c", "podSets": [{"podTemplateRef": {"name": "t0"}, "count": 2}]},
            "status": {"conditions": [{"type": kind, "status": status, "reason": reason, "message": "",
                                       "lastTransitionTime": "2027-01-01T00:05:00Z"}
                                      for kind, status, reason in conditions]}}


def test_a_request_is_read_by_its_strongest_condition():
    from gangkeeper.controller.model.capacity import Answer
    from gangkeeper.controller.reading.capacity import capacity_request_from_api
    pending = capacity_request_from_api(request_object())
    assert (pending.answer, pending.gang, pending.attempt, pending.templates) == (Answer.PENDING, "gang-uid", 3, ("t0",))
    provisioned = capacity_request_from_api(request_object(("Accepted", "True", "A"), ("Provisioned", "True", "P")))
    assert provisioned.answer is Answer.PROVISIONED and provisioned.since > pending.since
    expired = capacity_request_from_api(request_object(("Provisioned", "True", "P"), ("BookingExpired", "True", "E")))
    assert expired.answer is Answer.BOOKING_EXPIRED and expired.answer.closed
    not_yet = capacity_request_from_api(request_object(("Accepted", "True", "A"), ("Provisioned", "False", "Wait")))
    assert not_yet.answer is Answer.ACCEPTED
    unlabelled = request_object()
    del unlabelled["metadata"]["labels"][names.CAPACITY_FOR_LABEL]
    assert capacity_request_from_api(unlabelled) is None, "another's request is none of ours"


def test_object_names_stay_within_what_the_api_accepts():
    from gangkeeper.controller.deciding.capacity_bodies import object_name
    from gangkeeper.controller.model.objects import Workload
    gang = Workload(resource="gangs.gangkeeper.io", namespace=NS, name="x" * 250, uid="u", api_version="v",
                    kind="Gang", sizes={})
    long = object_name(gang, 12, 3)
    assert len(long) == 253 and long != object_name(gang, 12, 4)
    assert object_name(replace(gang, name="bert"), 1, 0) == "gangkeeper-bert-1-0"


def test_the_metrics_count_what_was_asked_what_came_and_what_failed():
    from prometheus_client import generate_latest

    from gangkeeper.controller.metrics import Metrics
    run = waiting_job(CapacityProvisioning.PROVISIONING_REQUEST)
    metrics = Metrics()
    for _ in range(2):
        metrics.observe_pass(run.step(), 0.01)
    answered(run.world, "Failed", reason="R", message="no", at=run.now)
    metrics.observe_pass(run.step(), 0.01)
    text = generate_latest(metrics.registry).decode()
    assert f'gangkeeper_capacity_asked_total{{namespace="{NS}"}} 1.0' in text
    assert 'gangkeeper_capacity_asked_accelerators_total{resource="nvidia.com/gpu"} 32.0' in text
    assert 'gangkeeper_capacity_failed_total{reason="Failed"} 1.0' in text
