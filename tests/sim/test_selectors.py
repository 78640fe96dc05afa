import pytest

from sim.api import APIError
from sim.kinds import Registry
from sim.selectors import matches, parse_fields, parse_labels

PODS = Registry().by_name("pods")


@pytest.mark.parametrize("selector, labels, expected", [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "c"}, False), ("a!=b", {}, True), ("a!=b", {"a": "b"}, False),
    ("a in (b,c)", {"a": "c"}, True), ("a notin (b,c)", {"a": "c"}, False), ("a notin (b)", {}, True),
    ("a", {"a": ""}, True), ("!a", {"a": "x"}, False), ("!a", {}, True), ("a,b=c", {"a": "1", "b": "c"}, True),
    ("gangkeeper.io/group=g1", {"gangkeeper.io/group": "g1"}, True), ("", {"x": "y"}, True),
])
def test_label_operators(selector, labels, expected):
    assert matches(parse_labels(selector), labels) is expected


@pytest.mark.parametrize("labels, expected", [
    ({"x": "8"}, True), ({"x": "5"}, False), ({"x": "0008"}, True), ({}, False),
    ({"x": "1_000"}, False), ({"x": "9223372036854775808"}, False), ({"x": "eight"}, False),
])
def test_gt_compares_labels_that_parse_as_int64(labels, expected):
    """Go's `strconv.ParseInt(value, 10, 64)` reads the label: no '_', nothing beyond int64."""
    assert matches(parse_labels("x>5"), labels) is expected


@pytest.mark.parametrize("selector, message", [
    ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a,", "found '', expected: identifier after ','"),
    ("=a", "found '=', expected: !, identifier, or 'end of string'"),
    ("x>abc", "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value "
              "must be an integer"),
    ("x<9223372036854775808", "unable to parse requirement: values[0]: Invalid value: \"9223372036854775808\": for "
                              "'Gt', 'Lt' operators, the value must be an integer"),
])
def test_malformed_label_selector_is_400_with_the_parser_message(selector, message):
    with pytest.raises(APIError) as refused:
        parse_labels(selector)
    assert (refused.value.code, refused.value.reason, refused.value.status["message"]) == (400, "BadRequest", message)


def test_field_selector_on_node_name_and_phase():
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert all(r.matches(pod) for r in parse_fields("spec.nodeName=n1,status.phase!=Pending", PODS))
    assert not all(r.matches(pod) for r in parse_fields("spec.nodeName==n2", PODS))
    assert all(r.matches(pod) for r in parse_fields("metadata.namespace=ns,metadata.name=p", PODS))


def test_unsupported_field_names_the_field():
    with pytest.raises(APIError) as refused:
        parse_fields("spec.priority=3", PODS)
    assert refused.value.code == 400
    assert refused.value.status["message"].endswith("field label not supported: spec.priority")
