"""The gangkeeper controller: reserves node capacity for whole groups, then releases them.

Its rooms, each importing only the ones below it (setup.cfg's `controller-rooms` contract):
  - `cli`, `runner` (the loop, while `leader` says we lead), `metrics`, `health`: the process;
  - `acting`: the executor, which writes a pass's actions through the API;
  - `deciding`: one reconcile pass (`deciding.reconciler`), pure: what to write, never writing it;
  - `planning`: where a group's members go, which groups a pass admits, whom a group preempts;
  - `cache`: the cluster's state, kept one change at a time (capacity, occupancy, groups, index);
  - `checks`: the kube-scheduler's filters (eligibility, host ports, volumes, pod rules, devices);
  - `reading`: the API client, the informers, and the decoding of API objects into values;
  - `model`: the values the rest decides on, nothing else.
`model`, `checks` and `planning` are pure: plain values in, plain values out, no clock and no
API client.
"""
