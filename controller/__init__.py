"""The gangkeeper controller: reserves node capacity for whole groups, then releases them.

The planning core (`model`, `capacity`, `eligibility`, `planner`, `queue`) is pure: plain
dataclasses in, plain dataclasses out, no clock and no API client.
"""
