"""/healthz and /readyz on plain HTTP, for the kubelet's probes.

/healthz: the process answers and the reconcile loop has completed a turn recently (a stuck
loop gets the pod restarted). /readyz: the caches have synced; a standby replica is ready too,
so that a rollout does not wait on leadership.
"""

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_health(port: int, alive: Callable[[], bool], ready: Callable[[], bool],
                 host: str = "0.0.0.0") -> ThreadingHTTPServer:
    checks = {"/healthz": alive, "/readyz": ready}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - name fixed by the base class
            check = checks.get(self.path.split("?")[0])
            ok = check is not None and check()
            body = b"ok\n" if ok else b"not ok\n"
            self.send_response(200 if ok else (404 if check is None else 503))
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - probes every few seconds: quiet
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
