"""The demo's measurements, on plain pods: stranded GPU-seconds (held while a member has no
node) are told apart from starting ones (every member has a node, containers not all up)."""

from demo.observe import Observer
from gangkeeper import names
from tests import builders

JOB = "train-a"


def pod(name: str, *, node: str = "", phase: str = "Pending", gated: bool = False, reserved: bool = False) -> dict:
    """`reserved`: released by the controller to its node (a gated member is reserved on its Gang: `booking`)."""
    return builders.pod(name, uid=f"uid-{name}", labels={names.KUBEFLOW_JOB_NAME_LABEL: JOB},
                        annotations={names.RELEASED_AT_ANNOTATION: "2027-01-01T00:00:00.000000Z"} if reserved else None,
                        containers=[builders.container("pytorch", requests={builders.GPU: "1"})], node_name=node,
                        gates=(names.SCHEDULING_GATE,) if gated else (), phase=phase)


def test_a_job_holding_gpus_while_a_member_is_unplaced_accrues_stranded_gpu_seconds():
    observer = Observer({JOB: 2}, capacity=8, start=0.0)
    observer.observe(pod("a-0", node="n1", phase="Running"), False, 0.0)
    observer.observe(pod("a-1"), False, 0.0)
    job = observer.snapshot(10.0).jobs[0]
    assert (job.held_gpus, job.pending, job.stranded_gpu_seconds, job.starting_gpu_seconds) == (1, 1, 10.0, 0.0)
    assert job.started is None


def booking(*members: str) -> dict:
    """The job's Gang, its reservations naming `members`."""
    return {"metadata": {"name": JOB, "namespace": "ml"},
            "status": {"reservations": {name: {"uid": f"uid-{name}", "node": "n1"} for name in members}}}


def test_a_job_whose_members_all_have_nodes_only_accrues_starting_gpu_seconds_then_trains():
    observer = Observer({JOB: 2}, capacity=8, start=0.0)
    for name in ("a-0", "a-1"):
        observer.observe(pod(name, gated=True), False, 0.0)
    observer.observe_gang(booking("a-0", "a-1"), False, 0.0)
    observer.observe(pod("a-0", node="n1", reserved=True), False, 1.0)  # released and bound; a-1 still gated
    observer.observe(pod("a-1", node="n1", reserved=True), False, 1.5)
    observer.observe(pod("a-0", node="n1", phase="Running", reserved=True), False, 3.0)
    observer.observe(pod("a-1", node="n1", phase="Running", reserved=True), False, 3.0)
    job = observer.snapshot(13.0).jobs[0]
    assert job.stranded_gpu_seconds == 0.0
    assert job.starting_gpu_seconds == 0.5 * 1 + 1.5 * 2
    assert (job.started, job.trained) == (3.0, 10.0)


def test_a_missing_member_counts_as_unplaced_and_completion_is_recorded():
    observer = Observer({JOB: 2}, capacity=8, start=0.0)
    observer.observe(pod("a-0", node="n1", phase="Running"), False, 0.0)
    assert observer.snapshot(2.0).jobs[0].stranded_gpu_seconds == 2.0
    observer.observe(pod("a-1", node="n1", phase="Running"), False, 2.0)
    for name in ("a-0", "a-1"):
        observer.observe(pod(name, node="n1", phase="Succeeded"), False, 7.0)
    job = observer.snapshot(9.0).jobs[0]
    assert (job.finished, job.trained, job.held_gpus, job.stranded_gpu_seconds) == (7.0, 5.0, 0, 2.0)
    assert observer.timeline == [(0.0, (0,)), (0.0, (1,)), (2.0, (2,)), (7.0, (1,)), (7.0, (0,))]


def test_pods_of_other_jobs_are_ignored_and_creation_is_judged_on_the_first_event():
    observer = Observer({JOB: 1}, capacity=8, start=0.0)
    stranger = pod("x-0")
    stranger["metadata"]["labels"] = {}
    observer.observe(stranger, False, 0.0)
    gated = pod("a-0", gated=True)
    gated["metadata"]["labels"][names.GROUP_LABEL] = "train-a-uid"
    gated["metadata"]["annotations"] = {names.GROUP_SOURCE_ANNOTATION: "pytorchjob"}
    observer.observe(gated, False, 0.0)
    observer.observe(pod("a-0", node="n1"), False, 1.0)
    assert observer.creation_counts() == (1, 1, 1)


def test_a_gated_member_its_gang_does_not_book_is_unplaced():
    observer = Observer({JOB: 2}, capacity=8, start=0.0)
    observer.observe(pod("a-1", gated=True), False, 0.0)
    observer.observe_gang(booking("a-0"), False, 0.0)
    observer.observe(pod("a-0", node="n1", phase="Running", reserved=True), False, 0.0)
    assert observer.snapshot(2.0).jobs[0].stranded_gpu_seconds == 2.0
    observer.observe_gang(booking("a-0", "a-1"), False, 2.0)
    assert observer.snapshot(5.0).jobs[0].stranded_gpu_seconds == 2.0, "booked from the Gang's write on"
