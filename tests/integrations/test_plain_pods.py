"""Plain pods: the explicit group label, kept as written, and the lone accelerator pod."""

from gangkeeper import names
from gangkeeper.integrations import plain_pods
from tests.integrations.pods import pod

PATTERNS = names.DEFAULT_ACCELERATORS


def test_the_explicit_label_is_kept_as_written():
    found = plain_pods.explicit_group(pod(labels={names.GROUP_LABEL: "Not A Label Value"}))
    assert (found.identity.name, found.identity.source) == ("Not A Label Value", names.SOURCE_EXPLICIT)
    assert plain_pods.explicit_group(pod()) is None


def test_an_accelerator_pod_is_a_group_of_its_own():
    found = plain_pods.lone_pod(pod("solo", gpus=2), PATTERNS, "")
    assert (found.identity.name, found.identity.source) == ("solo", names.SOURCE_ACCELERATOR_POD)
    assert found.reason == "lone pod requesting nvidia.com/gpu"


def test_a_pod_without_a_name_yet_takes_the_fallback():
    body = pod(gpus=1)
    del body["metadata"]["name"]
    assert plain_pods.lone_pod(body, PATTERNS, "gen-ab12cd34").identity.name == "gen-ab12cd34"


def test_a_cpu_pod_or_unreadable_requests_are_left_alone_with_the_reason():
    assert "not a training pod" in plain_pods.lone_pod(pod(), PATTERNS, "").reason
    body = pod(gpus=1)
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "lots"}}
    found = plain_pods.lone_pod(body, PATTERNS, "")
    assert found.identity is None and "could not be read" in found.reason


def test_plain_pods_have_no_object_to_watch_or_suspend():
    integration = plain_pods.INTEGRATION
    assert integration.resource is None and integration.verbs == frozenset() and integration.suspension is None
