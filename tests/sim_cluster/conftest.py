import json

import pytest

from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.spec import load
from tests.recorded import ADMISSION
from tests.sim_cluster.fakes import FakeAPI

FIXTURES = ADMISSION


def fixture_pod(name: str) -> dict:
    """The pod of a recorded admission request, as the real API server sent it."""
    return json.loads((FIXTURES / name).read_text())["review"]["request"]["object"]


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
def api(clock):
    return FakeAPI(clock)


@pytest.fixture
def make_cluster(api, clock):
    """A cluster of the default components on the fake API, from spec YAML."""
    def make(spec_yaml: str, **options):
        return emulated_cluster(api, clock, spec=load(spec_yaml), **options)
    return make


def pods_of(api, label: str, value: str) -> list[dict]:
    return [p for p in api.list("pods") if (p["metadata"].get("labels") or {}).get(label) == value]
