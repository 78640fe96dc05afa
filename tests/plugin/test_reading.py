"""What the plugin reads with the user's credentials: nodes and every pod or no answer, in one
line naming the verb and the resource; anything else refused is read where it may be, and the
answer says what was not."""

import pytest

from gangkeeper.cli import CommandError
from gangkeeper.controller.reading import kube as api
from gangkeeper.plugin.reading import (
    PRIORITY_CLASSES,
    Denied,
    read_cluster,
    read_events,
    read_gangs,
    read_priority_classes,
)
from tests.plugin.fakekube import FakeKube
from tests.plugin.world import gang, node, waiting, why


def job(name, namespace, parallelism=2):
    return api.RESOURCES["jobs.batch"], {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
                                         "spec": {"parallelism": parallelism}}


def test_without_the_nodes_there_is_no_answer_and_the_line_says_what_to_ask_for():
    with pytest.raises(Denied) as refused:
        read_cluster(FakeKube([node("a")], forbidden={("list", "nodes", None)}), ["team"])
    assert str(refused.value) == ("cannot list nodes (forbidden): the plan needs to read every node; ask for get/list "
                                  "on nodes")


def test_without_every_namespaces_pods_there_is_no_answer():
    with pytest.raises(Denied) as refused:
        read_cluster(FakeKube([node("a")], forbidden={("list", "pods", None)}), ["team"])
    assert str(refused.value) == ("cannot list pods in all namespaces (forbidden): the plan needs every pod bound to "
                                  "a node, in every namespace; ask for get/list on pods in all namespaces")


def test_a_kind_refused_in_all_namespaces_is_read_where_a_role_allows_it_and_said_so():
    kube = FakeKube([node("a"), job("train", "team"), job("other", "elsewhere")],
                    forbidden={("list", "jobs.batch", None), ("list", "jobs.batch", "secret")})
    cluster = read_cluster(kube, ["team", "secret"])
    assert [key for key in cluster.workloads if key[0] == "jobs.batch"] == [("jobs.batch", "team", "train")]
    assert cluster.unread == ("jobs.batch in all namespaces (forbidden); read in team only",)


def test_a_cluster_wide_kind_refused_is_left_out_and_said_so_and_one_not_served_is_none():
    kube = FakeKube([node("a")], forbidden={("list", "persistentvolumes", None)},
                    unserved={"resourceslices.resource.k8s.io", "jobsets.jobset.x-k8s.io"})
    assert read_cluster(kube, ["team"]).unread == ("persistentvolumes (forbidden)",)


def test_events_refused_are_not_shown_and_said_so():
    assert read_events(FakeKube(forbidden={("list", "events", "team")}), "team", [("Gang", "train")]) == (
        [], "events in namespace team (forbidden)")
    answer = why([node("a"), *waiting("train", 1)], "train-0", events=None)
    assert answer["events"] is None


def test_top_reads_every_namespace_it_may_and_skips_the_others_saying_so():
    namespaces = [(api.NAMESPACES, {"metadata": {"name": name}}) for name in ("team", "secret")]
    gangs = [gang("a", "a", 1, namespace="team"), gang("b", "b", 1, namespace="secret")]
    kube = FakeKube([*namespaces, *gangs], forbidden={("list", "gangs.gangkeeper.io", None),
                                                      ("list", "gangs.gangkeeper.io", "secret")})
    found, skipped = read_gangs(kube, None)
    assert [g["metadata"]["name"] for g in found] == ["a"]
    assert skipped == ["secret (cannot list gangs.gangkeeper.io: forbidden)"]
    with pytest.raises(Denied, match=r"^cannot list namespaces \(forbidden\)"):
        read_gangs(FakeKube(gangs, forbidden={("list", "gangs.gangkeeper.io", None), ("list", "namespaces", None)}),
                   None)
    with pytest.raises(Denied, match=r"^cannot list gangs.gangkeeper.io in namespace secret \(forbidden\)"):
        read_gangs(kube, ["secret"])
    with pytest.raises(CommandError, match="gangkeeper is not installed"):
        read_gangs(FakeKube(unserved={"gangs.gangkeeper.io"}), None)


def test_priority_classes_are_listed_or_read_by_name():
    classes = [(PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value}) for name, value in (("high", 9),
                                                                                                    ("low", 1))]
    assert sorted(read_priority_classes(FakeKube(classes), {"high"})[0]) == ["high", "low"]
    named = FakeKube(classes, forbidden={("list", "priorityclasses.scheduling.k8s.io", None)})
    assert read_priority_classes(named, {"high"}) == (
        {"high": classes[0][1]}, "priorityclasses.scheduling.k8s.io (forbidden): a global default class was not "
                                 "looked for")
    refused = FakeKube(classes, forbidden={("list", "priorityclasses.scheduling.k8s.io", None),
                                           ("get", "priorityclasses.scheduling.k8s.io", None)})
    with pytest.raises(Denied, match=r"^cannot get priorityclasses.scheduling.k8s.io \(forbidden\): the pods name "
                                     r"PriorityClass high"):
        read_priority_classes(refused, {"high"})
