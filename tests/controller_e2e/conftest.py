"""The fixture the scenario tests share: an emulated cluster of a spec, running in real time."""

import pytest

from sim.clock import RealClock
from sim.cluster import ThreadRunner, emulated_cluster
from sim.spec import load
from tests.controller_e2e.emulation import Emulation, invariants


@pytest.fixture()
def cluster(tmp_path):
    """`start(spec_text, min_count, submit=False, extra=lambda api: [])` runs the spec's nodes,
    devices and PriorityClasses on a thread in real time (its workloads too, each at its submit
    time, when `submit`), watched by the invariants with groups of `min_count`; `extra` gives more
    components on the emulation's API. Returns the emulation, the watch, the loaded spec and the
    extra components."""
    started = []

    def start(spec_text: str, min_count, *, submit: bool = False, extra=lambda api: []):
        emulation = Emulation(tmp_path)
        spec = load(spec_text)
        watch = invariants(emulation, min_count)
        components = extra(emulation.api)
        runner = ThreadRunner(emulated_cluster(emulation.api, RealClock(), spec=spec if submit else
                                               {**spec, "workloads": []}, start_delay=0.1, extra=components),
                              idle_wait=0.05).start()
        started.append((emulation, watch, runner))
        return emulation, watch, spec, components

    yield start
    for emulation, watch, runner in started:
        runner.stop()
        runner.check()
        watch.close()
        emulation.close()
