"""The gangkeeper controller: reserves node capacity for whole groups, then releases them.

The planning core (`model`, `capacity`, `eligibility`, `planner`, `queue`) is pure: plain
dataclasses in, plain dataclasses out, no clock and no API client. `groups` and `index` turn what
the informers see into groups and capacity, one change at a time; `reconciler` decides a pass on
them (pure), `actions` writes it, `runner` drives the loop while `leader` says we lead.
"""
