import logging
import threading
import time

import pytest

from gangkeeper import names
from gangkeeper.controller.reading.informer import Hooks, Informer, object_key
from gangkeeper.controller.reading.kube import GANGS, NODES, PODS, PYTORCHJOBS, Backoff

from .conftest import eventually

WATCH_PODS = "/api/v1/pods"


def pod(name, phase="Pending", namespace="ml"):
    return {"metadata": {"name": name, "namespace": namespace}, "status": {"phase": phase}}


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


def test_the_cache_follows_list_and_watch(fake, start):
    fake.put(PODS, pod("a"))
    fake.put(PODS, pod("done", "Succeeded"))
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    assert informer.cache.snapshot() == {"ml/a": "Pending"}
    fake.put(PODS, pod("b"))
    fake.put(PODS, pod("a", "Running"))
    eventually(lambda: informer.cache.snapshot() == {"ml/a": "Running", "ml/b": "Pending"})
    fake.put(PODS, pod("a", "Failed"))
    fake.remove(PODS, "ml", "b")
    eventually(lambda: keys(informer) == set())
    assert informer.resource_version == str(fake.rv)
    assert recorder.relists == [1] and recorder.failures == []


def test_a_failing_watch_backs_off_and_recovers(fake, start):
    fake.inject("WATCH", WATCH_PODS, 500, {"kind": "Status", "code": 500, "reason": "InternalError"})
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    fake.put(PODS, pod("a"))
    eventually(lambda: keys(informer) == {"ml/a"})
    assert recorder.failures == ["ServerError"] and recorder.restarts == ["error"]
    assert recorder.relists == [0]  # watched again from where it was, no relist


def test_a_410_error_event_relists_and_drops_what_vanished_unseen(fake, start):
    fake.put(PODS, pod("a"))
    informer, recorder = start()
    eventually(lambda: keys(informer) == {"ml/a"})
    fake.remove(PODS, "ml", "a", event=False)
    fake.put(PODS, pod("z"), event=False)
    fake.expire(PODS)
    eventually(lambda: keys(informer) == {"ml/z"})
    assert recorder.restarts == ["gone"] and recorder.relists == [1, 1]


def test_a_cut_connection_watches_again_from_the_last_version(fake, start):
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    fake.put(PODS, pod("a"))
    eventually(lambda: keys(informer) == {"ml/a"})
    seen = informer.resource_version
    fake.cut(PODS)
    eventually(lambda: recorder.restarts == ["error"])
    fake.put(PODS, pod("b"))
    eventually(lambda: keys(informer) == {"ml/a", "ml/b"})
    watches = [q for m, _, q in fake.requests if m == "WATCH"]
    assert watches[-1]["resourceVersion"] == seen and recorder.relists == [0]


def test_a_410_answer_to_the_watch_relists(fake, start):
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    # The watch open first: a 410 waiting for it would be its answer, not the next one's.
    eventually(lambda: any(m == "WATCH" and p == WATCH_PODS for m, p, _ in fake.requests))
    fake.inject("WATCH", WATCH_PODS, 410, {"kind": "Status", "code": 410, "reason": "Expired"})
    fake.put(PODS, pod("z"), event=False)
    fake.cut(PODS)  # ends the open watch; the next one is answered 410
    eventually(lambda: keys(informer) == {"ml/z"})
    assert recorder.restarts == ["error", "gone"] and recorder.relists == [0, 1]


def test_bookmarks_move_the_resource_version_on(fake, start):
    informer, _ = start()
    eventually(lambda: informer.has_synced)
    fake.put(NODES, {"metadata": {"name": "n1"}})
    fake.bookmark(PODS)
    eventually(lambda: informer.resource_version == str(fake.rv))
    assert keys(informer) == set()
    assert [q["allowWatchBookmarks"] for m, _, q in fake.requests if m == "WATCH"] == ["true"]


def test_the_watch_timeout_is_jittered_from_the_base(fake, start):
    informer, _ = start(watch_timeout=300, random=lambda: 0.5)
    eventually(lambda: any(m == "WATCH" for m, _, _ in fake.requests))
    assert [q["timeoutSeconds"] for m, _, q in fake.requests if m == "WATCH"] == ["450"]


def test_an_object_that_cannot_be_read_is_left_out(fake, start):
    fake.put(PODS, pod("a"))
    fake.put(PODS, {"metadata": {"name": "broken", "namespace": "ml"}})  # no status
    informer, recorder = start()
    eventually(lambda: informer.has_synced)
    fake.put(PODS, {"metadata": {"name": "broken2", "namespace": "ml"}})
    fake.put(PODS, pod("b"))
    eventually(lambda: keys(informer) == {"ml/a", "ml/b"})
    assert recorder.failures == []


def test_an_api_not_served_is_switched_off_once_and_picked_up_later(fake, start, caplog):
    caplog.set_level(logging.INFO, "gangkeeper.controller.informer")
    informer, _ = start(PYTORCHJOBS, transform=lambda job: job["metadata"]["name"])
    eventually(lambda: informer.has_synced)
    eventually(lambda: sum(1 for _, p, _ in fake.requests if p == "/apis/kubeflow.org/v1") >= 5)
    assert keys(informer) == set()
    off = [r for r in caplog.records if "not served" in r.getMessage()]
    assert len(off) == 1 and "pytorchjobs.kubeflow.org" in off[0].getMessage()
    fake.serve(*names.PYTORCHJOB_API, "PyTorchJob")
    fake.put(PYTORCHJOBS, {"metadata": {"name": "train", "namespace": "ml"}})
    eventually(lambda: keys(informer) == {"ml/train"})


def test_stop_ends_an_open_watch_promptly(fake, start):
    informer, _ = start(watch_timeout=300)
    eventually(lambda: any(m == "WATCH" for m, _, _ in fake.requests))
    began = time.monotonic()
    informer.stop()
    assert time.monotonic() - began < 1.0
    assert "informer-pods" not in {thread.name for thread in threading.enumerate()}


def test_changes_are_announced(fake, start):
    changed = []
    informer, _ = start(on_change=changed.append)
    eventually(lambda: changed == ["pods"])
    fake.put(PODS, pod("a"))
    fake.put(PODS, pod("done", "Succeeded"))  # never cached: nothing changed
    fake.put(PODS, pod("b"))
    eventually(lambda: len(changed) >= 3)
    assert changed == ["pods"] * 3


def test_list_failures_back_off_exponentially_and_success_resets(fake, kube, start):
    for _ in range(3):
        fake.inject("GET", "/api/v1/pods", 503, {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"})
    waits = []
    backoff = Backoff(initial=1, cap=3, random=lambda: 0.0)
    informer, recorder = start(kube=kube.with_options(retries=0), backoff=backoff, wait=waits.append)
    eventually(lambda: informer.has_synced)
    assert waits == [1, 2, 3] and recorder.failures == ["ServerError"] * 3
    assert backoff.attempt == 0


def test_an_api_that_stops_being_served_is_kept_as_last_listed_when_told_to(fake, start, caplog):
    caplog.set_level(logging.INFO, "gangkeeper.controller.informer")
    fake.serve(names.GANG_GROUP, names.GANG_VERSION, names.GANG_PLURAL, names.GANG_KIND)
    fake.put(GANGS, {"metadata": {"name": "g", "namespace": "ml"}})
    kept, _ = start(GANGS, transform=lambda gang: gang["metadata"]["name"], keeps_unserved=True)
    eventually(lambda: keys(kept) == {"ml/g"} and any(m == "WATCH" for m, _, _ in fake.requests))
    fake.unserve(names.GANG_GROUP, names.GANG_VERSION)
    fake.cut(GANGS)  # the open watch ends; the next one is answered 404 and discovery forgets the API
    eventually(lambda: any("not served any more" in r.getMessage() for r in caplog.records))
    assert keys(kept) == {"ml/g"}, "what a Gang books stays booked while its API answers 404"
