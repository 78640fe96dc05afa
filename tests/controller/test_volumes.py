from gangkeeper.controller.checks.volumes import NO_LIMIT, Volumes
from tests.controller.builders import node


def claim(volume=None):
    return {"spec": {"volumeName": volume} if volume else {}}


def volume(zone=None):
    if zone is None:
        return {"spec": {}}
    return {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}}}


def volumes(**claims):
    known = Volumes()
    for name, (bound_to, zone) in claims.items():
        known.put_claim(f"team/{name}", claim(bound_to))
        if bound_to:
            known.put_volume(bound_to, volume(zone))
    return known


def test_a_bound_volume_with_node_affinity_allows_only_the_nodes_it_matches():
    limit = volumes(data=("pv-a", "a")).limit("team", ["data"])
    assert limit.allows(node("n1", zone="a"))
    assert not limit.allows(node("n2", zone="b"))
    assert not limit.allows(node("n3"))


def test_every_volume_must_match_the_same_node():
    limit = volumes(data=("pv-a", "a"), scratch=("pv-b", "b")).limit("team", ["data", "scratch"])
    assert not limit.allows(node("n1", zone="a"))
    assert not limit.allows(node("n2", zone="b"))


def test_volumes_without_node_affinity_and_unbound_claims_restrict_nothing():
    known = volumes(data=("pv-any", None), pending=(None, None))
    assert known.limit("team", ["data", "pending"]) is NO_LIMIT
    assert known.limit("team", []) is NO_LIMIT


def test_a_claim_that_does_not_exist_keeps_the_member_off_every_node_and_says_which():
    limit = volumes(data=("pv-a", "a")).limit("team", ["data", "typo"])
    assert limit.missing == 'persistentvolumeclaim "typo" not found'
    assert not limit.allows(node("n1", zone="a"))


def test_claims_are_looked_up_in_the_members_namespace():
    assert volumes(data=("pv-a", "a")).limit("other", ["data"]).missing is not None


def test_a_claim_bound_later_and_a_volume_deleted_count_at_once():
    known = volumes(data=(None, None))
    known.put_claim("team/data", claim("pv-a"))
    known.put_volume("pv-a", volume("a"))
    assert not known.limit("team", ["data"]).allows(node("n2", zone="b"))
    known.put_volume("pv-a", None)
    assert known.limit("team", ["data"]) is NO_LIMIT
    known.put_claim("team/data", None)
    assert known.limit("team", ["data"]).missing is not None
