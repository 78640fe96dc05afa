import json

import pytest

from sim.apiserver import APIServer
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.spec import load
from tests.recorded import ADMISSION
from tests.sim.helpers import namespace

FIXTURES = ADMISSION
NAMESPACES = ("ml", "ml-training", "hpc", "research", "serving", "staged")


def fixture_pod(name: str) -> dict:
    """The pod of a recorded admission request, as the real API server sent it."""
    return json.loads((FIXTURES / name).read_text())["review"]["request"]["object"]


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
def api(clock):
    """The emulated API server on the virtual clock, with the namespaces the tests submit to."""
    api = APIServer(clock=clock.now, seed=0)
    for name in NAMESPACES:
        api.create("namespaces", namespace(name))
    return api


@pytest.fixture
def make_cluster(api, clock):
    """A cluster of the default components on the emulated API server, from spec YAML."""
    def make(spec_yaml: str, **options):
        return emulated_cluster(api, clock, spec=load(spec_yaml), **options)
    return make


def pods_of(api, label: str, value: str) -> list[dict]:
    return [p for p in api.list("pods") if (p["metadata"].get("labels") or {}).get(label) == value]
