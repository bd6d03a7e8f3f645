"""The reader of libtpu's final bundles (vxc/backends/tpu/schedule.py) on LLO text in the
dump's form: loops from backward branches (their DELAY slots run inside), trip counts from
static exit tests, executed = each bundle times its loops' trips. A real compile is read
by tests/cli/test_tune_cli.py (slow); this checks the counting on schedules whose answer
is known by hand."""

from __future__ import annotations

import pytest

from vxc.backends.tpu.schedule import DELAY, ScheduleError, control_flow, executed


def _bundle(at: int, body: str = "", note: str = "", mark: str = "") -> str:
    return f"  {at:#x}   : {mark}{{ {body} }}{(' /* ' + note + ' */') if note else ''}"


def _loop(trips: int | None, start: int, region: int, body: int) -> list[str]:
    """A loop of `body` bundles from `start`, its exit test and branch, the delay slots."""
    test = (
        f"%p1 = scmp.ge.s32.totalorder %s1, {trips} /* loop exit test */"
        if trips is not None
        else "%p1 = scmp.ge.s32.totalorder %s1, %s7 /* loop exit test */"
    )
    lines = [_bundle(start, "%s2 = sadd.s32 1, %s1", f"Start region {region}", "> ")]
    lines += [_bundle(start + i, "%v1 = vadd.f32 %v0, %v0", mark="> ") for i in range(1, body)]
    lines.append(_bundle(start + body, test, mark="> "))
    lines.append(_bundle(start + body + 1, f"%9 = sbr.rel (!%p1) target = $region{region}"))
    lines += [_bundle(start + body + 2 + i) for i in range(DELAY)]
    return lines


def test_one_static_loop_counts_its_body_and_delay_slots_per_trip():
    text = "\n".join([_bundle(0, "%s1 = smov 0"), *_loop(16, 1, 29, 3), _bundle(1 + 3 + 2 + DELAY)])
    s = executed(text)
    per_trip = 3 + 2 + DELAY  # body, exit test, branch, delay slots
    assert (s.trips, s.steady) == ((16,), per_trip)
    assert (s.executed, s.fixed) == (2 + 16 * per_trip, 2)


def test_nested_loops_multiply_and_the_innermost_is_the_steady_state():
    inner = _loop(8, 2, 7, 2)
    outer_end = 2 + len(inner)
    lines = [
        _bundle(0, "%s1 = smov 0"),
        _bundle(1, "%s3 = smov 0", "Start region 3", "> "),
        *inner,
        _bundle(outer_end, "%p2 = scmp.ge.s32.totalorder %s3, 4 /* loop exit test */", mark="> "),
        _bundle(outer_end + 1, "%9 = sbr.rel (!%p2) target = $region3"),
        *[_bundle(outer_end + 2 + i) for i in range(DELAY)],
        _bundle(outer_end + 2 + DELAY),
    ]
    flow = control_flow("\n".join(lines))
    assert len(flow.loops) == 2
    s = executed("\n".join(lines))
    assert s.trips == (4, 8)
    outer_only = (outer_end + 1 + DELAY) - len(inner)  # bundles 1 .. its last delay slot
    assert s.steady == len(inner)
    assert s.executed == 2 + 4 * outer_only + 4 * 8 * len(inner)
    assert s.fixed == s.executed - 32 * len(inner)


def test_a_loop_whose_bound_is_a_register_is_refused_by_name():
    text = "\n".join([_bundle(0), *_loop(None, 1, 5, 2), _bundle(1 + 2 + 2 + DELAY)])
    with pytest.raises(ScheduleError, match="0 static exit tests"):
        executed(text)


def test_straight_line_code_is_all_fixed_cost():
    s = executed("\n".join(_bundle(i, "%s1 = smov 0") for i in range(5)))
    assert (s.executed, s.steady, s.fixed, s.trips) == (5, 0, 5, ())
