"""The per-worker certificate store: rebuilt on a real change only, never left without a context."""

import ssl

from demo.processes import issue_for_loopback
from gangkeeper.certs.issue import IssuedCerts
from gangkeeper.webhook.certreload import MINIMUM_TLS, CertificateStore
from tests.webhook.servers import publish


class Builds:
    """gunicorn's default context factory, counting its calls."""

    def __init__(self, store: CertificateStore):
        self.store, self.calls = store, 0

    def __call__(self) -> ssl.SSLContext:
        self.calls += 1
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.store.certfile, self.store.keyfile)
        return context


def store_in(tmp_path):
    publish(tmp_path, issue_for_loopback())
    store = CertificateStore(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    return store, Builds(store)


def test_one_context_per_certificate_not_per_connection(tmp_path):
    store, build = store_in(tmp_path)
    first = store.context(build)
    assert all(store.context(build) is first for _ in range(100)) and build.calls == 1
    assert first.minimum_version == MINIMUM_TLS


def test_a_rotation_builds_a_new_context(tmp_path):
    store, build = store_in(tmp_path)
    first = store.context(build)
    publish(tmp_path, issue_for_loopback())
    assert store.context(build) is not first and build.calls == 2


def test_a_touch_without_new_content_changes_nothing(tmp_path):
    store, build = store_in(tmp_path)
    first = store.context(build)
    publish(tmp_path, IssuedCerts(b"", (tmp_path / "tls.crt").read_bytes(), (tmp_path / "tls.key").read_bytes()))
    assert store.context(build) is first and build.calls == 1


def test_a_half_rotated_pair_keeps_the_previous_context_until_it_matches(tmp_path):
    store, build = store_in(tmp_path)
    first = store.context(build)
    new = issue_for_loopback()
    (tmp_path / "tls.crt").unlink()
    (tmp_path / "tls.crt").write_bytes(new.tls_crt)  # the new certificate, still the old key
    assert store.context(build) is first
    (tmp_path / "tls.key").unlink()
    (tmp_path / "tls.key").write_bytes(new.tls_key)
    assert store.context(build) is not first
