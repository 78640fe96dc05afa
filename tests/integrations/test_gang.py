"""Gang, our CRD: what the controller reads off it, and what it may do with it."""

from gangkeeper import names
from gangkeeper.integrations import gang


def test_a_gang_declares_size_group_and_timeout():
    declared = gang.declaration({"metadata": {"name": "llm"}, "spec": {
        "minCount": 16, "groupName": "llm-run", "scheduleTimeoutSeconds": 600}, "status": {"phase": "Waiting"}})
    assert declared == {"sizes": {"": 16}, "group_name": "llm-run", "schedule_timeout": 600.0, "topology": {},
                        "parent": "", "min_group_count": None,
                        "status": {"phase": "Waiting"}, "reservations": {}, "disposable": False}


def test_the_group_defaults_to_the_gangs_name_and_nothing_else_is_assumed():
    declared = gang.declaration({"metadata": {"name": "llm"}})
    assert declared == {"sizes": {"": 0}, "group_name": "llm", "schedule_timeout": None, "topology": {},
                        "parent": "", "min_group_count": None, "status": {}, "reservations": {}, "disposable": False}


def test_a_gang_names_its_parent_and_a_parent_its_min_group_count():
    child = gang.declaration({"metadata": {"name": "decode"}, "spec": {"minCount": 4, "parent": "pair"}})
    assert (child["parent"], child["min_group_count"]) == ("pair", None)
    parent = gang.declaration({"metadata": {"name": "pair"}, "spec": {"minGroupCount": 2}})
    assert (parent["parent"], parent["min_group_count"], parent["sizes"]) == ("", 2, {"": 0})
    odd = gang.declaration({"metadata": {"name": "odd"}, "spec": {"minGroupCount": "2", "parent": 7}})
    assert (odd["parent"], odd["min_group_count"]) == ("", 0), "no parent, and a count the controller refuses"


def test_a_gang_declares_its_topology_as_written_for_the_controller_to_judge():
    spec = {"minCount": 16, "topology": {"required": "topology.kubernetes.io/zone", "sliceRequired": "nvidia.com/gpu.clique",
                                         "sliceSize": 4, "preferred": None, "unknown": "x"}}
    assert gang.declaration({"metadata": {"name": "llm"}, "spec": spec})["topology"] == {
        "required": "topology.kubernetes.io/zone", "sliceRequired": "nvidia.com/gpu.clique", "sliceSize": 4}


def test_a_topology_field_that_is_no_scalar_is_kept_as_text_and_a_topology_that_is_no_object_is_none():
    nested = gang.declaration({"metadata": {"name": "g"}, "spec": {"topology": {"sliceSize": [4]}}})
    assert nested["topology"] == {"sliceSize": "[4]"}
    assert gang.declaration({"metadata": {"name": "g"}, "spec": {"topology": "zone"}})["topology"] == {}


def test_only_a_gang_the_controller_created_without_owner_is_disposable():
    ours = {"name": "g", "labels": {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}}
    assert gang.declaration({"metadata": ours})["disposable"] is True
    owned = {**ours, "ownerReferences": [{"kind": "PyTorchJob", "name": "bert", "uid": "u"}]}
    assert gang.declaration({"metadata": owned})["disposable"] is False


def test_the_controller_creates_deletes_and_writes_the_status_of_gangs_and_never_suspends_one():
    assert gang.INTEGRATION.verbs == {"list", "watch", "create", "delete"}
    assert gang.INTEGRATION.status_verbs == {"patch"}
    assert gang.INTEGRATION.suspension is None and gang.INTEGRATION.group_of is None
    assert gang.RESOURCE.path("ml", "g", "status") == "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status"
