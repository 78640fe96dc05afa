"""Protobuf request bodies, as client-go's generated clientsets send them (`kubectl create namespace`)."""

from http.client import HTTPConnection

from sim.apiserver import APIServer
from sim.protobuf import CONTENT_TYPE, decode
from sim.server import RunningServer


def varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field(1, field(1, api_version.encode()) + field(2, kind.encode())) + field(2, raw)


NAMESPACE = envelope("v1", "Namespace", field(1, field(1, b"ml-training") + field(11, field(1, b"team") + field(2, b"a"))
                                              + field(14, b"example.com/x")) + field(2, b""))


def test_a_namespace_is_read_with_its_metadata():
    assert decode(NAMESPACE) == {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": "ml-training", "labels": {"team": "a"},
                                              "finalizers": ["example.com/x"]}, "spec": {}}


def test_an_eviction_keeps_its_delete_options():
    raw = field(1, field(1, b"p") + field(3, b"ml")) + field(2, field(1, 30) + field(2, field(1, b"uid-p")))
    assert decode(envelope("policy/v1", "Eviction", raw))["deleteOptions"] == {
        "gracePeriodSeconds": 30, "preconditions": {"uid": "uid-p"}}


def post(url: str, path: str, body: bytes) -> tuple[int, bytes]:
    connection = HTTPConnection(url.removeprefix("http://"), timeout=10)
    connection.request("POST", path, body=body, headers={"Content-Type": CONTENT_TYPE,
                                                         "Accept": f"{CONTENT_TYPE},application/json"})
    answer = connection.getresponse()
    return answer.status, answer.read()


def test_the_server_creates_from_protobuf_and_answers_json_and_refuses_a_kind_it_cannot_read():
    api = APIServer()
    with RunningServer(api) as served:
        code, _ = post(served.url, "/api/v1/namespaces", NAMESPACE)
        assert code == 201 and api.get("namespaces", "ml-training")["metadata"]["labels"]["team"] == "a"
        code, answer = post(served.url, "/api/v1/namespaces/default/configmaps", envelope("v1", "ConfigMap", b""))
        assert code in (404, 415)
        code, answer = post(served.url, "/api/v1/namespaces/default/pods", envelope("v1", "Pod", b""))
        assert code == 415 and b"reads protobuf bodies of Namespace (v1)" in answer
