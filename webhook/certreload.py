"""The serving certificate from --cert-dir, picked up again when it is rotated, without a restart.

What gunicorn does (27.x, `gunicorn/sock.py`, workers `sync.py` and `gthread.py`): every new
connection calls the `ssl_context` hook, and the default hook builds a fresh SSLContext that
reads tls.crt and tls.key from disk. Rotation therefore needs no SIGHUP, but each connection
pays for parsing the key, and a connection that arrives while the kubelet swaps a secret
volume's `..data` symlink can read a new certificate with the old key and fail its handshake.
A SIGHUP would be worse: the master replaces every worker, and keep-alive connections to the
old ones close under the API server.

So each worker keeps one context and rebuilds it only when the files change: a stat of both
(following the symlinks) on each connection, then a content hash so that a touch alone changes
nothing. A pair that does not load (caught mid-swap) leaves the previous context in place and is
tried again on the next connection. Open connections keep their session; new ones get the new
certificate.
"""

import hashlib
import logging
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from gunicorn.config import Config

log = logging.getLogger("gangkeeper.webhook.certs")

MINIMUM_TLS = ssl.TLSVersion.TLSv1_2

ContextFactory = Callable[[], ssl.SSLContext]


@dataclass(frozen=True)
class _Serving:
    """The context served, the digest of the pair it was built from, and the files' stamp when
    they were last found to hold that pair."""

    context: ssl.SSLContext
    digest: str
    stamp: tuple


class CertificateStore:
    """The current SSLContext for one certificate/key pair, rebuilt when the files change."""

    def __init__(self, certfile: str, keyfile: str):
        self.certfile, self.keyfile = certfile, keyfile
        self._lock = threading.Lock()  # gthread workers accept on several threads
        self._serving: _Serving | None = None  # None until the first pair loads

    def context(self, build: ContextFactory) -> ssl.SSLContext:
        """The context to serve a new connection with; `build` makes one from the files."""
        stamp = self._files_stamp()
        serving = self._serving
        if serving is None or stamp != serving.stamp:
            with self._lock:
                serving = self._serving
                if serving is None or stamp != serving.stamp:
                    serving = self._reload(stamp, build, serving)
        return serving.context

    def _files_stamp(self) -> tuple:
        stats = (os.stat(self.certfile), os.stat(self.keyfile))
        return tuple((stat.st_ino, stat.st_size, stat.st_mtime_ns) for stat in stats)

    def _reload(self, stamp: tuple, build: ContextFactory, serving: _Serving | None) -> _Serving:
        """What to serve now the files' stamp changed: the same context when the pair is the same,
        else one built from it; the previous one while a new pair does not load (the first pair
        must: it raises)."""
        with open(self.certfile, "rb") as cert, open(self.keyfile, "rb") as key:
            digest = hashlib.sha256(cert.read() + b"\0" + key.read()).hexdigest()
        if serving is not None and digest == serving.digest:
            self._serving = replace(serving, stamp=stamp)
            return self._serving
        try:
            context = build()
        except (OSError, ssl.SSLError) as error:
            if serving is None:
                raise
            log.warning("certificate in %s did not load (%s); serving the previous one until it does",
                        self.certfile, error)
            return serving
        context.minimum_version = MINIMUM_TLS
        self._serving = _Serving(context, digest, stamp)
        log.info("serving certificate %s (sha256 of pair %s)", self.certfile, digest[:16])
        return self._serving


_stores: dict[tuple[str, str], CertificateStore] = {}


def ssl_context(conf: Config, default_ssl_context_factory: ContextFactory) -> ssl.SSLContext:
    """gunicorn's `ssl_context` hook: gunicorn's own context (its cert, ciphers and CA settings),
    TLS 1.2 at least, built once per certificate rather than once per connection."""
    key = (conf.certfile, conf.keyfile)
    store = _stores.get(key)
    if store is None:
        store = _stores.setdefault(key, CertificateStore(*key))
    return store.context(default_ssl_context_factory)
