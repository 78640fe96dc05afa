"""The three policies on small emulated clusters, judged from what the cluster did.

The deadlock is built on purpose (two 32-GPU jobs submitted together on 48 GPUs); the random
trace is a small version of the study (8 nodes, 40 jobs, overloaded). No timed assertions.
"""

import pytest

from gangkeeper import names
from study.run import Cluster, run, run_policy, spec_for
from study.trace import Job

TWO_BIG_JOBS = [Job("job-a", 0.0, 32, 600.0), Job("job-b", 0.0, 32, 600.0)]
SIX_NODES = Cluster(nodes=6)
HOUR = 3600.0


@pytest.fixture(scope="module")
def deadlock_runs():
    spec = spec_for(TWO_BIG_JOBS, SIX_NODES)
    return {policy: run_policy(policy, TWO_BIG_JOBS, spec, SIX_NODES, drain=HOUR)
            for policy in ("stock", "stock-binpack", "quota", "gangkeeper")}


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["stock", "stock-binpack"])
def test_the_stock_scheduler_deadlocks_two_jobs_that_each_hold_part_of_the_cluster(deadlock_runs, policy):
    figures = deadlock_runs[policy]["figures"]
    assert figures["not_completed"] == 2 and figures["never_started"] == 2
    assert figures["stuck_partial"] == 2
    assert figures["partial_gpu_hours"] == pytest.approx(48 * 1.0), "all 48 GPUs held for the hour, uselessly"


@pytest.mark.slow
def test_gangkeeper_runs_both_jobs_one_after_the_other_holding_nothing_partially(deadlock_runs):
    figures = deadlock_runs["gangkeeper"]["figures"]
    assert figures["not_completed"] == 0 and figures["partial_gpu_hours"] == 0
    started = sorted(row["started"] for row in deadlock_runs["gangkeeper"]["jobs"])
    assert started[1] - started[0] >= 600, "the second job starts only when the first has finished"
    assert deadlock_runs["gangkeeper"]["counters"]["passes"] > 0


@pytest.mark.slow
def test_the_quota_gate_admits_only_what_the_quota_covers(deadlock_runs):
    figures = deadlock_runs["quota"]["figures"]
    assert figures["not_completed"] == 0 and figures["partial_gpu_hours"] == 0
    assert deadlock_runs["quota"]["counters"]["releases"] == 2


@pytest.fixture(scope="module")
def small_study():
    return run(loads=(1.1,), jobs=40, seed=11, cluster=Cluster(nodes=8))


@pytest.mark.slow
def test_gangkeeper_completes_every_job_and_never_holds_gpus_in_an_incomplete_group(small_study):
    [gangkeeper] = [r for r in small_study["runs"] if r["policy"] == "gangkeeper"]
    figures = gangkeeper["figures"]
    assert figures["jobs"] == 40 and figures["not_completed"] == 0 and figures["all_completed"]
    assert figures["partial_gpu_hours"] == 0
    assert all(row["partial"] == 0 and row["finished"] is not None for row in gangkeeper["jobs"])
    assert gangkeeper["counters"]["failed_actions"] == 0
    assert gangkeeper["counters"]["index_inconsistencies"] == 0


@pytest.mark.slow
def test_every_policy_replays_the_same_jobs_and_measures_them_alike(small_study):
    runs = {r["policy"]: r for r in small_study["runs"]}
    assert set(runs) == {"stock", "stock-binpack", "quota", "gangkeeper"}
    submitted = {policy: sorted((row["job"], row["submitted"]) for row in r["jobs"]) for policy, r in runs.items()}
    assert len({tuple(rows) for rows in submitted.values()}) == 1
    useful = {policy: r["figures"]["useful_gpu_hours"] for policy, r in runs.items() if r["figures"]["all_completed"]}
    assert len(set(round(value, 6) for value in useful.values())) == 1, "finished jobs did the same work"


def test_under_gangkeeper_pods_are_gated_by_the_real_webhook_and_pinned_by_the_controller():
    from sim.clock import VirtualClock
    from sim.cluster import emulated_cluster
    from study import policies

    clock = VirtualClock()
    api, webhook = policies.gangkeeper_api(clock.now)
    api.create("namespaces", {"metadata": {"name": "ml", "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    controller = policies.GangkeeperController(api, clock=clock.now)
    cluster = emulated_cluster(api, clock, spec=spec_for([Job("job-a", 0.0, 16, 600.0)], Cluster(nodes=2)),
                               extra=[controller])
    cluster.run_until(clock.now())  # submitted, pods created and gated, nothing decided yet
    pods = api.list("pods", namespace="ml")
    assert len(pods) == 2 and webhook.requests >= 2
    assert all(p["spec"]["schedulingGates"] == [{"name": names.SCHEDULING_GATE}] for p in pods)
    assert all(p["metadata"]["labels"][names.GROUP_LABEL] for p in pods)
    cluster.run_until(clock.now() + 60)
    pods = api.list("pods", namespace="ml")
    for pod in pods:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pod["spec"]["nodeName"]]
        assert pod["status"]["phase"] == "Running" and not pod["spec"].get("schedulingGates")
    [gang] = api.list("gangs", namespace="ml")
    assert gang["spec"]["groupName"] == pods[0]["metadata"]["labels"][names.GROUP_LABEL]  # named after its owner
    assert gang["status"]["phase"] == "Running"


def test_the_gangkeeper_policy_runs_the_products_controller_loop_on_the_virtual_clock():
    from gangkeeper.controller.runner import Controller
    from sim.clock import VirtualClock
    from sim.cluster import emulated_cluster
    from study import policies

    clock = VirtualClock()
    api, _ = policies.gangkeeper_api(clock.now)
    api.create("namespaces", {"metadata": {"name": "ml", "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    component = policies.GangkeeperController(api, clock=clock.now)
    assert type(component.controller) is Controller
    cluster = emulated_cluster(api, clock, spec=spec_for([Job("job-a", 0.0, 16, 600.0)], Cluster(nodes=2)),
                               extra=[component])
    cluster.run_until(clock.now() + 60)
    passes = component.controller.metrics.registry.get_sample_value("gangkeeper_reconcile_pass_seconds_count")
    assert passes == component.passes > 0, "every pass of the study is a pass of Controller.turn"
    assert component.next_due() == component.controller.due() > clock.now(), "when the product says"
