"""The values the controller decides on: nodes, members and groups, their selectors and rules, and
what the cache keeps of each API object. Only what placement and the pass read.

The cache may hold 50,000 pods, so these are slotted, frozen dataclasses built once from the
raw API objects (`controller.reading`); everything else in a pod or node (env, volumes, status
details) is dropped. Constraints are stored as tuples of frozen values so that identical members
hash alike: the planner groups them and the node pool remembers eligibility per constraint set.
Nothing here reads the API or imports another room of the controller.
"""
