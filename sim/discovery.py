"""Discovery documents (/api, /apis, /apis/G/V, /version) built from the kind registry."""

from sim.kinds import Kind, Registry

VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.2-gangkeeper-sim", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "binding": ["create"], "eviction": ["create"]}
# Subresources whose object is not the parent's kind; one of another group names its group and version.
_SUBRESOURCE_KINDS = {"binding": {"kind": "Binding"},
                      "eviction": {"group": "policy", "version": "v1", "kind": "Eviction"}}


def api_versions(server_address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(group: str, kinds: list[Kind]) -> dict:
    versions = []
    for version in dict.fromkeys(k.version for k in kinds):
        versions.append({"groupVersion": f"{group}/{version}", "version": version})
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def api_group_list(registry: Registry) -> dict:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(g, kinds) for g, kinds in registry.groups().items()]}


def api_group(registry: Registry, group: str) -> dict | None:
    kinds = registry.groups().get(group)
    return None if kinds is None else dict(_group(group, kinds), kind="APIGroup", apiVersion="v1")


def resource_list(registry: Registry, group: str, version: str) -> dict | None:
    kinds = [k for k in registry.kinds if k.group == group and k.version == version]
    if not kinds:
        return None
    resources = []
    for k in kinds:
        verbs = ["create"] if k.plural == "bindings" else _VERBS
        resources.append({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                          "verbs": verbs, **({"shortNames": list(k.short_names)} if k.short_names else {})})
        for sub in k.subresources:
            resources.append({"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                              **_SUBRESOURCE_KINDS.get(sub, {"kind": k.kind}), "verbs": _SUBRESOURCE_VERBS[sub]})
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
