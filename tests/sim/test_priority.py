"""PriorityClasses and the Priority admission plugin (sim/priority.py), as kube-apiserver v1.36 applies them."""

import pytest

from gangkeeper import names
from sim.api import APIError
from sim.apiserver import APIServer
from sim.playground import install, rendered_deploy_default
from sim.spec import SpecError, load, priority_class_manifests, submissions
from tests.sim.helpers import pod


@pytest.fixture()
def api():
    server = APIServer()
    server.create("namespaces", {"metadata": {"name": "ml"}})
    return server


def priority_class(name, value, **fields):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **fields}


def created(api, body):
    return api.create("pods", body, namespace="ml")["spec"]


def test_a_pod_gets_its_classs_value_and_preemption_policy(api):
    api.create("priorityclasses", priority_class("polite", 500, preemptionPolicy="Never"))
    spec = created(api, pod("p", priorityClassName="polite"))
    assert (spec["priority"], spec["preemptionPolicy"]) == (500, "Never")


def test_without_a_class_a_pod_gets_the_global_default_or_zero(api):
    assert (created(api, pod("plain"))["priority"], created(api, pod("plain2")).get("priorityClassName")) == (0, None)
    api.create("priorityclasses", priority_class("everyone", 7, globalDefault=True))
    spec = created(api, pod("defaulted"))
    assert (spec["priority"], spec["priorityClassName"], spec["preemptionPolicy"]) == (7, "everyone",
                                                                                      "PreemptLowerPriority")


def test_the_system_classes_exist_from_the_start(api):
    values = {c["metadata"]["name"]: c["value"] for c in api.list("priorityclasses")}
    assert values == {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
    assert created(api, pod("kubelet-ish", priorityClassName="system-node-critical"))["priority"] == 2_000_001_000


def test_an_unknown_class_or_a_priority_the_pod_sets_itself_is_forbidden(api):
    with pytest.raises(APIError) as unknown:
        created(api, pod("p", priorityClassName="typo"))
    assert (unknown.value.status["code"], unknown.value.status["message"]) == (
        403, 'pods "p" is forbidden: no PriorityClass with name typo was found')
    api.create("priorityclasses", priority_class("high", 1000))
    with pytest.raises(APIError) as chosen:
        created(api, pod("q", priorityClassName="high", priority=5))
    assert chosen.value.status["message"] == (
        'pods "q" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority '
        "admission controller computed 1000 from the given PriorityClass name")
    assert created(api, pod("r", priorityClassName="high", priority=1000))["priority"] == 1000  # as recorded pods are


def test_a_class_is_refused_above_the_user_limit_under_a_system_name_or_with_an_unknown_policy(api):
    for body, field in ((priority_class("huge", 2_000_000_000), "value"),
                        (priority_class("system-mine", 1), "metadata.name"),
                        (priority_class("odd", 3, preemptionPolicy="Sometimes"), "preemptionPolicy")):
        with pytest.raises(APIError) as refused:
            api.create("priorityclasses", body)
        assert refused.value.status["code"] == 422
        assert [c["field"] for c in refused.value.status["details"]["causes"]] == [field]


def test_a_second_global_default_is_refused_by_the_admission_plugin(api):
    api.create("priorityclasses", priority_class("first", 1, globalDefault=True))
    with pytest.raises(APIError) as refused:
        api.create("priorityclasses", priority_class("second", 2, globalDefault=True))
    assert (refused.value.status["code"], refused.value.status["message"]) == (
        403, 'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is already marked as '
             "default. Only one default can exist")


def test_a_classs_value_cannot_change(api):
    api.create("priorityclasses", priority_class("high", 1000))
    with pytest.raises(APIError) as refused:
        api.patch("priorityclasses", "high", {"value": 2000})
    assert "value: Forbidden: may not be changed in an update." in refused.value.status["message"]


def test_a_spec_lists_priority_classes_its_workloads_name_and_refuses_one_it_does_not():
    spec = load("""
nodes: [{count: 1}]
priorityClasses: [{name: urgent, value: 1000}, {name: polite, value: 10, preemptionPolicy: Never}]
workloads: [{kind: Job, name: train, size: 1, priorityClassName: urgent}]
""")
    assert [(c["metadata"]["name"], c["value"], c["preemptionPolicy"]) for c in priority_class_manifests(spec)] == [
        ("urgent", 1000, "PreemptLowerPriority"), ("polite", 10, "Never")]
    (job,) = submissions(spec)
    assert job.manifest["spec"]["template"]["spec"]["priorityClassName"] == "urgent"
    with pytest.raises(SpecError) as refused:
        load("nodes: [{count: 1}]\nworkloads: [{kind: Job, size: 1, priorityClassName: nope}]")
    assert refused.value.problems == ["workloads[0].priorityClassName: 'nope' is not a PriorityClass of the spec; "
                                      "use one of ['system-cluster-critical', 'system-node-critical'], or list it "
                                      "under priorityClasses"]


def test_deploys_placeholder_class_is_installed_as_the_playground_installs_deploy_and_preempts_nothing():
    api = APIServer()
    assert f"PriorityClass {names.PLACEHOLDER_PRIORITY_CLASS}" in install(api, rendered_deploy_default())
    api.create("namespaces", {"metadata": {"name": "ml"}})
    spec = created(api, pod("placeholder", priorityClassName=names.PLACEHOLDER_PRIORITY_CLASS))
    assert (spec["priority"], spec["preemptionPolicy"]) == (names.PLACEHOLDER_PRIORITY, "Never")
