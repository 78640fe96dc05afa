"""Runs the webhook under gunicorn, started from Python rather than from gunicorn's own CLI.

The launcher owns the one process-wide setting that must precede every import of
prometheus_client: PROMETHEUS_MULTIPROC_DIR, a fresh directory per run, so that the metrics of
all workers add up and a previous run's never do.
"""

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


class WebhookServer(BaseApplication):
    def __init__(self, app_factory: Callable[[], "WSGIApplication"], options: Mapping):
        self._app_factory = app_factory
        self._options = dict(options)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    # types-gunicorn wants an app whose environ is a MutableMapping; typeshed's WSGIApplication,
    # which Flask is, takes a dict, which is what gunicorn passes.
    def load(self) -> "WSGIApplication":  # type: ignore[override]
        return self._app_factory()


def serve(app_config: Mapping, app_factory: Callable[[Mapping], "WSGIApplication"] | None = None,
          **server_settings: Any) -> int:
    """Serve until gunicorn stops; `server_settings` are those of `gunicorn_conf.settings`.

    `app_factory` (default: `create_app`) lets the benchmark serve the same app with its no-op
    baseline route added, under exactly these settings."""
    directory = tempfile.mkdtemp(prefix="gangkeeper-metrics-")
    master = os.getpid()
    os.environ[MULTIPROC_DIR_ENV] = directory
    try:
        from gangkeeper.webhook import gunicorn_conf  # imports prometheus_client, which reads the variable once
        from gangkeeper.webhook.app import create_app

        factory = app_factory or create_app
        WebhookServer(lambda: factory(app_config), gunicorn_conf.settings(**server_settings)).run()
    finally:
        # Workers are forked inside this block and leave it through SystemExit too: only the
        # master removes the directory.
        if os.getpid() == master:
            shutil.rmtree(directory, ignore_errors=True)
    return 0
