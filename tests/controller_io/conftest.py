import time

import pytest

from gangkeeper.controller.reading.kube import load

from .fakeapi import FakeAPI


@pytest.fixture
def fake():
    api = FakeAPI().start()
    yield api
    api.stop()


@pytest.fixture
def sleeps():
    """The delays the adapter asked for, instead of sleeping them."""
    return []


@pytest.fixture
def kube(fake, tmp_path, sleeps):
    client = load(fake.kubeconfig(tmp_path / "kubeconfig"), sleep=sleeps.append, discovery_ttl=0)
    yield client
    client.api_client.close()


def eventually(condition, timeout=5.0, interval=0.01):
    """Poll `condition` until it holds: the informer works on its own thread."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
