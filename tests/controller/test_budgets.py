"""PodDisruptionBudgets as preemption reads them: whom each selects, how many it lets go."""

from gangkeeper.controller.cache.budgets import Budgets
from gangkeeper.controller.reading.budgets import budget_from_api
from tests.controller.builders import member, replace


def pdb(name, selector, allowed=None, namespace="team"):
    status = {} if allowed is None else {"disruptionsAllowed": allowed}
    return budget_from_api({"metadata": {"namespace": namespace, "name": name}, "spec": {"selector": selector},
                            "status": status})


def pod(name, namespace="team", **labels):
    return replace(member(name, namespace=namespace, gated=False, node_name="n1", phase="Running"), labels=labels)


def test_a_budget_selects_the_pods_of_its_namespace_its_selector_matches():
    web = pdb("web", {"matchLabels": {"app": "web"}}, allowed=1)
    assert web.selects(pod("a", app="web"))
    assert not web.selects(pod("b", app="batch"))
    assert not web.selects(pod("c", namespace="other", app="web"))


def test_an_empty_selector_selects_every_pod_of_the_namespace_and_none_selects_nothing():
    assert pdb("all", {}).selects(pod("a"))
    assert not pdb("none", None).selects(pod("a", app="web"))


def test_a_budget_not_counted_yet_allows_nothing():
    assert pdb("new", {}, allowed=None).allowed == 0
    assert pdb("counted", {}, allowed=2).allowed == 2


def test_budgets_follow_their_changes_and_list_those_covering_a_pod_by_name():
    budgets = Budgets()
    budgets.put("team/b", pdb("b", {}))
    budgets.put("team/a", pdb("a", {"matchLabels": {"app": "web"}}))
    budgets.put("other/c", pdb("c", {}, namespace="other"))
    assert [b.name for b in budgets.covering(pod("x", app="web"))] == ["a", "b"]
    budgets.put("team/b", None)
    assert [b.name for b in budgets.covering(pod("x", app="web"))] == ["a"]
    budgets.put("team/a", None)
    assert budgets.covering(pod("x", app="web")) == () and len(budgets) == 1
