"""The certificate files on disk, in the layout the webhook reads and a kubernetes.io/tls Secret mounts."""

import os
import tempfile
from pathlib import Path

from gangkeeper.certs.issue import IssuedCerts

CA_CRT = "ca.crt"
TLS_CRT = "tls.crt"
TLS_KEY = "tls.key"

_MODES = {CA_CRT: 0o644, TLS_CRT: 0o644, TLS_KEY: 0o600}


def write_certs(directory: Path, issued: IssuedCerts) -> None:
    """Write the three files; the key is never readable by others, not even for an instant.

    Each file is written to a temporary file in the same directory and renamed over the old one,
    so a webhook that reloads on change never reads half a key or a key without its certificate
    body. The certificate goes last: a watcher keyed on tls.crt sees a matching key already there.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in ((CA_CRT, issued.ca_crt), (TLS_KEY, issued.tls_key), (TLS_CRT, issued.tls_crt)):
        _write_atomically(directory / name, data, _MODES[name])


def read_certs(directory: Path) -> IssuedCerts | None:
    """The certificates in `directory`, or None unless all three files are there."""
    paths = [directory / name for name in (CA_CRT, TLS_CRT, TLS_KEY)]
    if not all(p.is_file() for p in paths):
        return None
    ca_crt, tls_crt, tls_key = (p.read_bytes() for p in paths)
    return IssuedCerts(ca_crt=ca_crt, tls_crt=tls_crt, tls_key=tls_key)


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # created 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
