"""Every workload kind gangkeeper gangs, one module each, in the order of the webhook's rules
(docs/design.md, "Group identity": first match wins).

Plain pods come first: the explicit group label is rule 1 and a lone accelerator pod rule 10,
both asked by gangkeeper.identity around the kinds whose pods carry a mark of their own. A
Gang's members are labelled explicitly, so the Gang has no rule and comes last. The webhook
takes the rules from here, the controller the resources it watches and how it sizes groups, and
tests/integrations holds deploy/'s RBAC to their verbs. docs/how-it-works.md, "Adding a workload kind",
says how to add one.
"""

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

ALL = (plain_pods.INTEGRATION, native_pod_group.INTEGRATION, scheduler_plugins.INTEGRATION, volcano.INTEGRATION,
       pytorchjob.INTEGRATION, trainjob.INTEGRATION, jobset.INTEGRATION, mpijob.INTEGRATION, rayjob.INTEGRATION,
       job.INTEGRATION, lws.INTEGRATION, raycluster.INTEGRATION, gang.INTEGRATION)

# The webhook's rules after the explicit label, in order.
RULES = tuple(integration.group_of for integration in ALL if integration.group_of is not None)
# How members are ranked, most specific kind first (a JobSet's pods also carry their Job's index).
RANKS = tuple(integration.rank for integration in ALL if integration.rank is not None)
# Where a pod may name its group, in the order of the rules.
GROUP_DECLARATIONS = tuple(key for integration in ALL for key in integration.names_group)
# What the controller lists and watches besides pods and nodes.
RESOURCES = tuple(integration.resource for integration in ALL if integration.resource is not None)
BY_SOURCE = {source: integration for integration in ALL for source in integration.sources}
# By `Resource.name`: the resource and what the controller reads off each of its objects (every
# kind with a resource has its declaration); the resource and the switch of the kinds with one.
DECLARATIONS = {integration.resource.name: (integration.resource, integration.declaration) for integration in ALL
                if integration.resource is not None and integration.declaration is not None}
SUSPENSIONS = {integration.resource.name: (integration.resource, integration.suspension) for integration in ALL
               if integration.resource is not None and integration.suspension is not None}
