"""How long an emulated pod trains: its duration annotation, else the sleeps its shell script does."""

from sim.names import DURATION_ANNOTATION
from sim.training import duration


def pod(*containers, annotations=None):
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": {"containers": list(containers)}}


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
