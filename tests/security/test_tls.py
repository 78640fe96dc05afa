"""TLS of the real server (gunicorn with the shipped settings): what a client on the network
can and cannot negotiate with the webhook, and that the certificate only vouches for its names."""

import datetime
import socket
import ssl
import subprocess
import threading

import pytest

from demo.processes import LOOPBACK, issue_for_loopback
from gangkeeper.certs.issue import issue
from tests.webhook.servers import WebhookProcess, client_context, publish

pytestmark = pytest.mark.e2e

# Families that must never be negotiable, as OpenSSL cipher-string names.
WEAK = {"RC4": "RC4", "3DES": "3DES", "NULL": "eNULL", "EXPORT": "EXP", "anonymous": "aNULL", "MD5": "MD5"}
ALL_AT_LEVEL_0 = "ALL:COMPLEMENTOFALL:@SECLEVEL=0"


@pytest.fixture(scope="module")
def issued():
    return issue_for_loopback()


@pytest.fixture(scope="module")
def server(tmp_path_factory, issued):
    cert_dir, log_dir = tmp_path_factory.mktemp("tls"), tmp_path_factory.mktemp("logs")
    publish(cert_dir, issued)
    webhook = WebhookProcess(cert_dir, log_dir, workers=1)
    try:
        webhook.wait_ready(client_context(issued.ca_crt))
        yield webhook
    finally:
        webhook.stop()


def permissive_client(ca_pem: bytes, version: ssl.TLSVersion, ciphers: str = ALL_AT_LEVEL_0) -> ssl.SSLContext:
    """A client that offers `version` only and whatever `ciphers` names, down to security level 0."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.set_ciphers(ciphers)
    context.minimum_version = context.maximum_version = version
    return context


def handshake(port: int, context: ssl.SSLContext, server_hostname: str = LOOPBACK) -> tuple[str, str]:
    """(protocol version, cipher) of a completed handshake; raises ssl.SSLError when refused."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=server_hostname) as tls:
        return tls.version(), tls.cipher()[0]


@pytest.fixture(scope="module")
def lenient_server(issued, tmp_path_factory):
    """The control: a server that accepts anything this machine's OpenSSL can speak, so that a
    refusal by the webhook is the webhook's doing and not the client's inability to offer it."""
    directory = tmp_path_factory.mktemp("lenient")
    (directory / "tls.crt").write_bytes(issued.tls_crt)
    (directory / "tls.key").write_bytes(issued.tls_key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    context.set_ciphers(ALL_AT_LEVEL_0)
    listener = socket.create_server((LOOPBACK, 0))
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    listener.close()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["TLS 1.0", "TLS 1.1"])
def test_old_tls_versions_are_refused(server, lenient_server, issued, version):
    client = permissive_client(issued.ca_crt, version)
    # The control: this client does speak the old version (to a server that allows it), so the
    # refusal below is the webhook's doing, not the client's.
    assert handshake(lenient_server, client)[0] in ("TLSv1", "TLSv1.1")
    with pytest.raises(ssl.SSLError):
        handshake(server.port, client)


@pytest.mark.parametrize("version, name", [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")])
def test_tls_1_2_and_1_3_are_accepted(server, issued, version, name):
    context = client_context(issued.ca_crt)
    context.minimum_version = context.maximum_version = version
    assert handshake(server.port, context)[0] == name


def offerable(ciphers: str) -> list[str]:
    """The TLS 1.2 suites this machine's OpenSSL can offer for a cipher string (empty when none)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.set_ciphers(ciphers + ":@SECLEVEL=0")
    except ssl.SSLError:
        return []
    return [cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] != "TLSv1.3"]


def accepted_tls12_suites(port: int, ca_pem: bytes, suites: list[str]) -> list[str]:
    accepted = []
    for suite in suites:
        try:
            handshake(port, permissive_client(ca_pem, ssl.TLSVersion.TLSv1_2, suite + ":@SECLEVEL=0"))
            accepted.append(suite)
        except ssl.SSLError:
            pass
    return accepted


def test_no_weak_cipher_is_negotiable(server, lenient_server, issued):
    """Every weak suite this machine's OpenSSL can still offer with an ECDSA certificate (NULL and
    anonymous ones; RC4, 3DES and EXPORT are gone from OpenSSL 3 builds): a lenient server accepts
    each — the control — and the webhook refuses every one."""
    usable = {family: accepted_tls12_suites(lenient_server, issued.ca_crt, offerable(ciphers))
              for family, ciphers in WEAK.items()}
    testable = [suite for suites in usable.values() for suite in suites]
    assert testable, f"no weak suite could be offered at all: {usable}"
    assert accepted_tls12_suites(server.port, issued.ca_crt, testable) == []


def test_every_negotiable_tls_1_2_suite_is_strong(server, issued):
    """Every TLS 1.2 suite this machine can offer, one at a time: what the server accepts is
    forward-secret AEAD or at worst CBC with SHA-2, never a weak family."""
    accepted = accepted_tls12_suites(server.port, issued.ca_crt, offerable("ALL:COMPLEMENTOFALL"))
    assert accepted, "the server accepted no TLS 1.2 suite at all"
    weak = {suite for family in WEAK.values() for suite in offerable(family)}
    assert not weak & set(accepted)
    assert all(suite.startswith(("ECDHE-", "DHE-")) for suite in accepted), accepted


def test_openssl_s_client_sees_the_same(server):
    """An independent client: `openssl s_client` offering only NULL and anonymous suites fails."""
    result = subprocess.run(["openssl", "s_client", "-connect", f"{LOOPBACK}:{server.port}", "-tls1_2",
                             "-cipher", "eNULL:aNULL:@SECLEVEL=0"], input=b"", capture_output=True, timeout=10)
    assert result.returncode != 0
    assert b"handshake failure" in result.stderr or b"alert" in result.stderr


@pytest.fixture(scope="module")
def wrongly_named_server(tmp_path_factory):
    """The webhook serving a certificate for another Service only (no loopback name or IP)."""
    wrong = issue("other-service", "elsewhere", datetime.datetime.now(datetime.timezone.utc), 1)
    cert_dir, log_dir = tmp_path_factory.mktemp("wrong-tls"), tmp_path_factory.mktemp("wrong-logs")
    publish(cert_dir, wrong)
    webhook = WebhookProcess(cert_dir, log_dir, workers=1)
    context = client_context(wrong.ca_crt)
    context.check_hostname = False
    try:
        webhook.wait_ready(context)
        yield webhook, wrong
    finally:
        webhook.stop()


def test_a_certificate_for_other_names_fails_hostname_verification(wrongly_named_server):
    webhook, wrong = wrongly_named_server
    for name in (LOOPBACK, "gangkeeper-webhook.gangkeeper.svc", "localhost"):
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|IP address mismatch"):
            handshake(webhook.port, client_context(wrong.ca_crt), server_hostname=name)
    # Same CA, the name the certificate was issued for: the failure above was the name alone.
    assert handshake(webhook.port, client_context(wrong.ca_crt), server_hostname="other-service.elsewhere.svc")


def test_a_certificate_from_another_ca_is_not_trusted(server):
    stranger = issue_for_loopback()
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer|self.signed"):
        handshake(server.port, client_context(stranger.ca_crt))
