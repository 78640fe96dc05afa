"""Issue 6 §2–§4, fast versions, with the real processes on the live cluster emulation (the full
versions run in `make bench`: `gangkeeper bench reliability load`). No timed assertions: deadlines
only bound the waiting; what is asserted is that nothing broke."""

import pytest

from reliability import chaos, ha, load

pytestmark = pytest.mark.e2e


def test_controller_killed_10_times_under_api_faults_and_deletions_keeps_every_invariant(tmp_path):
    campaign = chaos.Campaign(jobs=15, kills=10, kill_interval=(0.5, 1.5), cut_watch_after=30, gone_every=5.0,
                              deadline=150.0)
    result = chaos.run(tmp_path, campaign)
    assert result.violations == [], result.violations[:10]
    assert result.kills == 10 and result.kills_survived == 10 and result.crashes == 0
    assert result.jobs_completed == campaign.jobs
    assert result.checker["events"] > 0  # the checker saw the run
    for fault in ("API 500", "API 429", "API 409", "API 410"):
        assert result.faults[fault] > 0, (fault, result.faults)
    assert result.faults["delete-running-member"] + result.faults["delete-waiting-member"] > 0


def test_follower_takes_over_after_the_leader_is_killed_and_admissions_survive_a_worker_kill(tmp_path):
    result = ha.run(tmp_path, failovers=1)
    assert result.failovers == 1 and result.jobs_completed == result.jobs == 2
    # Never before the dead leader's last renewal is a lease duration old (how soon after: `make bench`).
    assert result.since_renewal_seconds[0] >= ha.LEASE_DURATION, result.since_renewal_seconds
    assert result.overlaps == []
    assert all(result.decisions.values()), result.decisions  # both replicas acted, each in its own terms
    assert result.admissions_after_kill_ok >= 40 and result.failures_after_replacement == 0
    assert result.admissions_failed <= 2, result.failures  # at most what was in flight on the killed worker


def test_240_pods_a_minute_are_admitted_gated_and_released(tmp_path):
    result = load.run(tmp_path, load.Load(pods_per_minute=240, seconds=10.0, sample_seconds=0.5))
    summary = load.summary(result)
    assert result.created == 40 and result.refused == 0 and result.ungated == 0
    assert result.groups_released == result.groups == 10
    assert {"controller", "webhook master", "webhook worker 1", "webhook worker 2"} <= set(result.rss)
    assert all(len(points) >= 10 for points in result.rss.values())
    assert summary["admission_ms"]["p99"] > 0 and summary["lag_ms"]["p99"] > 0
