"""libtpu compiles every kernel's exported artifact ahead of time for v5e and v6e
(topology descriptions, no TPU), for two Vec lengths from one symbolic export; what
libtpu rejects is shown as one readable block. One topology per chip per session."""

from __future__ import annotations

import numpy as np
import pytest
from tpu_kernels import DTYPES, KERNELS, ROOT, inputs, reference

from vxc.backends.tpu.aot import compile_export, specialised_mosaic
from vxc.backends.tpu.errors import LibtpuRejected
from vxc.backends.tpu.interp import run

pytestmark = pytest.mark.slow


CASES = [(p, 0) for p in KERNELS] + [(ROOT / "kernels" / "stream_grid.vx", 2)]


@pytest.mark.parametrize("topo", ["v5e", "v6e"])
@pytest.mark.parametrize(
    "path,instances", CASES, ids=[f"{p.stem}-x{i}" if i else p.stem for p, i in CASES]
)
def test_libtpu_compiles_every_kernel(path, instances, topo, built):
    b = built(path, instances)
    for n in (4, 300):
        compiled = compile_export(b.export, b.kernel, topo, n)
        text = compiled.as_text()
        assert 'custom_call_target="tpu_custom_call"' in text
        stats = compiled.memory_analysis()
        assert stats.generated_code_size_in_bytes > 0
        # The symbolic Vec length was specialised to n: the operands are n tiles.
        nbytes = sum(
            np.dtype(DTYPES[p.dtype]).itemsize * _prod([n if d is None else d for d in p.shape])
            for p in b.kernel.inputs
        )
        assert stats.argument_size_in_bytes == nbytes


@pytest.mark.parametrize(
    "path,instances", CASES, ids=[f"{p.stem}-x{i}" if i else p.stem for p, i in CASES]
)
def test_interpreter_runs_what_libtpu_compiled(path, instances, built):
    """The Mosaic module inside the compiled executable is ours with the placeholder
    length replaced by n (libtpu's specialisation); interpreted, it matches numpy."""
    b = built(path, instances)
    n = 6
    compiled = compile_export(b.export, b.kernel, "v5e", n)
    (text,) = specialised_mosaic(compiled)
    assert "2147483647" not in text
    args = inputs(b.kernel, n)
    r = run(text, args, [p.name for p in b.kernel.inputs])
    np.testing.assert_array_equal(r.outputs[0], reference(b.kernel, args))


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


F16 = """\
fn mm(x: &Tensor<f16, [128, 128]>, w: &Tensor<f16, [128, 128]>) -> Tensor<f32, [128, 128]> on Topology::TensorCore {
  let xv = transfer(x, Memory::VMEM);
  let wv = transfer(w, Memory::VMEM);
  let mut acc = transfer(Tensor<f32>([128, 128]), Memory::ACC);
  matmul_acc(&mut acc, &xv, &wv);
  return transfer(acc, Memory::HBM);
}
"""


def test_libtpu_rejection_is_one_readable_block(tmp_path, capsys):
    """v5e has no f16 vector loads: libtpu's Mosaic compiler rejects the module; the
    build fails with exit 2 and libtpu's message, no traceback."""
    from vxc import cli

    path = tmp_path / "mm.vx"
    path.write_text(F16)
    rc = cli.main(["build", str(path), "--target", "tpu", "--tpu-aot", "v5e", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("vxc: error: libtpu rejected kernel `mm` for v5e (v5e:2x2):")
    assert "Mosaic failed to compile TPU kernel" in err
    assert "Traceback" not in err and "Please report a bug" not in err
    assert not (tmp_path / "mm.tpu.jax_export").exists()


def test_rejection_raises_libtpu_rejected(built, tmp_path):
    from vxc import api

    src = api.Source("mm.vx", F16.encode())
    with pytest.raises(LibtpuRejected):
        api.build(api.analyze([src]), "tpu", tpu_aot="v5e")


def test_libtpu_error_names_the_vx_line():
    """With source locations on the vx ops, the Mosaic ops carry them, and libtpu's
    rejection points at the .vx line of the failing op (the f16 matmul_acc)."""
    from vxc.backends.tpu import compile_module
    from vxc.ir import parse_module

    text = (ROOT / "tests" / "backends" / "tpu" / "data" / "mm_f16.vx.mlir").read_text()
    with pytest.raises(LibtpuRejected) as e:
        compile_module(parse_module(text), "mm", aot=("v5e",))
    assert 'at location: loc("mm_f16.vx":' in str(e.value)


def test_topologies_are_the_chips_named():
    from vxc.backends.tpu.aot import topology

    assert topology("v5e").devices[0].device_kind == "TPU v5 lite"
    assert topology("v6e").devices[0].device_kind == "TPU v6 lite"


def test_launch_with_more_instances_than_tiles_is_refused(built):
    b = built(ROOT / "kernels" / "stream_grid.vx", 2)
    compile_export(b.export, b.kernel, "v5e", 2)
    with pytest.raises(ValueError, match="refining shapes"):
        compile_export(b.export, b.kernel, "v5e", 1)


@pytest.mark.parametrize("instances", [5, 8])
def test_the_aot_check_compiles_for_lengths_the_where_clause_allows(instances, built):
    # `where instances() <= tiles.len()` with 5 or 8 instances: the check used to
    # specialise every Vec length to 4, broke the clause and failed inside jax
    # ("Error refining shapes", an internal error). Now z3 picks the allowed lengths.
    from vxc.backends.tpu.aot import lengths_for

    b = built(ROOT / "kernels" / "stream_grid.vx", instances)
    assert lengths_for(b.kernel, 4) == {"tiles_len": instances}
    assert lengths_for(b.kernel, 300) == {"tiles_len": 300}
    assert "custom_call" in compile_export(b.export, b.kernel, "v5e").as_text()


def test_a_build_no_vec_length_can_call_is_an_error(built):
    from vxc.backends.tpu.aot import lengths_for
    from vxc.backends.tpu.errors import TpuError

    b = built(ROOT / "kernels" / "stream_grid.vx", 5)
    b.kernel.constraints.append("tiles_len == 3")  # with `tiles_len >= 5`: unsatisfiable
    try:
        with pytest.raises(TpuError, match="can never be called"):
            lengths_for(b.kernel, 4)
    finally:
        b.kernel.constraints.pop()
