"""What every kind's rule shares: label values and label keys as the API server accepts them."""

import pytest

from gangkeeper.integrations.finding import is_valid_label_key, is_valid_label_value


@pytest.mark.parametrize("key", [
    "topology.kubernetes.io/zone",
    "cloud.google.com/gce-topology-block",
    "topology.k8s.aws/network-node-layer-1",
    "nvidia.com/gpu.clique",
    "network.topology.nvidia.com/accelerator",
    "rack",
    "Rack_2.b",
    "x" * 63,
    f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 61}/{'n' * 63}",  # a 253-character prefix
])
def test_label_keys_the_api_server_accepts(key):
    assert is_valid_label_key(key)


@pytest.mark.parametrize("key", [
    "",
    "/zone",  # an empty prefix
    "topology.kubernetes.io/",  # an empty name
    "a/b/c",
    "Topology.Kubernetes.io/zone",  # the prefix is lowercase
    "-bad.io/zone",
    "zone-",
    "Bad Key",
    "x" * 64,
    f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 62}/zone",  # a 254-character prefix
    "zone\n",
    None,
    4,
])
def test_what_is_no_label_key(key):
    assert not is_valid_label_key(key)


def test_a_label_value_ending_in_a_newline_is_none():
    assert is_valid_label_value("train") and not is_valid_label_value("train\n")
