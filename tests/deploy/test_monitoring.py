"""deploy/components/monitoring: an optional component on deploy/default that adds a Service for
the controller's metrics, ServiceMonitors, PrometheusRules and the Grafana dashboard.

Built-in objects are validated against the Kubernetes schemas as everywhere else. The
prometheus-operator's kinds have no schema here: they are checked against the part of their CRDs'
schemas (monitoring.coreos.com/v1) that the component uses, with unknown fields refused, and
every PromQL expression (alerts, dashboard) must name only metrics the code exports, with the
suffixes their types give them (`_total`, `_bucket`/`_sum`/`_count`) and labels they have.
"""

import json
import re

import jsonschema
import kubernetes_validate
import pytest
from prometheus_client.metrics import MetricWrapperBase

from gangkeeper.controller.metrics import Metrics
from gangkeeper.webhook import metrics as webhook_metrics
from tests.deploy.rendered_manifests import REPO, find, render_with

KUBERNETES_VERSION = "1.33"  # as test_deploy_schemas
COMPONENT = REPO / "deploy/components/monitoring"
DASHBOARD = COMPONENT / "dashboards/gangkeeper.json"
MONITORING = "monitoring.coreos.com/v1"
ADDED = {("Service", "gangkeeper-controller-metrics"), ("ServiceMonitor", "gangkeeper-controller"),
         ("ServiceMonitor", "gangkeeper-webhook"), ("PrometheusRule", "gangkeeper"),
         ("ConfigMap", "gangkeeper-dashboard")}


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> list[dict]:
    """deploy/default with the component, as docs/operations.md tells an overlay to include it."""
    return render_with(tmp_path_factory.mktemp("overlay"), "deploy/default", "deploy/components/monitoring")


@pytest.fixture(scope="module")
def added(monitored) -> list[dict]:
    return [o for o in monitored if (o["kind"], o["metadata"]["name"]) in ADDED]


# --- the component -------------------------------------------------------------------------

def test_the_component_adds_its_objects_and_changes_nothing_else(default, monitored):
    assert not [o for o in default if o["apiVersion"] == MONITORING], "optional: deploy/default has none"
    assert [o for o in monitored if (o["kind"], o["metadata"]["name"]) not in ADDED] == default
    assert {(o["kind"], o["metadata"]["name"]) for o in monitored} - {(o["kind"], o["metadata"]["name"])
                                                                      for o in default} == ADDED
    for obj in monitored:
        if (obj["kind"], obj["metadata"]["name"]) in ADDED:
            assert obj["metadata"]["namespace"] == "gangkeeper"
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gangkeeper"


def test_its_built_in_objects_are_valid(added):
    for obj in added:
        if obj["apiVersion"] != MONITORING:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
LABEL_SELECTOR = {"type": "object", "additionalProperties": False, "properties": {
    "matchLabels": STRINGS, "matchExpressions": {"type": "array"}}}
SECRET_KEY = {"type": "object", "additionalProperties": False, "required": ["key"],
              "properties": {"name": {"type": "string"}, "key": {"type": "string"}, "optional": {"type": "boolean"}}}
OBJECT = {"apiVersion": {"const": MONITORING}, "kind": {"type": "string"}, "metadata": {
    "type": "object", "required": ["name", "namespace"]}}
# The fields of monitoring.coreos.com/v1 the component uses, as the operator's CRDs define them.
SCHEMAS = {
    "ServiceMonitor": {"type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "spec"],
                       "properties": {**OBJECT, "spec": {
        "type": "object", "additionalProperties": False, "required": ["selector", "endpoints"], "properties": {
            "selector": LABEL_SELECTOR, "jobLabel": {"type": "string"},
            "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "required": ["port"], "properties": {
                    "port": {"type": "string"}, "path": {"type": "string"},
                    "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                    "interval": {"type": "string", "pattern": DURATION},
                    "scrapeTimeout": {"type": "string", "pattern": DURATION},
                    "honorLabels": {"type": "boolean"},
                    "tlsConfig": {"type": "object", "additionalProperties": False, "properties": {
                        "serverName": {"type": "string"}, "insecureSkipVerify": {"type": "boolean"},
                        "ca": {"type": "object", "additionalProperties": False, "properties": {
                            "secret": SECRET_KEY, "configMap": SECRET_KEY}}}}}}}}}}},
    "PrometheusRule": {"type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "spec"],
                       "properties": {**OBJECT, "spec": {
        "type": "object", "additionalProperties": False, "properties": {"groups": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name"], "properties": {
                "name": {"type": "string", "minLength": 1}, "interval": {"type": "string", "pattern": DURATION},
                "rules": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False, "required": ["expr"], "properties": {
                        "alert": {"type": "string"}, "record": {"type": "string"},
                        "expr": {"type": ["string", "integer"]}, "for": {"type": "string", "pattern": DURATION},
                        "keep_firing_for": {"type": "string", "pattern": DURATION},
                        "labels": STRINGS, "annotations": STRINGS}}}}}}}}}},
}


def test_service_monitors_and_rules_match_the_operators_schemas(added):
    custom = [o for o in added if o["apiVersion"] == MONITORING]
    assert {o["kind"] for o in custom} == set(SCHEMAS)
    for obj in custom:
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}"
                  for e in jsonschema.Draft202012Validator(SCHEMAS[obj["kind"]]).iter_errors(obj)]
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: {errors}"


def test_the_schemas_refuse_a_misplaced_field(added):
    monitor = find(added, "ServiceMonitor", "gangkeeper-controller")
    broken = {**monitor, "spec": {**monitor["spec"], "port": "metrics"}}
    assert list(jsonschema.Draft202012Validator(SCHEMAS["ServiceMonitor"]).iter_errors(broken))


def test_the_metrics_service_reaches_every_controller_replica(monitored):
    service = find(monitored, "Service", "gangkeeper-controller-metrics")
    pods = find(monitored, "Deployment", "gangkeeper-controller")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pods["metadata"]["labels"].items()
    (container,) = pods["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports and port["port"] == ports[port["targetPort"]] == 8080
    assert service["spec"]["publishNotReadyAddresses"], "a replica whose caches never sync is scraped too"
    webhook_pods = find(monitored, "Deployment", "gangkeeper-webhook")["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= webhook_pods.items()


def test_each_service_monitor_selects_one_service_and_names_its_port(monitored):
    services = [o for o in monitored if o["kind"] == "Service"]
    for monitor in (o for o in monitored if o["kind"] == "ServiceMonitor"):
        spec = monitor["spec"]
        (selected,) = [s for s in services if s["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
                       and spec["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        for endpoint in spec["endpoints"]:
            assert endpoint["port"] in {port["name"] for port in selected["spec"]["ports"]}, monitor["metadata"]


def test_the_controller_monitor_keeps_the_metrics_namespace_label(monitored):
    """Prometheus gives each target a `namespace` label (gangkeeper's); the metrics' own, the groups'
    namespace, would be renamed exported_namespace unless the scrape honours it."""
    assert any("namespace" in labels for labels, _ in exported_families("controller").values())
    (endpoint,) = find(monitored, "ServiceMonitor", "gangkeeper-controller")["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True


def test_the_webhook_monitor_trusts_the_ca_of_the_webhooks_secret_under_its_service_name(monitored):
    (endpoint,) = find(monitored, "ServiceMonitor", "gangkeeper-webhook")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    webhook = find(monitored, "Deployment", "gangkeeper-webhook")["spec"]["template"]["spec"]
    secrets = {volume["secret"]["secretName"] for volume in webhook["volumes"] if "secret" in volume}
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": "gangkeeper-webhook-tls", "key": "ca.crt"}
    assert "gangkeeper-webhook-tls" in secrets
    service = find(monitored, "Service", "gangkeeper-webhook")["metadata"]
    assert endpoint["tlsConfig"]["serverName"] == f"{service['name']}.{service['namespace']}.svc"


def test_the_dashboard_config_map_is_the_dashboard_file(monitored):
    config_map = find(monitored, "ConfigMap", "gangkeeper-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1", "Grafana's sidecar picks it up"
    assert json.loads(config_map["data"]["gangkeeper.json"]) == json.loads(DASHBOARD.read_text())


# --- PromQL names only what the code exports -------------------------------------------------

SERIES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
          "summary": ("", "_sum", "_count")}


def exported_families(which: str = "all") -> dict[str, tuple[tuple[str, ...], str]]:
    """Every metric family the code registers: name -> (label names, type)."""
    found = []
    if which in ("all", "controller"):
        found += [m for m in vars(Metrics()).values() if isinstance(m, MetricWrapperBase)]
    if which in ("all", "webhook"):
        found += [m for m in vars(webhook_metrics).values() if isinstance(m, MetricWrapperBase)]
    return {m._name: (tuple(m._labelnames), m._type) for m in found}


def exported_series() -> dict[str, set[str]]:
    """Every series name a query may use -> the labels it has."""
    series = {}
    for family, (labels, kind) in exported_families().items():
        for suffix in SERIES[kind]:
            series[family + suffix] = set(labels) | ({"le"} if suffix == "_bucket" else set())
    return series


KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "inf", "nan"}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}")


def promql(expr: str) -> str:
    """A Grafana query as Prometheus gets it: its variables replaced."""
    return expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$namespace", ".*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    aggregations, keywords, labels (in braces or grouping clauses), durations or numbers."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = GROUPING.sub(" ", text)
    text = re.sub(r"\boffset\s+-?\w+", " ", text)
    text = re.sub(r"(?<![\w:])\d[\w.]*", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        if match.group() not in KEYWORDS and not text[match.end():].lstrip().startswith("("):
            names.add(match.group())
    return names


def labels_used(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """The label names each selector matches on, and those grouping clauses name."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    matched = {}
    for name, matchers in SELECTOR.findall(text):
        matched.setdefault(name, set()).update(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    grouped = {label.strip() for _, labels in GROUPING.findall(text) for label in labels.split(",") if label.strip()}
    return matched, grouped


def problems(expr: str) -> list[str]:
    """What in `expr` the code does not export: unknown series, labels they do not have."""
    series, expr = exported_series(), promql(expr)
    names = metric_names(expr)
    found = [f"names no metric: {expr}"] if not names else []
    found += [f"{name} is not exported" for name in sorted(names - series.keys())]
    matched, grouped = labels_used(expr)
    for name, labels in matched.items():
        found += [f"{name} has no label {label}" for label in sorted(labels - series.get(name, labels))]
    known = set().union(*(series.get(name, set()) for name in names))
    found += [f"no metric of {sorted(names)} has label {label}" for label in sorted(grouped - known)]
    return found


def test_the_check_finds_unknown_metrics_wrong_suffixes_and_labels():
    assert metric_names('histogram_quantile(0.9, sum by (le) (rate(a_bucket{x=~"$v"}[5m]))) > 1e3 or vector(0)') \
        == {"a_bucket"}
    assert metric_names("max(a) / on (pod) group_left() b offset 5m") == {"a", "b"}
    assert problems("sum(rate(gangkeeper_rollbacks_total[5m]))") == []
    assert problems("sum(rate(gangkeeper_rollbacks[5m]))") == ["gangkeeper_rollbacks is not exported"]
    assert problems("gangkeeper_group_wait_seconds > 1") == ["gangkeeper_group_wait_seconds is not exported"]
    assert problems('gangkeeper_groups{phases="Waiting"}') == ["gangkeeper_groups has no label phases"]
    assert problems("sum by (pod) (gangkeeper_groups)") == ["no metric of ['gangkeeper_groups'] has label pod"]
    assert problems("vector(1)") == ["names no metric: vector(1)"]


def rules(monitored) -> list[dict]:
    return [rule for group in find(monitored, "PrometheusRule", "gangkeeper")["spec"]["groups"]
            for rule in group["rules"]]


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ())]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(metric, label): Grafana's, not PromQL
            metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", variable["definition"]).groups()
            queries.append(f"count by ({label}) ({metric})")
    return queries


def test_every_alert_names_only_exported_metrics_and_says_how_bad_and_why(monitored):
    alerts = rules(monitored)
    assert {rule["alert"] for rule in alerts} >= {"GangkeeperGroupWaitingTooLong", "GangkeeperRollbacks",
                                                  "GangkeeperNoLeader"}
    assert len({rule["alert"] for rule in alerts}) == len(alerts)
    for rule in alerts:
        assert problems(rule["expr"]) == [], rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_every_dashboard_query_names_only_exported_metrics():
    queries = dashboard_queries()
    assert queries
    assert [(query, found) for query in queries if (found := problems(query))] == []


def test_the_dashboard_shows_every_controller_metric():
    shown = set().union(*(metric_names(promql(query)) for query in dashboard_queries()))
    for family, (_, kind) in exported_families().items():
        assert any(family + suffix in shown for suffix in SERIES[kind]), f"{family} is on no panel"


def test_the_dashboard_is_one_grafana_can_import():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "gangkeeper" and dashboard["schemaVersion"] >= 36
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert {"x", "y", "w", "h"} <= panel["gridPos"].keys() and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel.get("targets", ()):
            assert target["refId"] and target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert set(re.findall(r"\$(\w+)", target["expr"])) - {"__rate_interval", "__interval"} <= variables


def test_every_expression_parses_as_promql(monitored):
    """With a PromQL parser installed (promql-parser, not a dependency): the syntax, too."""
    parser = pytest.importorskip("promql_parser")
    for expr in [rule["expr"] for rule in rules(monitored)] + dashboard_queries():
        parser.parse(promql(expr))
