"""Markdown for bench/RESULTS.md: the fault campaign, high availability, the load run and complete → bound."""

from __future__ import annotations

from reliability import binding, chaos, ha, load


def _fmt(values: list[float]) -> str:
    if not values:
        return "–"
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.1f} s median, {ordered[-1]:.1f} s max"


def reliability_markdown(campaign: chaos.Result, failover: ha.Result) -> str:
    c = campaign.campaign
    faults = ", ".join(f"{what} {n}" for what, n in sorted(campaign.faults.items()))
    checker = campaign.checker
    lines = [
        "## Reliability: faults in the control loop and high availability",
        "",
        "`reliability/` (`gangkeeper bench reliability`), live cluster emulation, real `gangkeeper controller` "
        "processes over HTTP, authorized by deploy/'s RBAC (a request it refuses fails the run). Invariants "
        "(`sim/invariants.py`) checked on every change the API server "
        "commits: no node over-committed (bound + reserved requests ≤ allocatable, every resource and pod "
        "slots), no accelerator held by a group not fully running for longer than the bind timeout plus one "
        "resync period and a second (when the controller's time-driven decisions are due; time the controller "
        "was killed does not count; a pod being deleted, or on a deleted node, neither holds nor runs), no "
        "reservation counted twice (a pod bound off its reserved node, or more live reservations than the "
        "group's size), no member released before its group's size holds reservations nor bound before all of "
        "its group is placed (for a group placed from scratch: one that lost a placed member, to a deletion or "
        "with its node, waits for the replacement under the holding check).",
        "",
        f"**Fault campaign**: {c.jobs} PyTorchJobs (1–8 pods × 1–8 GPUs, 2–6 s of training, arrivals over "
        f"{c.replay_seconds:.0f} s, seed {c.seed}) on {c.nodes} × {c.gpus_per_node} GPUs; SIGKILL of the controller "
        f"every {c.kill_interval[0]:g}–{c.kill_interval[1]:g} s (restarted with its identity, so it takes its own "
        f"Lease back at once); {c.error_rate:.0%} of its API requests answered 500 or 429, {c.conflict_rate:.0%} "
        f"of its writes 409, watch streams cut after {c.cut_watch_after} events, 410 Gone to every watch for "
        f"{c.gone_for:g} s every {c.gone_every:g} s; every {c.disrupt_every:g} s in turn a running member, a "
        f"waiting member or a node under a running group deleted (the node's pods force-deleted as the pod GC "
        f"does, the node back 3 s later). Bind timeout {c.bind_timeout} s, resync {c.resync_seconds} s.",
        "",
        "| measure | result |",
        "|---|---|",
        f"| kills (SIGKILL) / survived (restarted and ready again) | {campaign.kills} / {campaign.kills_survived} |",
        f"| controller exits not caused by us / tracebacks in its log | {campaign.crashes} / {campaign.tracebacks} |",
        f"| restart to ready | {_fmt(campaign.restart_seconds)} |",
        f"| faults injected | {campaign.faults_injected} ({faults}) |",
        f"| jobs completed | {campaign.jobs_completed} / {c.jobs} in {campaign.seconds:.0f} s |",
        f"| API events checked | {checker.get('events', 0):,} |",
        f"| **invariant violations** | **{checker.get('violations', 0)}** {checker.get('by_kind') or ''} |",
        f"| longest time a group held GPUs while not fully running | {checker.get('longest_incomplete_holding_s')} s |",
        "",
    ]
    if campaign.violations:
        lines += ["Violations (first 10):", ""] + [f"- {v}" for v in campaign.violations[:10]] + [""]
    takeovers = ", ".join(f"{t:.1f} s" for t in failover.takeover_seconds)
    since_renewal = ", ".join(f"{t:.2f} s" for t in failover.since_renewal_seconds)
    within = all(t <= failover.lease_duration for t in failover.takeover_seconds)
    lines += [
        f"**High availability**: two controller replicas; the leader killed with SIGKILL {failover.failovers}× "
        "(then restarted as the follower). Takeover is measured from the kill, and from the killed leader's last "
        "renewal, to the Lease committed with the follower as holder; the lease duration is "
        f"{failover.lease_duration:g} s. The follower watches the Lease, so its countdown starts when a renewal "
        "is committed, and it tries again when that countdown ends: takeover follows the last renewal by the "
        "lease duration plus one read and one write. Webhook: gunicorn with 2 workers, one killed with SIGKILL "
        "while a pod is created every 50 ms.",
        "",
        "| measure | result |",
        "|---|---|",
        f"| takeover after the leader's SIGKILL | {takeovers} (lease {failover.lease_duration:g} s): "
        f"{'within' if within else '**not** within'} the lease duration |",
        f"| takeover after the killed leader's last renewal | {since_renewal} |",
        f"| decisions audited per replica | {failover.decisions} |",
        f"| audit: two replicas acting at once / acting while not leading | "
        f"{len(failover.overlaps)} {failover.overlaps[:3] or ''} |",
        f"| jobs completed across the failovers | {failover.jobs_completed} / {failover.jobs} |",
        f"| webhook worker killed: new worker started after | {failover.worker_replaced_seconds:.2f} s |",
        f"| admissions ok / failed (whole run) | {failover.admissions_ok} / {failover.admissions_failed} |",
        f"| admissions ok after the kill / failed after the new worker started | "
        f"{failover.admissions_after_kill_ok} / {failover.failures_after_replacement} |",
        "",
    ]
    if failover.failures:
        lines += ["Admission failures (the request in flight on the killed worker; the sim's API server, like "
                  "the real one, does not retry a webhook call that was sent):", ""]
        lines += [f"- `{f}`" for f in failover.failures] + [""]
    return "\n".join(lines)


def load_markdown(result: load.Result) -> str:
    s = load.summary(result)
    spec = result.load
    lines = [
        f"## Load: {spec.pods_per_minute:,} pods per minute for {spec.seconds / 60:g} min",
        "",
        f"`reliability/load.py` (`gangkeeper bench load`): groups of {spec.group_size} one-GPU pods "
        f"({spec.train_seconds:g} s of training once all run) created at a steady pace on {spec.nodes} × "
        f"{spec.gpus_per_node} GPUs, with the real webhook (gunicorn, 2 workers, TLS) and the real controller; "
        "finished pods deleted. Admission: the create call, until the pod is stored with its gate (the "
        "webhook is called over HTTPS inside it). Controller lag: group complete (last member stored, gated) "
        "→ last member's gate removed. RSS from /proc every "
        f"{spec.sample_seconds:g} s; a process levels off when its slope over the last half is ≤ "
        f"{load.LEVEL_SLOPE_MIB_PER_MIN} MiB/min or ≤ ¼ of its first-half slope.",
        "",
        "| measure | result |",
        "|---|---|",
        f"| pods created / refused / stored without the gate | {s['created']:,} / {s['refused']} / {s['ungated']} |",
        f"| achieved rate | {s['achieved_per_minute']:,} pods/min |",
        f"| admission p50 / p99 / max | {s['admission_ms']['p50']} / **{s['admission_ms']['p99']}** / "
        f"{s['admission_ms']['max']} ms |",
        f"| groups released / created | {s['groups_released']:,} / {s['groups']:,} |",
        f"| controller lag p50 / p99 / max | {s['lag_ms']['p50']} / **{s['lag_ms']['p99']}** / {s['lag_ms']['max']} ms |",
        "",
        "| process | RSS start → end (max) MiB | slope first half / last half MiB/min | levels off |",
        "|---|---|---|---|",
    ]
    for name, verdict in s["rss"].items():
        lines.append(f"| {name} | {verdict['start_mib']} → {verdict['end_mib']} ({verdict['max_mib']}) | "
                     f"{verdict['first_half_mib_per_min']} / {verdict['last_half_mib_per_min']} | "
                     f"{'yes' if verdict['levels_off'] else '**no**'} |")
    names = list(s["rss"])
    lines += ["", "Per minute (RSS at the end of the minute):", "",
              "| minute | pods | admission p99 ms | lag p99 ms | " + " | ".join(f"{n} MiB" for n in names) + " |",
              "|---" * (4 + len(names)) + "|"]
    for row in s["per_minute"]:
        lines.append(f"| {row['minute']} | {row['pods']} | {row['admission_p99_ms']} | {row['lag_p99_ms']} | "
                     + " | ".join(str(row["rss_mib"].get(n, "–")) for n in names) + " |")
    return "\n".join(lines) + "\n"


def binding_markdown(result: binding.Result) -> str:
    s = binding.summary(result)
    spec = result.spec
    sizes = " and ".join(str(size) for size in spec.sizes)
    lines = [
        f"## Complete → bound: groups of {sizes} members, gangkeeper against the bare scheduler",
        "",
        f"`reliability/binding.py` (`gangkeeper bench binding`), live cluster emulation, {spec.nodes} × "
        f"{spec.gpus_per_node} GPUs; groups of plain pods of {spec.gpus_per_pod} GPUs each in an explicit group "
        "(label and min count), created one after the other by the benchmark through the API server. "
        "**gangkeeper**: in the enforced namespace, gated by the real webhook (gunicorn, 2 workers, TLS), reserved "
        "and released by the real controller process over HTTP, bound by the emulated scheduler; **bare**: the same "
        "pods in a namespace the webhook's namespaceSelector skips, bound by the emulated scheduler as they come. "
        "Timed per group: from the return of its last member's create call (the group is complete) to the commit of "
        "its last member's binding (`spec.nodeName`), stamped by a watch callback on the API server's commits (no "
        "poll; 0 when that binding came before the last create returned). One group at a time: the previous one's "
        "pods deleted and gone (on the gangkeeper side its Gang deleted by the controller) and a "
        f"{spec.pause:g} s pause before the next is created; per size {spec.groups} groups of each side in pairs, "
        f"which side goes first in each pair drawn from seed {spec.seed}, after {spec.warmup} warm-up pair(s) not "
        "counted; the kubelets do not start the pods. The controller's own "
        f"`{binding.METRIC}` (from the pass that found the group complete to the pass that found it bound) is read "
        "from its /metrics around each gangkeeper group, as a cross-check. "
        f"p99 of fewer than 100 groups is their maximum. Run: {s['seconds']} s, load average at the end "
        f"{' / '.join(str(x) for x in s['load_average'] or ())}.",
        "",
        "| members | side | groups bound / run | complete → bound p50 / p99 / max ms | first create → last created p50 ms |",
        "|---|---|---|---|---|",
    ]
    for size, row in s["sizes"].items():
        for side in binding.SIDES:
            figures = row[side]
            ms = figures["ms"]
            lines.append(f"| {size} | {side} | {figures['all_bound']} / {figures['groups']} | {ms['p50']} / "
                         f"**{ms['p99']}** / {ms['max']} | {figures['create_ms']['p50']} |")
    lines += ["", "| members | gangkeeper − bare p50 ms | gangkeeper − bare p99 ms | goal (p99) | met |",
              "|---|---|---|---|---|"]
    for size, row in s["sizes"].items():
        goal = "–" if row["goal_ms"] is None else f"+{row['goal_ms']:g} ms"
        met = "–" if row["goal_met"] is None else "yes" if row["goal_met"] else "**no**"
        lines.append(f"| {size} | {row['difference_ms']['p50']:+} | **{row['difference_ms']['p99']:+}** | {goal} | "
                     f"{met} |")
    lines += ["", "Where gangkeeper's time goes (from the complete group, p50 / p99 ms: its first and its last "
              "member's reservation committed, its last gate removed, its last member bound), and the controller's "
              "own figure:", "",
              "| members | → first reserved | → last reserved | → last released | → last bound | controller's "
              "metric: groups, mean, p50 / p99 ms |",
              "|---|---|---|---|---|---|"]
    for size, row in s["sizes"].items():
        ours = row[binding.GANGKEEPER]
        metric = ours["controller_metric"]
        lines.append(f"| {size} | {ours['first_reserved_ms']['p50']} / {ours['first_reserved_ms']['p99']} | "
                     f"{ours['reserved_ms']['p50']} / {ours['reserved_ms']['p99']} | "
                     f"{ours['released_ms']['p50']} / {ours['released_ms']['p99']} | {ours['ms']['p50']} / "
                     f"{ours['ms']['p99']} | {metric['count']}, {metric['mean']}, {metric['p50']} / {metric['p99']} |")
    return "\n".join(lines) + "\n"
