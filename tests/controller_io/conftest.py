import time

import pytest

from gangkeeper.controller.reading.kube import load
from sim.apiserver import APIServer
from sim.kubeconfig import write_kubeconfig
from sim.server import RunningServer

NAMESPACES = ("ml", "gangkeeper")


@pytest.fixture
def api():
    """The emulated API server, with the tests' namespaces; PyTorchJob's CRD is not installed yet
    (the tests that want it install it), Gang's is."""
    server = APIServer(unserved=("pytorchjobs.kubeflow.org",))
    for name in NAMESPACES:
        server.create("namespaces", {"metadata": {"name": name}})
    return server


@pytest.fixture
def served(api):
    """The emulated API server over HTTP: what the controller's client talks to, with its faults to script."""
    with RunningServer(api) as running:
        yield running


@pytest.fixture
def sleeps():
    """The delays the adapter asked for, instead of sleeping them."""
    return []


@pytest.fixture
def kube(served, tmp_path, sleeps):
    client = load(str(write_kubeconfig(tmp_path / "kubeconfig", served.url, "token")), sleep=sleeps.append,
                  discovery_ttl=0)
    yield client
    client.api_client.close()


def eventually(condition, timeout=5.0, interval=0.01):
    """Poll `condition` until it holds: the informer works on its own thread."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
