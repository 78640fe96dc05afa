import pytest

from gangkeeper.controller.checks.ports import UsedPorts, conflicts, members_per_node
from gangkeeper.controller.model.rules import HostPort
from gangkeeper.controller.reading.rules import host_ports
from tests import builders


def pod(containers=(), init_containers=()):
    return builders.pod(containers=list(containers), initContainers=list(init_containers))


def container(*ports, restart_policy=None):
    return builders.container("c", ports=list(ports), **({"restartPolicy": restart_policy} if restart_policy else {}))


def test_host_ports_take_the_defaults_and_skip_ports_without_a_host_port():
    raw = pod([container({"containerPort": 8080},  # no host port: not held on the node
                         {"containerPort": 29500, "hostPort": 29500},
                         {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                         {"containerPort": 1, "hostPort": 0})])
    assert host_ports(raw) == (HostPort("0.0.0.0", "TCP", 29500), HostPort("10.0.0.1", "UDP", 53))
    assert host_ports({}) == ()


def test_sidecars_hold_their_host_ports_and_ordinary_init_containers_do_not():
    raw = pod([container({"hostPort": 1})],
              [container({"hostPort": 2}), container({"hostPort": 3}, restart_policy="Always")])
    assert [p.port for p in host_ports(raw)] == [1, 3]


def test_a_port_two_containers_declare_is_one_port():
    raw = pod([container({"hostPort": 7}), container({"hostPort": 7, "protocol": "TCP"})])
    assert host_ports(raw) == (HostPort("0.0.0.0", "TCP", 7),)


@pytest.mark.parametrize("one, other, expected", [
    (HostPort("0.0.0.0", "TCP", 80), HostPort("0.0.0.0", "TCP", 80), True),
    (HostPort("0.0.0.0", "TCP", 80), HostPort("10.0.0.1", "TCP", 80), True),  # the wildcard takes every IP
    (HostPort("10.0.0.1", "TCP", 80), HostPort("0.0.0.0", "TCP", 80), True),
    (HostPort("10.0.0.1", "TCP", 80), HostPort("10.0.0.1", "TCP", 80), True),
    (HostPort("10.0.0.1", "TCP", 80), HostPort("10.0.0.2", "TCP", 80), False),
    (HostPort("0.0.0.0", "TCP", 80), HostPort("0.0.0.0", "UDP", 80), False),
    (HostPort("0.0.0.0", "TCP", 80), HostPort("0.0.0.0", "TCP", 81), False),
])
def test_conflicts(one, other, expected):
    assert conflicts(one, other) is expected


@pytest.mark.parametrize("held, wanted, expected", [
    (HostPort("0.0.0.0", "TCP", 80), HostPort("10.0.0.1", "TCP", 80), True),
    (HostPort("10.0.0.1", "TCP", 80), HostPort("0.0.0.0", "TCP", 80), True),
    (HostPort("10.0.0.1", "TCP", 80), HostPort("10.0.0.2", "TCP", 80), False),
    (HostPort("10.0.0.1", "TCP", 80), HostPort("10.0.0.1", "SCTP", 80), False),
])
def test_used_ports_agree_with_conflicts(held, wanted, expected):
    used = UsedPorts()
    used.add("p", "n1", [held])
    assert (used.conflict("n1", [wanted]) is not None) is expected is conflicts(held, wanted)
    assert used.conflict("n2", [wanted]) is None


def test_a_port_stays_held_until_the_last_pod_holding_it_goes():
    used = UsedPorts()
    port = HostPort("0.0.0.0", "TCP", 80)
    used.add("p1", "n1", [port])
    used.add("p2", "n1", [port])  # bound by nodeName, past the scheduler
    used.remove("p1")
    assert used.conflict("n1", [port]) == port
    used.remove("p2")
    assert used.conflict("n1", [port]) is None and used.on("n1") == ()


def test_adding_a_pod_again_replaces_its_ports():
    used = UsedPorts()
    used.add("p", "n1", [HostPort("0.0.0.0", "TCP", 80)])
    used.add("p", "n2", [HostPort("0.0.0.0", "TCP", 81)])
    assert used.on("n1") == () and used.on("n2") == (HostPort("0.0.0.0", "TCP", 81),)


def test_a_copy_and_its_source_change_independently():
    used = UsedPorts()
    used.add("p1", "n1", [HostPort("0.0.0.0", "TCP", 80)])
    trial = used.copy()
    trial.add("p2", "n1", [HostPort("0.0.0.0", "TCP", 81)])
    trial.remove("p1")
    used.add("p3", "n1", [HostPort("0.0.0.0", "TCP", 82)])
    assert [p.port for p in used.on("n1")] == [80, 82]
    assert [p.port for p in trial.on("n1")] == [81]
    again = trial.copy()
    again.remove("p2")
    assert [p.port for p in trial.on("n1")] == [81] and again.on("n1") == ()


def test_members_with_host_ports_take_one_node_each():
    used = UsedPorts()
    used.add("busy", "n1", [HostPort("0.0.0.0", "TCP", 29500)])
    ports = (HostPort("0.0.0.0", "TCP", 29500),)
    assert members_per_node(ports, used, "n1") == 0
    assert members_per_node(ports, used, "n2") == 1
    assert members_per_node((), used, "n1") is None
