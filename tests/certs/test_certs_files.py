"""The files on disk: all three, the key private, nothing left half-written."""

import datetime
import stat

import pytest

from gangkeeper.certs import files
from gangkeeper.certs.issue import issue

NOW = datetime.datetime(2026, 1, 15, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def issued():
    return issue("svc", "ns", NOW, days=1)


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_the_three_files_with_the_key_private(tmp_path, issued):
    files.write_certs(tmp_path / "tls", issued)
    directory = tmp_path / "tls"
    assert _mode(directory / "tls.key") == 0o600
    assert _mode(directory / "tls.crt") == 0o644 and _mode(directory / "ca.crt") == 0o644
    assert sorted(p.name for p in directory.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert files.read_certs(directory) == issued


def test_replaces_existing_files_and_keeps_the_key_private(tmp_path, issued):
    (tmp_path / "tls.key").write_bytes(b"old")
    (tmp_path / "tls.key").chmod(0o644)
    files.write_certs(tmp_path, issued)
    assert (tmp_path / "tls.key").read_bytes() == issued.tls_key
    assert _mode(tmp_path / "tls.key") == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, issued, monkeypatch):
    (tmp_path / "ca.crt").write_bytes(b"old")

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "fsync", fail)
    with pytest.raises(OSError):
        files.write_certs(tmp_path, issued)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt"]
    assert (tmp_path / "ca.crt").read_bytes() == b"old"


def test_read_needs_all_three_files(tmp_path, issued):
    files.write_certs(tmp_path, issued)
    (tmp_path / "ca.crt").unlink()
    assert files.read_certs(tmp_path) is None
    assert files.read_certs(tmp_path / "missing") is None
