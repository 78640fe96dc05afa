"""Each kind of training workload, submitted to an enforced namespace: every pod is stored gated and
labelled by the real webhook, the real controller reserves the whole group before any member is
bound, the emulated scheduler binds each member where it was reserved, the job completes, and its
Gang says so."""

import pytest

from gangkeeper import names
from tests.e2e.checks import (
    all_succeeded,
    assert_admitted_by_webhook,
    assert_placed_whole_and_succeeded,
    group_label,
    placed,
)
from tests.e2e.workloads import new_team

pytestmark = pytest.mark.e2e


def test_two_pytorchjobs_that_each_fill_the_pool_run_whole_one_after_the_other(stack):
    team = new_team(stack, "pytorchjob", nodes=2, gpus_per_node=4)
    team.pytorchjob("llm-a", workers=3, gpus=2)  # 4 pods × 2 GPUs: the whole pool, twice over
    team.pytorchjob("llm-b", workers=3, gpus=2)

    team.wait_for_workload("pytorchjobs", "llm-a", "Succeeded")
    team.wait_for_workload("pytorchjobs", "llm-b", "Succeeded")
    created = team.pods_created()
    for job in ("llm-a", "llm-b"):
        pods = {name: pod for name, pod in created.items() if name.startswith(f"{job}-")}
        group = assert_admitted_by_webhook(pods, source=names.SOURCE_PYTORCHJOB, count=4)
        assert_placed_whole_and_succeeded(team, group, 4)
        gang = team.wait_for_gang(group, "Succeeded", minCount=4)
        assert gang["metadata"]["ownerReferences"][0]["name"] == job


def test_a_jobset_runs_whole_as_one_group_across_its_jobs(stack):
    team = new_team(stack, "jobset")
    team.jobset("sweep", jobs=2, pods_per_job=2, gpus=2)

    team.wait_for_workload("jobsets", "sweep", "Completed")
    group = assert_admitted_by_webhook(team.pods_created(), source=names.SOURCE_JOBSET, count=4)
    assert_placed_whole_and_succeeded(team, group, 4)
    team.wait_for_gang(group, "Succeeded", minCount=4)


def test_an_indexed_job_runs_whole(stack):
    team = new_team(stack, "indexed-job")
    team.indexed_job("shards", pods=4, gpus=2)

    team.wait_for_workload("jobs", "shards", "Complete")
    group = assert_admitted_by_webhook(team.pods_created(), source=names.SOURCE_JOB, count=4)
    assert_placed_whole_and_succeeded(team, group, 4)
    team.wait_for_gang(group, "Succeeded", minCount=4)


def test_plain_gpu_pods_are_each_a_group_of_one(stack):
    team = new_team(stack, "plain-pods")
    for name, gpus in (("notebook", 4), ("eval-a", 2), ("eval-b", 2)):
        team.pod(name, gpus=gpus)

    team.wait_until(lambda: all_succeeded(team.pods(), 3), "the three pods Succeeded")
    for name, pod in team.pods_created().items():
        assert assert_admitted_by_webhook({name: pod}, source=names.SOURCE_ACCELERATOR_POD, count=1) == name
        assert_placed_whole_and_succeeded(team, name, 1)
        team.wait_for_event("Pod", name, "Released")  # a lone pod's decisions are told on the pod itself
    assert team.gangs() == {}, "no Gang object for a lone pod"


def test_pods_of_an_explicit_gang_wait_for_its_min_count_then_run_whole(stack):
    team = new_team(stack, "explicit-gang")
    team.gang("allreduce", min_count=3)
    member = {"gpus": 2, "world_size": 3, "labels": {names.GROUP_LABEL: "allreduce"}}
    team.pod("allreduce-0", **member)
    team.pod("allreduce-1", **member)

    team.wait_for_gang("allreduce", "Waiting", present=2, minCount=3)
    assert placed(team, team.pods().values()) == [], "nothing is reserved or bound for an incomplete group"

    team.pod("allreduce-2", **member)
    team.wait_until(lambda: all_succeeded(team.pods(), 3), "the three members Succeeded")
    assert group_label(team.pods_created().values()) == "allreduce"
    assert_admitted_by_webhook(team.pods_created(), source=names.SOURCE_EXPLICIT, count=3)
    assert_placed_whole_and_succeeded(team, "allreduce", 3)
    team.wait_for_gang("allreduce", "Succeeded", minCount=3)
