"""The three PodGroups: the native one, scheduler-plugins' and Volcano's. Pods name the group;
the PodGroup of that name sizes it; none can be suspended."""

import pytest

from gangkeeper import names
from gangkeeper.integrations import native_pod_group, scheduler_plugins, volcano
from tests.integrations.pods import pod

KINDS = [
    (native_pod_group, pod(labels={names.NATIVE_POD_GROUP_LABEL: "pg"}), names.SOURCE_NATIVE_POD_GROUP,
     f"label {names.NATIVE_POD_GROUP_LABEL}", {"schedulingPolicy": {"gang": {"minCount": 6}}}),
    (scheduler_plugins, pod(labels={names.PLUGINS_POD_GROUP_LABEL: "pg"}), names.SOURCE_PLUGINS_POD_GROUP,
     f"label {names.PLUGINS_POD_GROUP_LABEL}", {"minMember": 6}),
    (volcano, pod(annotations={names.VOLCANO_GROUP_ANNOTATION: "pg"}), names.SOURCE_VOLCANO_POD_GROUP,
     f"annotation {names.VOLCANO_GROUP_ANNOTATION}", {"minMember": 6}),
]
IDS = ["native", "scheduler-plugins", "volcano"]


@pytest.mark.parametrize(("kind", "body", "source", "how", "spec"), KINDS, ids=IDS)
def test_the_pod_names_its_group(kind, body, source, how, spec):
    found = kind.group_of(body)
    assert (found.identity.name, found.identity.source, found.reason) == ("pg", source, how)
    assert kind.group_of(pod()) is None


@pytest.mark.parametrize(("kind", "body", "source", "how", "spec"), KINDS, ids=IDS)
def test_the_pod_group_declares_the_size_zero_when_unset(kind, body, source, how, spec):
    assert kind.declaration({"spec": spec}) == {"sizes": {"": 6}}
    assert kind.declaration({}) == {"sizes": {"": 0}}
    assert kind.RESOURCE.kind == names.POD_GROUP_KIND
    assert kind.INTEGRATION.suspension is None and not kind.INTEGRATION.owns_pods


def test_a_name_that_is_no_label_value_is_made_one():
    found = scheduler_plugins.group_of(pod(labels={names.PLUGINS_POD_GROUP_LABEL: "a" * 70}))
    assert len(found.identity.name) == 63


def test_the_pod_group_is_found_by_the_name_the_pod_gives():
    labels = {names.NATIVE_POD_GROUP_LABEL: "raw", names.PLUGINS_POD_GROUP_LABEL: "raw"}
    assert native_pod_group.INTEGRATION.declarer("group", labels, None) == ("raw", None)
    assert scheduler_plugins.INTEGRATION.declarer("group", labels, None) == ("raw", None)
    assert scheduler_plugins.INTEGRATION.declarer("group", {}, None) == ("group", None)
    assert volcano.INTEGRATION.declarer("group", labels, None) == ("group", None)
