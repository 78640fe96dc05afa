import io
import json
import multiprocessing
import os

from gangkeeper.audit import AuditLog, RotatingFileSink, StreamSink, open_audit_log

FIELDS = {"ts", "component", "event", "namespace", "group", "pod", "uid", "user", "decision", "reason", "details"}


def test_one_json_object_per_line_with_every_field():
    stream = io.StringIO()
    log = AuditLog("webhook", StreamSink(stream))
    log.record("admission.mutate", decision="patched", reason="PyTorchJob", namespace="ml", group="g", pod="p",
               uid="u-1", user="alice", details={"gates": 1})
    entry = json.loads(stream.getvalue())
    assert set(entry) == FIELDS
    assert entry["event"] == "admission.mutate" and entry["details"] == {"gates": 1}
    assert entry["ts"].endswith("Z")


def test_details_never_carry_nested_structures_or_long_strings():
    stream = io.StringIO()
    AuditLog("webhook", StreamSink(stream)).record(
        "admission.mutate", decision="allowed",
        details={"spec": {"containers": [{"env": [{"name": "TOKEN", "value": "hunter2"}]}]}, "note": "x" * 1000})
    line = stream.getvalue()
    assert "hunter2" not in line
    details = json.loads(line)["details"]
    assert details["spec"] == "<dict omitted>"
    assert len(details["note"]) == 256


def test_file_sink_rotates_by_size_and_keeps_backups(tmp_path):
    path = tmp_path / "audit.log"
    sink = RotatingFileSink(str(path), max_bytes=200, backups=2)
    for index in range(30):
        sink.write_line(json.dumps({"n": index, "pad": "x" * 40}))
    assert path.exists() and (tmp_path / "audit.log.1").exists() and (tmp_path / "audit.log.2").exists()
    assert not (tmp_path / "audit.log.3").exists()
    for name in ("audit.log", "audit.log.1", "audit.log.2"):
        assert os.path.getsize(tmp_path / name) <= 200
    newest = [json.loads(line)["n"] for line in path.read_text().splitlines()]
    assert newest[-1] == 29


def _write_many(path, worker, count):
    sink = RotatingFileSink(path, max_bytes=4000, backups=50)
    for index in range(count):
        sink.write_line(json.dumps({"worker": worker, "n": index}))


def test_several_processes_share_one_rotating_file_without_losing_or_tearing_lines(tmp_path):
    path = str(tmp_path / "audit.log")
    processes = [multiprocessing.Process(target=_write_many, args=(path, worker, 200)) for worker in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)
    lines = []
    for name in os.listdir(tmp_path):
        if name.startswith("audit.log") and not name.endswith(".lock"):
            lines += (tmp_path / name).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted((r["worker"], r["n"]) for r in records) == [(w, n) for w in range(3) for n in range(200)]


def test_stdout_by_default(capsys):
    open_audit_log("controller").record("gang.reserved", decision="reserved", group="g")
    assert json.loads(capsys.readouterr().out)["component"] == "controller"


def test_a_string_utf8_cannot_hold_is_escaped_not_raised():
    stream = io.StringIO()
    AuditLog("webhook", StreamSink(stream)).record("admission.mutate", decision="allowed", pod="bad\udc80name")
    assert json.loads(stream.getvalue())["pod"] == "bad\udc80name"
