"""Choosing what a group that does not fit preempts: whole groups and lone pods of lower priority."""

from gangkeeper.controller.cache.budgets import Budgets
from gangkeeper.controller.cache.holders import candidate, elastic_extras, holders
from gangkeeper.controller.cache.index import ClusterIndex
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.preemption import preempt
from gangkeeper.controller.reading.budgets import budget_from_api
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pod_facts
from tests.controller.builders import cluster, member, node, node_object, pod_object, replace

NODES = [node("n1"), node("n2")]


def running(name, node_name, gpus, priority, created="2025-01-01T00:00:00Z"):
    return member(name, gpus=gpus, gated=False, node_name=node_name, phase="Running", priority=priority,
                  created=created)


def waiting(name, size, gpus, priority, never=False):
    members = [replace(member(f"{name}-{i}", gpus=gpus, priority=priority), preempts=not never) for i in range(size)]
    return group_of(("team", name), members, size, 0.0)


def job(name, pods, priority, created="2025-01-01T00:00:00Z", min_count=None):
    """A running group: `pods` = [(node, gpus)], all of them its min count unless it says fewer."""
    members = [running(f"{name}-{i}", n, gpus, priority, created) for i, (n, gpus) in enumerate(pods)]
    return group_of(("team", name), members, len(members) if min_count is None else min_count, 0.0)


def chosen(outcome):
    return [victim.name for victim in outcome.victims]


def plan_for(preemptor, groups=(), lone=()):
    members = [m for group in groups for m in group.members] + list(lone)
    pool, ledger = cluster(NODES, [(m.node, m) for m in members])
    return preempt(preemptor, holders(list(groups), lone, ledger), pool, ledger), ledger


def test_a_high_priority_group_takes_a_lower_priority_group_that_fills_the_cluster_whole():
    low = job("low", [("n1", 8), ("n2", 4), ("n2", 4)], priority=10)
    outcome, _ = plan_for(waiting("high", 2, gpus=8, priority=1000), [low])
    assert chosen(outcome) == ["team/low"]
    assert sorted(node for _, node in outcome.plan.assignments) == ["n1", "n2"]


def test_of_two_lower_priority_groups_the_one_that_suffices_and_matters_least_is_taken():
    lower = job("lower", [("n1", 8)], priority=10)
    higher = job("higher", [("n2", 8)], priority=20)
    outcome, _ = plan_for(waiting("urgent", 1, gpus=8, priority=1000), [higher, lower])
    assert chosen(outcome) == ["team/lower"]
    assert outcome.plan.assignments[0][1] == "n1"


def test_between_equals_the_youngest_is_taken_the_least_work_lost():
    old = job("old", [("n1", 8)], priority=10, created="2025-01-01T00:00:00Z")
    young = job("young", [("n2", 8)], priority=10, created="2025-06-01T00:00:00Z")
    outcome, _ = plan_for(waiting("urgent", 1, gpus=8, priority=1000), [old, young])
    assert chosen(outcome) == ["team/young"]


def test_the_fewest_lone_pods_are_evicted_and_the_cheapest_as_the_scheduler_would():
    # The recorded case preemption-minimal-victims: a 4-GPU pod of priority 10 goes, two 2-GPU pods of 20 stay.
    lone = [running("low10-4gpu", "n1", 4, 10), running("low20-2gpu-a", "n1", 2, 20),
            running("low20-2gpu-b", "n1", 2, 20), running("n2-full", "n2", 8, 1000)]
    outcome, _ = plan_for(waiting("high", 1, gpus=4, priority=1000), lone=lone)
    assert chosen(outcome) == ["team/low10-4gpu"]


def test_only_as_many_lone_pods_as_needed_are_taken():
    lone = [running(f"small-{i}", "n1", 2, 10) for i in range(4)] + [running("n2-full", "n2", 8, 1000)]
    outcome, _ = plan_for(waiting("high", 1, gpus=4, priority=1000), lone=lone)
    assert len(outcome.victims) == 2


def test_one_large_group_is_taken_rather_than_several_small_pods_that_free_as_much():
    # n1: one 8-GPU group; n2: four 2-GPU lone pods, all of one priority. Both free 8 GPUs; the
    # group is one pod, so it is the cheaper victim, as the scheduler would find node against node.
    large = job("large", [("n1", 8)], priority=10)
    small = [running(f"small-{i}", "n2", 2, 10) for i in range(4)]
    outcome, _ = plan_for(waiting("urgent", 1, gpus=8, priority=1000), [large], lone=small)
    assert chosen(outcome) == ["team/large"]


def test_several_small_pods_of_lower_priority_go_before_one_large_group_of_higher():
    large = job("large", [("n1", 8)], priority=20)
    small = [running(f"small-{i}", "n2", 2, 10) for i in range(4)]
    outcome, _ = plan_for(waiting("urgent", 1, gpus=8, priority=1000), [large], lone=small)
    assert sorted(chosen(outcome)) == [f"team/small-{i}" for i in range(4)]


def test_equal_or_higher_priority_is_never_preempted():
    same = job("same", [("n1", 8), ("n2", 8)], priority=100)
    assert plan_for(waiting("peer", 1, gpus=8, priority=100), [same])[0] is None
    assert plan_for(waiting("lesser", 1, gpus=8, priority=10), [same])[0] is None


def test_a_group_whose_priority_class_says_never_preempts_nothing():
    low = job("low", [("n1", 8), ("n2", 8)], priority=10)
    assert plan_for(waiting("polite", 1, gpus=8, priority=1000, never=True), [low])[0] is None


def test_nothing_is_taken_when_even_every_candidate_is_not_enough():
    low = job("low", [("n1", 8)], priority=10)
    lone = [running("important", "n2", 8, 5000)]
    assert plan_for(waiting("huge", 2, gpus=8, priority=1000), [low], lone)[0] is None


def test_choosing_leaves_the_ledger_as_it_was():
    low = job("low", [("n1", 8), ("n2", 8)], priority=10)
    _, ledger = plan_for(waiting("high", 2, gpus=8, priority=1000), [low])
    assert ledger.free("n1")["nvidia.com/gpu"] == 0 and ledger.free("n2")["nvidia.com/gpu"] == 0


def test_a_candidate_is_what_holds_capacity_and_counts_its_accelerators():
    _, ledger = cluster(NODES)
    finished = member("done", gpus=8, gated=False, node_name="n1", phase="Succeeded", priority=1)
    gated = member("gated", gpus=8, priority=1)
    assert candidate(("team", "g"), [finished, gated], ledger) is None
    held = candidate(("team", "g"), [running("a", "n1", 4, 1), finished], ledger)
    assert (held.accelerators, len(held.members)) == (4, 1)


def test_work_already_on_its_way_out_is_no_candidate():
    _, ledger = cluster(NODES)
    going = replace(running("going", "n1", 8, 1), terminating=True)
    assert candidate(("team", "g"), [going], ledger) is None
    half = candidate(("team", "h"), [going, running("staying", "n2", 8, 1)], ledger)
    assert [m.name for m in half.members] == ["staying"]


def test_node_agents_without_accelerators_do_not_crowd_out_the_work_that_holds_them():
    agents = [member(f"agent-{n}-{i}", gpus=0, cpu="10m", memory="16Mi", gated=False, node_name=n, phase="Running",
                     priority=0) for n in ("n1", "n2") for i in range(40)]
    low = job("low", [("n1", 8), ("n2", 8)], priority=10)
    outcome, _ = plan_for(waiting("high", 1, gpus=8, priority=1000), [low], agents)
    assert chosen(outcome) == ["team/low"]


# --- PodDisruptionBudgets: the Eviction API refuses what they protect ---------------------------

def budget(name, allowed, selector=None):
    return budget_from_api({"metadata": {"namespace": "team", "name": name},
                            "spec": {"selector": {"matchLabels": {"app": name}} if selector is None else selector},
                            "status": {"disruptionsAllowed": allowed}})


def labelled(name, node_name, gpus, priority, app):
    return replace(running(name, node_name, gpus, priority), labels={"app": app})


def plan_with_budgets(preemptor, lone, *found):
    pool, ledger = cluster(NODES, [(m.node, m) for m in lone])
    budgets = Budgets()
    for b in found:
        budgets.put(b.key, b)
    return preempt(preemptor, holders([], lone, ledger, budgets), pool, ledger)


def test_a_lone_pod_a_budget_protects_is_spared_where_another_choice_exists():
    # The protected pod is the cheaper victim (lower priority); the unprotected one is taken instead.
    lone = [labelled("web", "n1", 8, 5, app="web"), labelled("batch", "n2", 8, 10, app="batch")]
    outcome = plan_with_budgets(waiting("high", 1, gpus=8, priority=1000), lone, budget("web", allowed=0))
    assert chosen(outcome) == ["team/batch"]


def test_a_budget_that_allows_a_disruption_lets_its_pod_be_taken():
    lone = [labelled("web", "n1", 8, 5, app="web"), labelled("batch", "n2", 8, 10, app="batch")]
    outcome = plan_with_budgets(waiting("high", 1, gpus=8, priority=1000), lone, budget("web", allowed=1))
    assert chosen(outcome) == ["team/web"]


def test_nothing_is_preempted_when_only_protected_pods_would_make_room():
    lone = [labelled(f"web-{i}", f"n{i + 1}", 8, 5, app="web") for i in range(2)]
    assert plan_with_budgets(waiting("high", 1, gpus=8, priority=1000), lone, budget("web", allowed=0)) is None


def test_of_the_pods_one_budget_selects_only_as_many_as_it_allows_are_taken():
    lone = [labelled(f"web-{i}", "n1", 4, 5, app="web") for i in range(2)]
    lone += [labelled(f"batch-{i}", "n2", 4, 10, app="batch") for i in range(2)]
    outcome = plan_with_budgets(waiting("high", 2, gpus=4, priority=1000), lone, budget("web", allowed=1))
    taken = chosen(outcome)
    assert len(taken) == 2 and sum(name.startswith("team/web") for name in taken) <= 1


def test_a_pod_two_budgets_select_is_no_candidate():
    lone = [labelled("web", "n1", 8, 5, app="web"), labelled("batch", "n2", 8, 10, app="batch")]
    everything = budget("all", allowed=5, selector={})
    outcome = plan_with_budgets(waiting("high", 1, gpus=8, priority=1000), lone, budget("web", allowed=5), everything)
    assert chosen(outcome) == ["team/batch"], "the Eviction API refuses a pod more than one budget selects"


# --- the index: candidates below a priority --------------------------------------------------

def lone_pods_index(*priorities):
    facts = [pod_facts(pod_object(f"p{i}-{priority}", gpus=8, gated=False, node_name="n1", phase="Running",
                                  priority=priority)) for i, priority in enumerate(priorities)]
    return ClusterIndex.build(facts, {}, [node_from_api(node_object("n1"))])


def test_the_index_gives_only_the_work_below_the_priority_asked_and_nothing_at_once_when_none_is():
    index = lone_pods_index(5, 50)
    assert [c.priority for c in index.preemption_candidates(50)] == [5]
    assert sorted(c.priority for c in index.preemption_candidates()) == [5, 50]
    assert index.preemption_candidates(5) == []
    index.put_pod("team/p0-5", None)  # the only pod below 50 is gone
    assert index.preemption_candidates(50) == []


# --- elastic extras: members of a running group beyond its min count ----------------------------

def ranked(member, index):
    """A member at `index` in its group's order (as a PyTorchJob's worker index ranks it)."""
    return replace(member, rank=(0, "", 1, index))


def test_the_extras_of_a_running_group_are_its_last_members_bound_beyond_its_min_count():
    members = [ranked(running(f"w-{i}", "n1", 1, 10), i) for i in (0, 1, 2, 10)]
    reserved = ranked(member("w-11", gpus=1, reserved_node="n2", priority=10), 11)
    group = group_of(("team", "w"), [*members, reserved], 3, 0.0)
    assert [m.name for m in elastic_extras(group)] == ["w-10", "w-2"], "by its order, not by name; a reservation stays"
    assert elastic_extras(replace(group, min_count=5)) == [] and elastic_extras(replace(group, min_count=0)) == []


def test_a_group_that_does_not_fit_takes_elastic_extras_rather_than_a_whole_group_of_lower_priority():
    elastic = job("elastic", [("n1", 4), ("n1", 4), ("n2", 4), ("n2", 4)], priority=20, min_count=2)
    outcome, _ = plan_for(waiting("urgent", 1, gpus=8, priority=1000), [elastic])
    assert all(victim.extra for victim in outcome.victims)
    assert sorted(m.name for v in outcome.victims for m in v.members) == ["elastic-2", "elastic-3"]


def test_extras_go_before_a_whole_group_even_of_lower_priority():
    whole = job("whole", [("n1", 8)], priority=10)
    elastic = job("elastic", [("n2", 4), ("n2", 4)], priority=20, min_count=1)
    outcome, _ = plan_for(waiting("urgent", 1, gpus=4, priority=1000), [whole, elastic])
    assert chosen(outcome) == ["team/elastic-1 (beyond the min count of elastic)"]


def test_a_group_taken_whole_takes_its_extras_with_it():
    elastic = job("elastic", [("n1", 4), ("n1", 4), ("n2", 4), ("n2", 4)], priority=20, min_count=3)
    outcome, _ = plan_for(waiting("urgent", 2, gpus=8, priority=1000), [elastic])
    assert sorted(m.name for v in outcome.victims for m in v.members) == [f"elastic-{i}" for i in range(4)]
    assert [v.extra for v in outcome.victims].count(False) == 1
