"""The webhook as the API server meets it: gunicorn, HTTPS on loopback, several workers."""

import http.client
import json
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from demo.processes import issue_for_loopback
from tests.webhook.builders import fixture, pod, review
from tests.webhook.servers import WebhookProcess, client_context, publish

pytestmark = pytest.mark.e2e

MAX_BODY = 3 * 2**20
UID = "5d3c1a2b-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cert_dir, log_dir = tmp_path_factory.mktemp("tls"), tmp_path_factory.mktemp("logs")
    issued = issue_for_loopback()
    publish(cert_dir, issued)
    webhook = WebhookProcess(cert_dir, log_dir, "--audit-file", str(log_dir / "audit.log"))
    context = client_context(issued.ca_crt)
    try:
        webhook.wait_ready(context)
        yield webhook, context
    finally:
        webhook.stop()


def post(server, path, body: bytes | None, headers=None):
    webhook, context = server
    connection = webhook.connect(context)
    connection.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, json.loads(data) if data else None


def test_recorded_requests_are_answered(server):
    for number, allowed in (("01", True), ("13", False)):
        recorded = fixture(number)
        status, body = post(server, recorded["http"]["path"], json.dumps(recorded["review"]).encode(),
                            recorded["http"]["headers"])
        assert status == 200
        assert body["response"]["uid"] == recorded["review"]["request"]["uid"]
        assert body["response"]["allowed"] is allowed


def raw_post(server, path: str, headers: dict, body_parts=()) -> tuple[int, dict]:
    """POST over a raw TLS socket, reading the answer even when the server stops reading first
    (gunicorn drains at most 64 KiB of a body the app did not read, then closes)."""
    webhook, context = server
    connection = webhook.connect(context)
    connection.connect()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    connection.sock.sendall(f"POST {path} HTTP/1.1\r\nHost: webhook\r\n{head}\r\n".encode())
    try:
        for part in body_parts:
            connection.sock.sendall(part)
    except OSError:
        pass
    answer = http.client.HTTPResponse(connection.sock)
    answer.begin()
    return answer.status, json.loads(answer.read())


def test_a_declared_oversize_body_is_refused_before_it_is_read(server):
    status, answer = raw_post(server, "/validate", {"Content-Type": "application/json",
                                                    "Content-Length": str(MAX_BODY + 1)})
    assert status == 400 and f"body of {MAX_BODY + 1} bytes is over the limit of {MAX_BODY} bytes" in answer["error"]


def test_an_undeclared_oversize_body_is_read_no_further_than_the_limit(server):
    chunk = b" " * 65536
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (MAX_BODY // len(chunk) + 1) + [b"0\r\n\r\n"]
    status, answer = raw_post(server, "/mutate", {"Content-Type": "application/json",
                                                  "Transfer-Encoding": "chunked"}, parts)
    assert status == 400 and f"body is over the limit of {MAX_BODY} bytes" in answer["error"]


@pytest.mark.parametrize("path, body, headers, says", [
    ("/mutate", b"", None, "empty body"),
    ("/mutate", b"{}", {"Content-Type": "text/plain"}, "Content-Type"),
    ("/mutate", b"{oops", None, "not valid JSON"),
    ("/validate", json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), None, "not an AdmissionReview"),
    ("/mutate?timeout=5s", json.dumps({**review(pod("p")), "request": {"uid": UID}}).encode(), None, UID),
])
def test_bad_input_is_a_400(server, path, body, headers, says):
    status, answer = post(server, path, body, headers)
    assert status == 400 and says in answer["error"]


def test_health(server):
    webhook, context = server
    connection = webhook.connect(context)
    for path in ("/healthz", "/readyz"):
        connection.request("GET", path)
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b"ok\n")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_below_1_2_is_refused(server):
    """The client could speak TLS 1.1 (lowest security level): the server's minimum refuses it."""
    webhook, context = server
    legacy = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    legacy.check_hostname, legacy.verify_mode = False, ssl.CERT_NONE
    legacy.minimum_version = legacy.maximum_version = ssl.TLSVersion.TLSv1_1
    legacy.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(ssl.SSLError, match="(?i)version"):
        webhook.connect(legacy).request("GET", "/healthz")
    tls12 = client_context(ssl.DER_cert_to_PEM_cert(context.get_ca_certs(binary_form=True)[0]).encode())
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    connection = webhook.connect(tls12)
    connection.request("GET", "/healthz")
    assert connection.getresponse().status == 200 and connection.sock.version() == "TLSv1.2"


def scrape(server) -> dict[str, float]:
    webhook, context = server
    connection = webhook.connect(context)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("gangkeeper_webhook_requests_total")}


def test_metrics_add_up_across_workers(server):
    key = 'gangkeeper_webhook_requests_total{decision="patched",endpoint="mutate"}'
    before = scrape(server).get(key, 0.0)
    body = json.dumps(review(pod("p", gpus=1))).encode()
    with ThreadPoolExecutor(8) as pool:  # new connections, spread over both workers
        statuses = list(pool.map(lambda _: post(server, "/mutate", body)[0], range(40)))
    assert statuses == [200] * 40
    assert {scrape(server).get(key) for _ in range(6)} == {before + 40}


def test_a_rotated_certificate_is_served_without_failed_requests(tmp_path):
    first, second = issue_for_loopback(), issue_for_loopback()
    publish(tmp_path / "tls", first)
    webhook = WebhookProcess(tmp_path / "tls", tmp_path, workers=2)
    context = client_context(first.ca_crt, second.ca_crt)
    failures, served, stop = [], set(), threading.Event()
    body = json.dumps(review(pod("p", gpus=1))).encode()

    def keep_calling(reuse: bool):
        connection = webhook.connect(context)
        while not stop.is_set():
            try:
                if not reuse:
                    connection = webhook.connect(context)
                connection.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
                answer = connection.getresponse()
                answer.read()
                served.add(connection.sock.getpeercert(binary_form=True))
                if answer.status != 200:
                    failures.append(answer.status)
            except OSError as error:
                failures.append(repr(error))

    try:
        webhook.wait_ready(context)
        callers = [threading.Thread(target=keep_calling, args=(reuse,)) for reuse in (True, False, False)]
        for caller in callers:
            caller.start()
        time.sleep(0.3)
        publish(tmp_path / "tls", second)
        new_certificate = ssl.PEM_cert_to_DER_cert(second.tls_crt.decode())
        deadline = time.monotonic() + 10
        while new_certificate not in served and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        stop.set()
        for caller in callers:
            caller.join()
    finally:
        stop.set()
        webhook.stop()
    assert new_certificate in served
    assert ssl.PEM_cert_to_DER_cert(first.tls_crt.decode()) in served
    assert failures == []
