"""Host ports, decided as the kube-scheduler's NodePorts filter decides them.

A pod holds the host ports of its app containers and of its sidecars (`reading.rules.host_ports`).
A port is (host IP, protocol, port); the IP defaults to the wildcard 0.0.0.0 and the protocol to
TCP, and a wildcard port conflicts with the same protocol and port on any IP.

A member that has host ports conflicts with itself: two members of one class never share a node
(`members_per_node`), so the planner places such a group on as many nodes as it has members.

`UsedPorts` is kept pod by pod and copied for every planning pass, so it is copy-on-write like
the capacity ledger: a copy shares each node's ports until either side changes that node.
"""

from collections.abc import Iterable

from gangkeeper.controller.model.rules import WILDCARD_IP, HostPort

REFUSAL = "node(s) didn't have free ports for the requested pod ports"


def conflicts(one: HostPort, other: HostPort) -> bool:
    """Same protocol and port on the same IP, or on any IP when either side is the wildcard."""
    return (one.protocol == other.protocol and one.port == other.port
            and (one.ip == other.ip or WILDCARD_IP in (one.ip, other.ip)))


class UsedPorts:
    """The host ports held on each node, by the pods placed there (see the module docstring).

    Per node: (protocol, port) → {ip: how many pods hold it}. Counted rather than a set, because
    pods bound by `spec.nodeName` bypass the scheduler and may hold the same port twice; the port
    stays held until the last of them goes.
    """

    __slots__ = ("_pods", "_nodes", "_private")

    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, tuple[HostPort, ...]]] = {}
        self._nodes: dict[str, dict[tuple[str, int], dict[str, int]]] = {}
        self._private: set[str] | None = None  # nodes whose ports are ours alone; None: all of them

    def add(self, uid: str, node: str, ports: Iterable[HostPort]) -> None:
        """The pod holds `ports` on `node` (replacing what it held before)."""
        self.remove(uid)
        ports = tuple(ports)
        if not ports:
            return
        self._pods[uid] = (node, ports)
        held = self._own(node)
        for port in ports:
            by_ip = held.setdefault((port.protocol, port.port), {})
            by_ip[port.ip] = by_ip.get(port.ip, 0) + 1

    def remove(self, uid: str) -> None:
        entry = self._pods.pop(uid, None)
        if entry is None:
            return
        node, ports = entry
        held = self._own(node)
        for port in ports:
            by_ip = held[(port.protocol, port.port)]
            by_ip[port.ip] -= 1
            if not by_ip[port.ip]:
                del by_ip[port.ip]
            if not by_ip:
                del held[(port.protocol, port.port)]

    def conflict(self, node: str, ports: Iterable[HostPort]) -> HostPort | None:
        """The first of `ports` that a pod on `node` already holds, or None when all are free."""
        held = self._nodes.get(node)
        if not held:
            return None
        for port in ports:
            by_ip = held.get((port.protocol, port.port))
            if by_ip and (port.ip == WILDCARD_IP or WILDCARD_IP in by_ip or port.ip in by_ip):
                return port
        return None

    def on(self, node: str) -> tuple[HostPort, ...]:
        """The ports held on a node, sorted (read only)."""
        held = self._nodes.get(node, {})
        return tuple(sorted(HostPort(ip, protocol, port) for (protocol, port), by_ip in held.items() for ip in by_ip))

    def copy(self) -> "UsedPorts":
        clone = UsedPorts.__new__(UsedPorts)
        clone._pods = dict(self._pods)
        clone._nodes = dict(self._nodes)
        self._private, clone._private = set(), set()
        return clone

    def _own(self, node: str) -> dict[tuple[str, int], dict[str, int]]:
        """The node's ports, copied first when a copy may share them (the per-port maps too)."""
        if self._private is not None and node not in self._private:
            self._nodes[node] = {key: dict(by_ip) for key, by_ip in self._nodes.get(node, {}).items()}
            self._private.add(node)
        return self._nodes.setdefault(node, {})


def members_per_node(ports: tuple[HostPort, ...], used: UsedPorts, node: str) -> int | None:
    """How many members asking for `ports` the node takes: None (no limit) without host ports;
    otherwise 1 when every port is free there, else 0 (a member conflicts with its own copy)."""
    if not ports:
        return None
    return 0 if used.conflict(node, ports) else 1
