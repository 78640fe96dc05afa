from sim.podrules import binding_conflict, validate_create, validate_update
from tests.sim.helpers import pod

PIN = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}


def _with(base: dict, **spec) -> dict:
    return dict(base, spec=dict(base["spec"], **spec))


def fields(errors) -> list[str]:
    return [e.field for e in errors]


def test_create_refuses_node_name_with_gates():
    assert fields(validate_create(pod("p", gates=["g.io/x"], node="n1"))) == ["spec.nodeName"]
    assert validate_create(pod("p", node="n1")) == []


def test_create_refuses_duplicate_gates():
    assert fields(validate_create(pod("p", gates=["g.io/x", "g.io/x"]))) == ["spec.schedulingGates[1].name"]


def test_gates_may_only_be_removed():
    gated = pod("p", gates=["a.io/x", "b.io/y"])
    assert validate_update(gated, _with(gated, schedulingGates=[{"name": "b.io/y"}])) == []
    errors = validate_update(gated, _with(gated, schedulingGates=[{"name": "a.io/x"}, {"name": "c.io/z"}]))
    assert [str(e) for e in errors] == ["spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found "
                                        "new scheduling gate 'c.io/z'"]


def test_ungated_pod_gets_no_new_gate():
    plain = pod("p")
    assert "spec.schedulingGates[0].name" in fields(validate_update(plain, _with(plain, schedulingGates=[{"name": "a/b"}])))


def test_required_affinity_may_be_set_or_extended_while_gated():
    gated = pod("p", gates=["a.io/x"])
    assert validate_update(gated, _with(gated, affinity=PIN)) == []
    pinned = _with(gated, affinity=PIN)
    term = {"matchExpressions": PIN["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"], "matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    extended = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert validate_update(pinned, _with(pinned, affinity=extended)) == []


def test_required_affinity_terms_may_not_change_or_multiply_while_gated():
    pinned = _with(pod("p", gates=["a.io/x"]), affinity=PIN)
    other = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    assert fields(validate_update(pinned, _with(pinned, affinity=other))) == [f"{path}[0]"]
    two = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        PIN["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0], {}]}}}
    assert fields(validate_update(pinned, _with(pinned, affinity=two))) == [path]


def test_node_selector_may_only_gain_keys_while_gated():
    gated = _with(pod("p", gates=["a.io/x"]), nodeSelector={"zone": "a"})
    assert validate_update(gated, _with(gated, nodeSelector={"zone": "a", "rack": "1"})) == []
    assert fields(validate_update(gated, _with(gated, nodeSelector={"zone": "b"}))) == ["spec.nodeSelector"]


def test_node_selector_is_frozen_once_ungated():
    bound = pod("p", node="n1")
    errors = validate_update(bound, _with(bound, nodeSelector={"x": "y"}))
    assert fields(errors) == ["spec"] and '+ "NodeSelector": {' in errors[0].detail


def test_tolerations_may_only_be_added():
    base = _with(pod("p"), tolerations=[{"key": "a", "operator": "Exists"}])
    assert validate_update(base, _with(base, tolerations=[{"key": "a", "operator": "Exists"},
                                                          {"key": "b", "operator": "Exists"}])) == []
    assert fields(validate_update(base, _with(base, tolerations=[{"key": "b", "operator": "Exists"}]))) == [
        "spec.tolerations"]


def test_image_may_change():
    base = pod("p", node="n1")
    changed = _with(base, containers=[dict(base["spec"]["containers"][0], image="busybox:2")])
    assert validate_update(base, changed) == []


def test_binding_conflicts():
    assert binding_conflict(pod("p", node="n1")) == 'pod p is already assigned to node "n1"'
    assert binding_conflict(pod("p", gates=["a.io/x"])) == "pod p has non-empty .spec.schedulingGates"
    assert binding_conflict(pod("p")) is None
