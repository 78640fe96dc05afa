"""Fixtures the emulation's tests share: a virtual clock, and an API server on it with one namespace."""

import pytest

from sim.apiserver import APIServer
from sim.clock import VirtualClock

NS = "ml"


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
def api(clock):
    """An emulated API server on the virtual clock, with the namespace `ml`."""
    api = APIServer(clock=clock.now)
    api.create("namespaces", {"metadata": {"name": NS}})
    return api
