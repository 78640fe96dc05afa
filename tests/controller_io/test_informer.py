import logging
import threading
import time

import pytest

from gangkeeper.controller.reading.informer import Hooks, Informer, object_key
from gangkeeper.controller.reading.kube import GANGS, PODS, PYTORCHJOBS, Backoff
from sim.api import APIError
from tests.builders import pod

from .conftest import eventually

WATCH_PODS = "/api/v1/pods"


def put(api, name, phase="Pending"):
    """A pod created, or its phase changed as the kubelet changes it."""
    try:
        api.get("pods", name, namespace="ml")
    except APIError:
        api.create("pods", pod(name))
    if phase != "Pending":
        api.patch("pods", name, {"status": {"phase": phase}}, namespace="ml", subresource="status")


def remove(api, name):
    api.delete("pods", name, namespace="ml")


def watches(served):
    return [request.query for request in served.requests if request.verb == "watch"]


def small_pod(obj):
    """What a decision needs; finished pods hold nothing and leave the cache."""
    phase = obj["status"]["phase"]
    return None if phase in ("Succeeded", "Failed") else phase


class Recorder:
    def __init__(self):
        self.restarts, self.relists, self.failures = [], [], []
        self.hooks = Hooks(watch_restarted=lambda r, why: self.restarts.append(why),
                           relisted=lambda r, n: self.relists.append(n),
                           failed=lambda r, e: self.failures.append(type(e).__name__))


@pytest.fixture
def start(kube):
    started = []

    def start(resource=PODS, transform=small_pod, kube=kube, **options):
        recorder = Recorder()
        options = {"backoff": Backoff(initial=0.01, cap=0.05), "recheck_seconds": 0.02, "hooks": recorder.hooks,
                   **options}
        informer = Informer(kube, resource, transform, **options).start()
        started.append(informer)
        return informer, recorder

    yield start
    for informer in started:
        informer.stop()


def keys(informer):
    return set(informer.cache.snapshot())


def test_object_keys():
    assert object_key(pod("a")) == "ml/a"
    assert object_key({"metadata": {"name": "n1"}}) == "n1"


def test_the_cache_follows_list_and_watch(api, start):
    put(api, "a")
    put(api, "done", "Succeeded")
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    assert informer.cache.snapshot() == {"ml/a": "Pending"}
    put(api, "b")
    put(api, "a", "Running")
    eventually(lambda: informer.cache.snapshot() == {"ml/a": "Running", "ml/b": "Pending"})
    put(api, "a", "Failed")
    remove(api, "b")
    eventually(lambda: keys(informer) == set())
    assert informer.resource_version == str(api.store.resource_version)
    assert recorder.relists == [1] and recorder.failures == []


def test_a_failing_watch_backs_off_and_recovers(api, served, start):
    served.faults.answer_next("watch", WATCH_PODS, 500, {"kind": "Status", "code": 500, "reason": "InternalError"})
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    put(api, "a")
    eventually(lambda: keys(informer) == {"ml/a"})
    assert recorder.failures == ["ServerError"] and recorder.restarts == ["error"]
    assert recorder.relists == [0]  # watched again from where it was, no relist


def test_a_410_error_event_relists_and_drops_what_vanished_unseen(api, served, start):
    put(api, "a")
    informer, recorder = start()
    eventually(lambda: keys(informer) == {"ml/a"})
    with api.store.unseen():
        remove(api, "a")
        put(api, "z")
    served.faults.act_on_watch(api.kind(PODS.name), "expire")
    eventually(lambda: keys(informer) == {"ml/z"})
    assert recorder.restarts == ["gone"] and recorder.relists == [1, 1]


def test_a_cut_connection_watches_again_from_the_last_version(api, served, start):
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    put(api, "a")
    eventually(lambda: keys(informer) == {"ml/a"})
    seen = informer.resource_version
    served.faults.act_on_watch(api.kind(PODS.name), "cut")
    eventually(lambda: recorder.restarts == ["error"])
    put(api, "b")
    eventually(lambda: keys(informer) == {"ml/a", "ml/b"})
    assert watches(served)[-1]["resourceVersion"] == seen and recorder.relists == [0]


def test_a_410_answer_to_the_watch_relists(api, served, start):
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    # The watch open first: a 410 waiting for it would be its answer, not the next one's.
    eventually(lambda: any(r.verb == "watch" and r.path == WATCH_PODS for r in served.requests))
    served.faults.answer_next("watch", WATCH_PODS, 410, {"kind": "Status", "code": 410, "reason": "Expired"})
    with api.store.unseen():
        put(api, "z")
    served.faults.act_on_watch(api.kind(PODS.name), "cut")  # ends the open watch; the next one is answered 410
    eventually(lambda: keys(informer) == {"ml/z"})
    assert recorder.restarts == ["error", "gone"] and recorder.relists == [0, 1]


def test_bookmarks_move_the_resource_version_on(api, served, start):
    informer, _ = start()
    eventually(lambda: informer.has_synced)
    api.create("nodes", {"metadata": {"name": "n1"}})
    served.faults.act_on_watch(api.kind(PODS.name), "bookmark")
    eventually(lambda: informer.resource_version == str(api.store.resource_version))
    assert keys(informer) == set()
    assert [query["allowWatchBookmarks"] for query in watches(served)] == ["true"]


def test_the_watch_timeout_is_jittered_from_the_base(served, start):
    informer, _ = start(watch_timeout=300, random=lambda: 0.5)
    eventually(lambda: watches(served))
    assert [query["timeoutSeconds"] for query in watches(served)] == ["450"]


def test_an_object_that_cannot_be_read_is_left_out(api, start):
    """Here the transform reads a size annotation, which two pods give as no number."""
    def size(obj):
        return int(obj["metadata"]["annotations"]["size"])

    api.create("pods", pod("a", annotations={"size": "1"}))
    api.create("pods", pod("broken", annotations={"size": "one"}))
    informer, recorder = start(transform=size)
    eventually(lambda: informer.has_synced)
    api.create("pods", pod("broken2", annotations={"size": "two"}))
    api.create("pods", pod("b", annotations={"size": "2"}))
    eventually(lambda: keys(informer) == {"ml/a", "ml/b"})
    assert recorder.failures == []


def test_an_api_not_served_is_switched_off_once_and_picked_up_later(api, served, start, caplog):
    caplog.set_level(logging.INFO, "gangkeeper.controller.informer")
    informer, _ = start(PYTORCHJOBS, transform=lambda job: job["metadata"]["name"])
    eventually(lambda: informer.has_synced)
    eventually(lambda: sum(1 for r in served.requests if r.path == "/apis/kubeflow.org/v1") >= 5)
    assert keys(informer) == set()
    off = [r for r in caplog.records if "not served" in r.getMessage()]
    assert len(off) == 1 and "pytorchjobs.kubeflow.org" in off[0].getMessage()
    api.kinds.serve(PYTORCHJOBS.name)
    api.create(PYTORCHJOBS.name, {"metadata": {"name": "train", "namespace": "ml"}})
    eventually(lambda: keys(informer) == {"ml/train"})


def test_stop_ends_an_open_watch_promptly(served, start):
    informer, _ = start(watch_timeout=300)
    eventually(lambda: watches(served))
    began = time.monotonic()
    informer.stop()
    assert time.monotonic() - began < 1.0
    assert "informer-pods" not in {thread.name for thread in threading.enumerate()}


def test_changes_are_announced(api, start):
    changed = []
    informer, _ = start(on_change=changed.append)
    eventually(lambda: changed == ["pods"])
    put(api, "a")
    put(api, "done", "Succeeded")  # cached while Pending, dropped once finished: two changes
    api.patch("pods", "done", {"metadata": {"labels": {"seen": "later"}}}, namespace="ml")  # not cached: none
    put(api, "b")
    eventually(lambda: len(changed) >= 5)
    assert changed == ["pods"] * 5


def test_list_failures_back_off_exponentially_and_success_resets(served, kube, start):
    for _ in range(3):
        served.faults.answer_next("list", "/api/v1/pods", 503, {"kind": "Status", "code": 503,
                                                                "reason": "ServiceUnavailable"})
    waits = []
    backoff = Backoff(initial=1, cap=3, random=lambda: 0.0)
    informer, recorder = start(kube=kube.with_options(retries=0), backoff=backoff, wait=waits.append)
    eventually(lambda: informer.has_synced)
    assert waits == [1, 2, 3] and recorder.failures == ["ServerError"] * 3
    assert backoff.attempt == 0


def test_an_api_that_stops_being_served_is_kept_as_last_listed_when_told_to(api, served, start, caplog):
    caplog.set_level(logging.INFO, "gangkeeper.controller.informer")
    api.create(GANGS.name, {"metadata": {"name": "g", "namespace": "ml"}})
    kept, _ = start(GANGS, transform=lambda gang: gang["metadata"]["name"], keeps_unserved=True)
    eventually(lambda: keys(kept) == {"ml/g"} and watches(served))
    gangs = api.kind(GANGS.name)
    api.kinds.serve(GANGS.name, False)  # its handlers not ready, as while an API server starts again
    served.faults.act_on_watch(gangs, "cut")  # the open watch ends; the next one is answered 404
    eventually(lambda: any("not served any more" in r.getMessage() for r in caplog.records))
    assert keys(kept) == {"ml/g"}, "what a Gang books stays booked while its API answers 404"
