import pytest

from sim.api import ADMIN, SCHEDULER, APIError, User
from sim.apiserver import APIServer
from tests.sim.helpers import namespace, node, pod

STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture()
def api():
    server = APIServer(clock=lambda: 1_800_000_000.0)
    server.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    return server


def refused(call) -> APIError:
    with pytest.raises(APIError) as error:
        call()
    return error.value


def test_create_defaults_pod_and_sets_initial_status(api):
    created = api.create("pods", pod("p", gates=["gangkeeper.io/gang"]), namespace="ml")
    spec, status = created["spec"], created["status"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert (spec["restartPolicy"], spec["schedulerName"], spec["priority"]) == ("Always", "default-scheduler", 0)
    assert status["phase"] == "Pending" and status["qosClass"] == "Guaranteed"
    assert status["conditions"][0]["reason"] == "SchedulingGated"
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]


def test_generate_name(api):
    created = api.create("pods", {"metadata": {"generateName": "gen-"}, "spec": pod("x")["spec"]}, namespace="ml")
    assert created["metadata"]["name"].startswith("gen-") and len(created["metadata"]["name"]) == 9


def identities(seed):
    """The uid and generated name of three pods on a new server seeded with `seed`."""
    server = APIServer(clock=lambda: 1_800_000_000.0, seed=seed)
    made = [server.create("pods", {"metadata": {"generateName": "gen-"}, "spec": pod("x")["spec"]}, namespace="default")
            for _ in range(3)]
    return [(obj["metadata"]["uid"], obj["metadata"]["name"]) for obj in made]


def test_a_seeded_server_gives_the_same_uids_and_generated_names_every_time():
    assert identities(7) == identities(7)
    assert identities(7) != identities(8)
    assert identities(None) != identities(None), "unseeded, as a real server: random"
    uid = identities(7)[0][0]
    assert len(uid) == 36 and uid[14] == "4", "a version-4 UUID"


def test_create_in_missing_namespace_is_404(api):
    error = refused(lambda: api.create("pods", pod("p"), namespace="nowhere"))
    assert (error.code, error.status["message"]) == (404, 'namespaces "nowhere" not found')


def test_resource_version_is_global_and_monotonic(api):
    a = api.create("pods", pod("a"), namespace="ml")
    b = api.create("nodes", node("n1"))
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1


def test_no_op_patch_keeps_resource_version(api):
    created = api.create("pods", pod("p", labels={"a": "1"}), namespace="ml")
    same = api.patch("pods", "p", {"metadata": {"labels": {"a": "1"}}}, namespace="ml")
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generation_counts_spec_changes_only(api):
    api.create("pods", pod("p", gates=["gangkeeper.io/gang"]), namespace="ml")
    assert api.patch("pods", "p", {"metadata": {"annotations": {"a": "b"}}}, namespace="ml")["metadata"]["generation"] == 1
    ungated = api.patch("pods", "p", {"spec": {"schedulingGates": [{"name": "gangkeeper.io/gang", "$patch": "delete"}]}},
                        namespace="ml", patch_type=STRATEGIC)
    assert ungated["metadata"]["generation"] == 2 and "schedulingGates" not in ungated["spec"]


def test_main_resource_write_cannot_change_status_and_status_write_cannot_change_spec(api):
    api.create("pods", pod("p"), namespace="ml")
    assert api.patch("pods", "p", {"status": {"phase": "Running"}}, namespace="ml")["status"]["phase"] == "Pending"
    running = api.patch("pods", "p", {"status": {"phase": "Running"}, "spec": {"nodeName": "n9"}}, namespace="ml",
                        subresource="status")
    assert running["status"]["phase"] == "Running" and "nodeName" not in running["spec"]


def test_strategic_merge_patch_on_custom_resource_is_415(api):
    api.create("gangs", {"metadata": {"name": "g"}, "spec": {"minCount": 2}}, namespace="ml")
    assert refused(lambda: api.patch("gangs", "g", {"spec": {"minCount": 3}}, namespace="ml",
                                     patch_type=STRATEGIC)).code == 415


def test_bind_sets_node_and_scheduled_condition(api):
    api.create("pods", pod("p"), namespace="ml")
    api.bind("ml", "p", "n1")
    bound = api.get("pods", "p", namespace="ml")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][-1]["type"] == "PodScheduled"
    assert [p["metadata"]["name"] for p in api.list("pods", field_selector="spec.nodeName=n1")] == ["p"]


def test_bound_running_pod_is_deleted_gracefully(api):
    api.create("pods", pod("p"), namespace="ml")
    api.bind("ml", "p", "n1")
    marked = api.delete("pods", "p", namespace="ml")
    assert marked["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:30Z"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    api.delete("pods", "p", namespace="ml", grace_period_seconds=0)
    assert refused(lambda: api.get("pods", "p", namespace="ml")).code == 404


def test_finalizers_hold_deletion_until_removed(api):
    api.create("gangs", {"metadata": {"name": "g", "finalizers": ["gangkeeper.io/x"]}, "spec": {}}, namespace="ml")
    assert api.delete("gangs", "g", namespace="ml")["metadata"]["deletionTimestamp"]
    assert api.get("gangs", "g", namespace="ml")
    api.patch("gangs", "g", {"metadata": {"finalizers": None}}, namespace="ml")
    assert refused(lambda: api.get("gangs", "g", namespace="ml")).code == 404


def test_dependents_are_garbage_collected(api):
    owner = api.create("pytorchjobs", {"metadata": {"name": "job"}, "spec": {}}, namespace="ml")
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job", "uid": owner["metadata"]["uid"],
           "controller": True}
    member = pod("job-worker-0")
    member["metadata"]["ownerReferences"] = [ref]
    api.create("pods", member, namespace="ml")
    api.delete("pytorchjobs", "job", namespace="ml")
    assert api.list("pods", namespace="ml") == []


def test_job_delete_orphans_pods_unless_asked(api):
    job = api.create("jobs", {"metadata": {"name": "j"}, "spec": {"template": {}}}, namespace="ml")
    member = pod("j-0")
    member["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                              "uid": job["metadata"]["uid"]}]
    api.create("pods", member, namespace="ml")
    api.delete("jobs", "j", namespace="ml")
    assert "ownerReferences" not in api.get("pods", "j-0", namespace="ml")["metadata"]


def test_namespace_deletion_removes_its_objects(api):
    api.create("pods", pod("p"), namespace="ml")
    api.delete("namespaces", "ml")
    assert api.list("pods") == []
    assert refused(lambda: api.get("namespaces", "ml")).code == 404


def test_subscribers_see_every_change_in_commit_order_even_when_writing(api):
    seen: list[tuple[str, str]] = []

    def react(event):
        seen.append((event.type, event.object["metadata"]["name"]))
        if event.type == "ADDED" and event.resource == "pods":
            api.patch("pods", event.object["metadata"]["name"], {"metadata": {"labels": {"seen": "1"}}}, namespace="ml")
    second: list[str] = []
    api.subscribe(react)
    unsubscribe = api.subscribe(lambda event: second.append(event.object["metadata"]["name"] + event.type))
    api.create("pods", pod("a"), namespace="ml")
    api.create("pods", pod("b"), namespace="ml")
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("MODIFIED", "b")]
    assert second == ["aADDED", "aMODIFIED", "bADDED", "bMODIFIED"]
    unsubscribe()


def test_compacted_watch_is_410():
    api = APIServer(history_size=10)
    for i in range(20):
        api.create("nodes", node(f"n{i}"))
    error = refused(lambda: api.watch(api.kind("nodes"), 1))
    assert (error.code, error.reason) == (410, "Expired")
    assert error.status["message"].startswith("too old resource version: 1 (")


def test_native_pod_groups_only_when_switched_on():
    assert refused(lambda: APIServer().list("podgroups.scheduling.k8s.io")).code == 404
    native = APIServer(native_pod_groups=True)
    native.create("podgroups.scheduling.k8s.io", {"metadata": {"name": "pg"}, "spec": {}}, namespace="default")
    assert native.list("podgroups") == []
    assert len(native.list("podgroups.scheduling.k8s.io")) == 1


def test_changes_made_unseen_reach_no_watcher_and_a_watch_from_before_them_is_410(api):
    api.create("nodes", node("seen"))
    before = api.store.resource_version
    watcher, heard = api.watch(api.kind("nodes"), before), []
    unsubscribe = api.subscribe(heard.append)
    with api.store.unseen():
        api.create("nodes", node("unseen"))
    assert watcher.next(timeout=0) is None and heard == []
    assert refused(lambda: api.watch(api.kind("nodes"), before)).code == 410
    api.create("nodes", node("after"))
    assert watcher.next(timeout=0).object["metadata"]["name"] == "after" and len(heard) == 1, "what follows is seen"
    unsubscribe()


def test_a_resource_stops_being_served_and_is_served_again_with_what_it_stored(api):
    api.create("pytorchjobs", {"metadata": {"name": "train"}, "spec": {}}, namespace="ml")
    api.kinds.serve("pytorchjobs.kubeflow.org", False)
    assert refused(lambda: api.list("pytorchjobs")).code == 404
    assert api.kinds.by_path("kubeflow.org", "v1", "pytorchjobs") is None
    api.kinds.serve("pytorchjobs.kubeflow.org")
    assert [job["metadata"]["name"] for job in api.list("pytorchjobs")] == ["train"]
    with pytest.raises(ValueError, match="tfjobs.kubeflow.org.*give one of"):
        api.kinds.serve("tfjobs.kubeflow.org")


def test_every_write_is_written_down_with_its_user_refused_ones_too(api):
    kubelet = User("system:node")
    api.create("pods", pod("p"), namespace="ml")
    api.patch("pods", "p", {"metadata": {"labels": {"a": "b"}}}, namespace="ml")
    api.bind("ml", "p", "n1")
    api.patch("pods", "p", {"status": {"phase": "Running"}}, namespace="ml", subresource="status", user=kubelet)
    with pytest.raises(APIError):
        api.create("pods", pod("p"), namespace="ml")
    api.delete("pods", "p", namespace="ml", grace_period_seconds=0)
    assert list(api.writes)[-6:] == [
        ("create", "pods", "p", ADMIN.username), ("patch", "pods", "p", ADMIN.username),
        ("create", "pods/binding", "p", SCHEDULER.username), ("patch", "pods/status", "p", "system:node"),
        ("create", "pods", "p", ADMIN.username), ("delete", "pods", "p", ADMIN.username)]
