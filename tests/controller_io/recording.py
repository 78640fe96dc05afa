"""The executor on a recording client: every call it makes, in order, answered as the test says.

Not an API server: the executor's tests look at which writes it sends, in which waves and how many
at once (a subclass holds calls at a barrier), so the client only records and answers.
"""

import json
from datetime import datetime, timezone

from gangkeeper.audit import AuditLog
from gangkeeper.controller.acting.executor import Executor
from gangkeeper.controller.deciding.decisions import Involved
from gangkeeper.controller.reading.kube import EVENTS, GANGS, PODS, AlreadyExists, NotFound

GROUP = ("team", "g")
GANG = Involved("gangkeeper.io/v1alpha1", "Gang", "g", "uid-g")


class RecordingKube:
    """Records every call; `refuse` maps (method, name) to the error to raise once."""

    def __init__(self):
        self.calls, self.refuse, self.events, self.gangs = [], {}, {}, set()
        self.versions: dict[str, str] = {}  # pods changed since the pass read them (else as `release` reads them)
        self.checked: list[str] = []  # the label selectors of the release checks

    def resource_versions(self, resource, namespace, label_selector):
        self.checked.append(label_selector)
        return {f"p{number}": "8" for number in range(10)} | self.versions

    def _call(self, method, resource, name, body=None):
        self.calls.append((method, resource.name, name, body))
        error = self.refuse.pop((method, name), None)
        if error is not None:
            raise error
        if resource is GANGS and method == "create":
            self.gangs.add(name)
        return {"metadata": {"name": name, "namespace": "team", "resourceVersion": "2", "uid": f"uid-{name}"}}

    def get(self, resource, namespace, name):
        if resource is GANGS and name not in self.gangs:
            raise NotFound(404, {"reason": "NotFound"})
        return self._call("get", resource, name)

    def patch(self, resource, namespace, name, body, patch_type=None, *, subresource=""):
        if resource is EVENTS:
            self.events[name]["count"] = body["count"]
        return self._call("patch" + (f"/{subresource}" if subresource else ""), resource, name, body)

    def patch_status(self, resource, namespace, name, body, patch_type=None):
        return self.patch(resource, namespace, name, body, patch_type, subresource="status")

    def create(self, resource, namespace, body):
        name = body["metadata"]["name"]
        if resource is EVENTS:
            if name in self.events:
                raise AlreadyExists(409, {"reason": "AlreadyExists"})
            self.events[name] = dict(body)
        return self._call("create", resource, name, body)

    def delete(self, resource, namespace, name, *, uid=None):
        return self._call("delete", resource, name, {"uid": uid})

    def evict(self, namespace, name, uid):
        return self._call("evict", PODS, name, {"uid": uid})


class Lines:
    def __init__(self):
        self.lines = []

    def write_line(self, line):
        self.lines.append(json.loads(line))


def executor(kube=None, dry_run=False):
    audit, written = Lines(), []
    clock = lambda: datetime(2027, 1, 15, tzinfo=timezone.utc)  # noqa: E731 - a fixed clock
    return Executor(kube, AuditLog("controller", audit), dry_run=dry_run, written=written.append,
                    clock=clock), audit, written
