"""Trace generation: pure, seeded, the same jobs at every load, sizes and the priority mix as configured."""

import pytest

from study.trace import (
    HIGH,
    LOW,
    PHILLY_LIKE_SIZES,
    Job,
    LogNormal,
    draw,
    offered_load,
    priority_shares,
    size_shares,
    trace,
    with_priorities,
)


def test_one_seed_draws_one_trace_and_another_seed_another():
    assert draw(50, seed=7, cluster_gpus=512) == draw(50, seed=7, cluster_gpus=512)
    assert draw(50, seed=7, cluster_gpus=512) != draw(50, seed=8, cluster_gpus=512)


def test_loads_only_rescale_the_arrivals_of_the_same_jobs():
    drawn = draw(200, seed=1, cluster_gpus=512)
    low, high = trace(drawn, 0.5, 512), trace(drawn, 1.0, 512)
    assert [(j.name, j.gpus, j.duration) for j in low] == [(j.name, j.gpus, j.duration) for j in high]
    assert low[0].submit == high[0].submit == 0
    assert all(a.submit == pytest.approx(2 * b.submit, abs=0.002) for a, b in zip(low, high))


def test_the_arrival_rate_is_set_for_the_offered_load():
    drawn = draw(300, seed=3, cluster_gpus=512)
    for load in (0.7, 1.1):
        assert offered_load(trace(drawn, load, 512), 512) == pytest.approx(load, rel=1e-3)


def test_the_gaps_between_arrivals_stay_exponential():
    jobs = trace(draw(5000, seed=4, cluster_gpus=512), 1.0, 512)
    gaps = sorted(b.submit - a.submit for a, b in zip(jobs, jobs[1:]))
    mean = sum(gaps) / len(gaps)
    assert gaps[len(gaps) // 2] / mean == pytest.approx(0.693, abs=0.03), "median of an exponential is ln 2 × mean"


def test_sizes_follow_the_shares_and_never_exceed_the_cluster():
    jobs = trace(draw(20000, seed=5, cluster_gpus=512), 0.9, 512)
    shares = size_shares(jobs)
    for size, share in PHILLY_LIKE_SIZES:
        assert shares.get(size, 0) == pytest.approx(share, abs=0.01)
    small = trace(draw(2000, seed=5, cluster_gpus=16), 0.9, 16)
    assert max(job.gpus for job in small) == 16


def test_durations_are_clipped():
    jobs = trace(draw(5000, seed=2, cluster_gpus=512, durations=LogNormal(median=600, sigma=3, low=60, high=3600)),
                 0.9, 512)
    assert min(j.duration for j in jobs) == 60 and max(j.duration for j in jobs) == 3600


def test_jobs_of_eight_gpus_or_more_run_as_eight_gpu_workers():
    assert (Job("a", 0, 4, 1).pods, Job("a", 0, 4, 1).gpus_per_pod) == (4, 1)
    assert (Job("b", 0, 8, 1).pods, Job("b", 0, 8, 1).gpus_per_pod) == (1, 8)
    assert (Job("c", 0, 64, 1).pods, Job("c", 0, 64, 1).gpus_per_pod) == (8, 8)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="load"):
        trace(draw(5, seed=1, cluster_gpus=8), 0, 8)
    with pytest.raises(ValueError, match="fits"):
        draw(5, seed=1, cluster_gpus=8, sizes=((16, 1.0),))


def test_the_priority_mix_puts_the_share_asked_in_high_and_the_rest_in_low():
    jobs = trace(draw(1000, seed=9, cluster_gpus=512), 0.9, 512)
    mixed = with_priorities(jobs, 0.2, seed=9)
    assert priority_shares(mixed) == {HIGH.name: 0.2, LOW.name: 0.8}
    assert sum(job.priority_class == HIGH.name for job in with_priorities(jobs[:7], 0.2, seed=9)) == 1  # round(1.4)
    assert [(j.name, j.submit, j.gpus, j.duration) for j in mixed] == [(j.name, j.submit, j.gpus, j.duration) for j in jobs]


def test_the_priority_mix_is_drawn_from_the_seed_alone_the_same_at_every_load():
    drawn = draw(300, seed=3, cluster_gpus=512)
    classes = {load: [job.priority_class for job in with_priorities(trace(drawn, load, 512), 0.2, seed=3)]
               for load in (0.7, 0.9)}
    assert classes[0.7] == classes[0.9]
    again = [job.priority_class for job in with_priorities(trace(drawn, 0.9, 512), 0.2, seed=3)]
    other = [job.priority_class for job in with_priorities(trace(drawn, 0.9, 512), 0.2, seed=4)]
    assert again == classes[0.9] and other != classes[0.9]


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="high_share"):
        with_priorities(trace(draw(5, seed=1, cluster_gpus=8), 0.9, 8), 1.5, seed=1)
