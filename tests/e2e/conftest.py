"""One stack for the whole suite: the real webhook and controller processes on one emulated cluster.

Every test works in a namespace and node pool of its own (`tests.e2e.workloads.new_team`), so the
tests stay independent while sharing the processes. A test that stops the webhook starts it again
before it ends.
"""

import pytest

pytest.register_assert_rewrite("tests.e2e.checks")

from tests.e2e.stack import Stack, Webhook  # noqa: E402 - after the assertion rewriting is registered


@pytest.fixture(scope="session")
def webhook(tmp_path_factory) -> Webhook:
    webhook = Webhook(tmp_path_factory.mktemp("webhook"))
    yield webhook
    webhook.stop()


@pytest.fixture(scope="session")
def stack(webhook, tmp_path_factory) -> Stack:
    """The emulated cluster as most clusters are: the native PodGroup API (1.37, gated) not served."""
    stack = Stack(webhook, tmp_path_factory.mktemp("stack"))
    yield stack
    stack.close()
