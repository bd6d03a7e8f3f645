"""The worker protocol, spoken directly: length-delimited WorkRequest/WorkResponse
frames to a real worker process (vxc.worker.server around a protocol-exercise
handler, see protocol_worker.py)."""

from __future__ import annotations

import os
import time

import pytest
from workerclient import WorkerClient, inputs

from vxc.worker.vx_worker_protocol_pb2 import WorkRequest


@pytest.fixture
def worker():
    w = WorkerClient(["tests/worker/protocol_worker.py"])
    yield w
    if w.proc.poll() is None:
        w.close()


def test_many_requests_one_process(worker):
    for i in range(300):
        r = worker.call(["echo", str(i)])
        assert (r.exit_code, r.output, r.request_id) == (0, f"{i}\n", 0)
    assert worker.close() == 0


def test_multiplex_ids_are_echoed(worker):
    for i in range(1, 20):
        worker.send(arguments=["echo", "m"], request_id=i)
    ids = sorted(worker.recv().request_id for _ in range(1, 20))
    assert ids == list(range(1, 20))


def test_program_error_is_exit_1_with_output(worker):
    r = worker.call(["fail"])
    assert r.exit_code == 1 and "error[E0001]" in r.output
    assert worker.call(["echo", "still", "here"]).output == "still here\n"


def test_internal_error_is_exit_2_bug_report_and_worker_survives(worker):
    r = worker.call(["crash"])
    assert r.exit_code == 2
    assert "internal compiler error: RuntimeError: deliberate internal failure" in r.output
    assert "Traceback" in r.output and "please report" in r.output.lower()
    for i in range(3):
        assert worker.call(["echo", str(i)]).output == f"{i}\n"


def test_cancel_running_request(worker):
    worker.send(arguments=["sleep", "30"], request_id=7)
    time.sleep(0.3)
    t0 = time.monotonic()
    worker.send(request_id=7, cancel=True)
    r = worker.recv()
    assert r.request_id == 7 and r.was_cancelled
    assert time.monotonic() - t0 < 5
    assert worker.call(["echo", "after"], request_id=8).output == "after\n"


def test_cancel_queued_request_answers_once(worker):
    worker.send(arguments=["sleep", "0.5"], request_id=1)
    worker.send(arguments=["echo", "never"], request_id=2)
    worker.send(request_id=2, cancel=True)
    got = {}
    for _ in range(2):
        r = worker.recv()
        got[r.request_id] = r
    assert got[2].was_cancelled and "never" not in got[2].output
    assert not got[1].was_cancelled and got[1].output == "slept\n"
    # A cancel for a request already answered is ignored: no extra response.
    worker.send(request_id=1, cancel=True)
    assert worker.call(["echo", "next"], request_id=3).request_id == 3


def test_malformed_payload_then_valid(worker):
    worker.send_raw(b"\xff\xff\xff\xff\xff")  # not a WorkRequest
    r = worker.recv()
    assert r.exit_code == 2 and "not a WorkRequest" in r.output
    assert worker.call(["echo", "ok"]).output == "ok\n"


def test_bad_size_prefix_is_answered_and_worker_keeps_reading(worker):
    from vxc.worker import framing

    worker.send_bytes(b"\xff" * 10)  # a size varint that does not end within 10 bytes
    r = worker.recv()
    assert r.exit_code == 2 and "malformed" in r.output
    assert worker.call(["echo", "ok"]).output == "ok\n"
    worker.send_bytes(framing.encode_varint(1 << 40))  # announces a terabyte
    r = worker.recv()
    assert r.exit_code == 2 and "exceeds" in r.output
    assert worker.call(["echo", "ok2"]).output == "ok2\n"


def test_frame_split_across_writes(worker):
    payload = WorkRequest(arguments=["echo", "in", "pieces"]).SerializeToString()
    data = bytes([len(payload)]) + payload
    for i in range(len(data)):
        worker.send_bytes(data[i : i + 1])
        time.sleep(0.002)
    assert worker.recv().output == "in pieces\n"


def test_truncated_frame_at_eof_exits_cleanly(worker):
    assert worker.call(["echo", "x"]).output == "x\n"
    worker.send_bytes(b"\x40" + b"abc")  # announces 64 bytes, sends 3, then EOF
    assert worker.close() == 0
    err = worker.stderr_text()
    assert "truncated frame" in err and "Traceback" not in err


def test_huge_request(worker):
    args = ["argc"] + [f"--src=kernels/k{i:06d}.vx" for i in range(200_000)]
    r = worker.call(args)
    assert r.output == "200000\n"
    big = worker.call(["big", str(20 * 1024 * 1024)])
    assert len(big.output) == 20 * 1024 * 1024
    assert worker.call(["echo", "ok"]).output == "ok\n"


def test_verbosity_appends_stats(worker):
    quiet = worker.call(["echo", "q"])
    assert "vxc-worker:" not in quiet.output
    loud = worker.call(["echo", "v"], verbosity=10)
    assert loud.output.startswith("v\n")
    assert f"vxc-worker: pid={worker.proc.pid}" in loud.output and "cmd=echo" in loud.output


def test_sandbox_dir_and_flagfile(worker, tmp_path):
    sandbox = tmp_path / "sandbox"
    (sandbox / "bazel-out").mkdir(parents=True)
    (sandbox / "args.txt").write_text("write\nbazel-out/result.txt\nfrom flagfile\n")
    r = worker.call(["@args.txt"], sandbox_dir=str(sandbox), inputs=inputs(sandbox, ["args.txt"]))
    assert r.exit_code == 0, r.output
    assert (sandbox / "bazel-out" / "result.txt").read_text() == "from flagfile"
    assert [p.name for p in (sandbox / "bazel-out").iterdir()] == ["result.txt"]


def test_stray_stdout_does_not_corrupt_protocol(worker):
    assert worker.call(["print", "hello"]).output == "printed\n"
    assert worker.call(["echo", "clean"]).output == "clean\n"
    worker.close()
    assert "raw fd write" in worker.stderr_text()


def test_write_atomic_leaves_no_partial_file(tmp_path):
    from vxc.outputs import write_atomic

    target = tmp_path / "out.o"
    write_atomic(str(target), b"first")

    with pytest.raises(TypeError):
        write_atomic(str(target), "not bytes")  # fails while writing the temporary
    assert target.read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["out.o"]


def test_random_payloads_are_each_answered_and_valid_requests_still_work(worker):
    """Well-framed random payloads (protobuf parses many of them as some WorkRequest):
    every frame gets exactly one response, and real requests in between are served."""
    import random

    from vxc.worker import framing

    rng = random.Random(1234)
    expected = []
    for i in range(200):
        if i % 5 == 0:
            payload = WorkRequest(arguments=["echo", f"real{i}"]).SerializeToString()
            expected.append(f"real{i}\n")
        else:
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
            expected.append(None)
        worker.send_bytes(framing.encode_varint(len(payload)) + payload)
    for want in expected:
        r = worker.recv()
        if want is not None:
            assert (r.exit_code, r.output) == (0, want)
    assert worker.call(["echo", "alive"]).output == "alive\n"
