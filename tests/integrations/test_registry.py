"""The registry: every kind once, in rule order, and each description consistent with itself."""

from gangkeeper import integrations, names
from gangkeeper.integrations import (
    gang,
    job,
    jobset,
    lws,
    mpijob,
    native_pod_group,
    plain_pods,
    pytorchjob,
    raycluster,
    rayjob,
    scheduler_plugins,
    trainjob,
    volcano,
)

SOURCES = {value for key, value in vars(names).items() if key.startswith("SOURCE_")}


def test_the_rules_are_asked_in_the_designs_order():
    assert integrations.RULES == (native_pod_group.group_of, scheduler_plugins.group_of, volcano.group_of,
                                  pytorchjob.group_of, trainjob.group_of, jobset.group_of, mpijob.group_of,
                                  rayjob.group_of, job.group_of, lws.group_of, raycluster.group_of)
    assert integrations.ALL[0] is plain_pods.INTEGRATION and integrations.ALL[-1] is gang.INTEGRATION


def test_every_group_source_belongs_to_exactly_one_kind():
    sources = [source for integration in integrations.ALL for source in integration.sources]
    assert sorted(sources) == sorted(SOURCES)
    assert set(integrations.BY_SOURCE) == SOURCES


def test_each_resource_is_defined_once_and_found_by_its_name():
    resources = integrations.RESOURCES
    assert len({resource.name for resource in resources}) == len(resources) == 12
    assert all(integrations.DECLARATIONS[resource.name][0] is resource for resource in resources)
    assert all(integrations.SUSPENSIONS[integration.resource.name] == (integration.resource, integration.suspension)
               for integration in integrations.ALL if integration.suspension is not None)


def test_a_kind_that_finds_a_declaring_object_has_one_and_reads_it():
    for integration in integrations.ALL:
        if integration.declarer is not None or integration.owns_pods:
            assert integration.resource is not None and integration.declarer is not None
        assert (integration.resource is None) == (integration.declaration is None)
        assert integration.part_label is None or integration.owns_pods
        assert set(integration.kept_labels) >= {integration.part_label} - {None}


def test_only_owners_with_a_switch_can_be_suspended():
    suspendable = {integration.resource.kind for integration in integrations.ALL if integration.suspension}
    assert suspendable == {"Job", "JobSet", "PyTorchJob", "TrainJob", "RayCluster", "RayJob", "MPIJob"}


def test_where_a_pod_names_its_group_comes_from_the_kinds_in_the_order_of_their_rules():
    assert integrations.GROUP_DECLARATIONS == (
        ("labels", names.GROUP_LABEL), ("labels", names.NATIVE_POD_GROUP_LABEL),
        ("labels", names.PLUGINS_POD_GROUP_LABEL), ("annotations", names.VOLCANO_GROUP_ANNOTATION))


def test_members_are_ranked_by_the_most_specific_kind_first():
    assert integrations.RANKS == (pytorchjob.rank, jobset.rank, job.rank)
