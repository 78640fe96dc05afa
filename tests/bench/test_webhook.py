import json

import pytest

from bench.webhook import BenchServer, _connection, _summary, _write_certificate, app_with_noop, worker_pod_review


def test_the_noop_baseline_pays_the_same_transport_checks_as_mutate():
    client = app_with_noop({}).test_client()
    assert client.post("/noop", data=b"{}", content_type="application/json").get_json() == {"ok": True}
    assert client.post("/noop").status_code == 400
    assert client.post("/noop", data=b"x" * 20, content_type="application/json").status_code == 200
    small = app_with_noop({"MAX_BODY_BYTES": 10}).test_client()
    assert "over the limit of 10 bytes" in small.post("/noop", data=b"x" * 20,
                                                       content_type="application/json").get_json()["error"]


@pytest.mark.e2e
def test_the_benchmark_server_serves_mutate_and_noop_from_the_repository_root(tmp_path):
    """The server process starts where `make bench` starts it, in the checkout, whose top-level
    `webhook/` folder must not stand in for `gangkeeper.webhook` (it once did, and /noop was a 404)."""
    ca_pem = _write_certificate(tmp_path)
    server = BenchServer(tmp_path, worker_class="gthread", workers=1, threads=2)
    try:
        server.wait_ready(ca_pem)
        for path, body in (("/noop", b"{}"), ("/mutate", json.dumps(worker_pod_review()).encode())):
            connection = _connection(server.port, ca_pem)
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            answer = connection.getresponse()
            assert answer.status == 200, (path, answer.read())
            answer.read()
    finally:
        server.stop()


def test_the_slices_of_one_endpoint_make_one_figure():
    first = {"latencies": [0.001, 0.003], "errors": 0, "duration_s": 1.0}
    second = {"latencies": [0.002], "errors": 1, "duration_s": 0.5}
    assert _summary(first, second) == {"requests": 3, "errors": 1, "rps": 2.0, "p50_ms": 2.0, "p99_ms": 3.0}
