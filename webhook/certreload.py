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

log = logging.getLogger("gangkeeper.webhook.certs")

MINIMUM_TLS = ssl.TLSVersion.TLSv1_2

ContextFactory = Callable[[], ssl.SSLContext]


class CertificateStore:
    """The current SSLContext for one certificate/key pair, rebuilt when the files change."""

    def __init__(self, certfile: str, keyfile: str):
        self.certfile, self.keyfile = certfile, keyfile
        self._lock = threading.Lock()  # gthread workers accept on several threads
        self._stamp: tuple | None = None
        self._digest = ""
        self._context: ssl.SSLContext | None = None

    def context(self, build: ContextFactory) -> ssl.SSLContext:
        """The context to serve a new connection with; `build` makes one from the files."""
        stamp = self._files_stamp()
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    self._reload(stamp, build)
        return self._context  # type: ignore[return-value]  # the first _reload raises or sets it

    def _files_stamp(self) -> tuple:
        stats = (os.stat(self.certfile), os.stat(self.keyfile))
        return tuple((stat.st_ino, stat.st_size, stat.st_mtime_ns) for stat in stats)

    def _reload(self, stamp: tuple, build: ContextFactory) -> None:
        with open(self.certfile, "rb") as cert, open(self.keyfile, "rb") as key:
            digest = hashlib.sha256(cert.read() + b"\0" + key.read()).hexdigest()
        if digest == self._digest:
            self._stamp = stamp
            return
        try:
            context = build()
        except (OSError, ssl.SSLError) as error:
            if self._context is None:
                raise
            log.warning("certificate in %s did not load (%s); serving the previous one until it does",
                        self.certfile, error)
            return
        context.minimum_version = MINIMUM_TLS
        self._context, self._digest, self._stamp = context, digest, stamp
        log.info("serving certificate %s (sha256 of pair %s)", self.certfile, digest[:16])


_stores: dict[tuple[str, str], CertificateStore] = {}


def ssl_context(conf, default_ssl_context_factory: ContextFactory) -> ssl.SSLContext:
    """gunicorn's `ssl_context` hook: gunicorn's own context (its cert, ciphers and CA settings),
    TLS 1.2 at least, built once per certificate rather than once per connection."""
    key = (conf.certfile, conf.keyfile)
    store = _stores.get(key)
    if store is None:
        store = _stores.setdefault(key, CertificateStore(*key))
    return store.context(default_ssl_context_factory)
