"""How long an emulated pod trains: its duration annotation, else the sleeps its shell script does,
else, for a pod that runs to completion, the cluster's run seconds (`sim serve --run-seconds`)."""

from sim.names import DURATION_ANNOTATION
from sim.training import duration
from tests import builders


def pod(*containers, annotations=None, restart_policy=None):
    return builders.pod(annotations=annotations or {}, containers=list(containers),
                        **({"restartPolicy": restart_policy} if restart_policy else {}))


def shell(script, name="main"):
    """A container as the shipped examples write one: `/bin/sh -c SCRIPT`."""
    return {"name": name, "image": "busybox", "command": ["/bin/sh", "-c", script]}


def test_the_annotation_wins():
    assert duration(pod(shell("sleep 10"), annotations={DURATION_ANNOTATION: "30"})) == 30.0


def test_a_script_that_sleeps_runs_for_its_sleeps():
    assert duration(pod(shell("echo 'initializer runs for 10 seconds' && sleep 10"))) == 10.0
    assert duration(pod(shell("sleep 5; echo done; sleep 2.5"))) == 7.5
    assert duration(pod({"name": "m", "command": ["sleep"], "args": ["20"]})) == 20.0


def test_the_longest_container_sets_the_pace_and_one_that_never_sleeps_runs_on():
    assert duration(pod(shell("sleep 10", "a"), shell("sleep 20", "b"))) == 20.0
    assert duration(pod(shell("sleep 10", "a"), {"name": "server", "command": ["python", "serve.py"]})) is None


def test_words_that_merely_contain_sleep_are_not_sleeps():
    assert duration(pod(shell("python sleeper.py --nosleep 10"))) is None
    assert duration(pod({"name": "m", "image": "pytorch"})) is None


TUNE = {"name": "node", "image": "ghcr.io/kubeflow/trainer/torchtune-trainer", "command": ["tune", "run", "recipe"]}


def test_a_program_that_runs_to_completion_runs_for_the_run_seconds():
    assert duration(pod(TUNE, restart_policy="Never"), run_seconds=30) == 30.0
    assert duration(pod(TUNE, restart_policy="OnFailure"), run_seconds=30) == 30.0


def test_without_run_seconds_such_a_program_runs_until_stopped():
    assert duration(pod(TUNE, restart_policy="Never")) is None


def test_a_server_runs_until_stopped_whatever_the_run_seconds():
    assert duration(pod(TUNE, restart_policy="Always"), run_seconds=30) is None
    assert duration(pod(TUNE), run_seconds=30) is None, "no restart policy is Always"


def test_what_the_pod_says_wins_over_the_run_seconds():
    assert duration(pod(TUNE, restart_policy="Never", annotations={DURATION_ANNOTATION: "90"}), run_seconds=30) == 90.0
    assert duration(pod(shell("sleep 10"), restart_policy="Never"), run_seconds=30) == 10.0
