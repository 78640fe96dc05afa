"""Fixtures the emulation's tests share: a virtual clock, and an API server on it with one namespace."""

import pytest

from sim.clock import VirtualClock
from tests.sim.helpers import api_server


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
def api(clock):
    return api_server(clock)
