"""`matmul_acc(&mut acc, &a, &transpose(b))` on the cpu (issue 21 item 5): a transpose that
feeds a matmul (folded by the pass `fold-transpose`, vxc/ir/passes/fold_transpose.py) is
read in the matmul's operand access order (its packing of B, or of A)
and never materialised as a tile of its own; the answers are numpy's for every element
type, each operand transposed, both the `vdpbf16ps` and the widening paths, and shapes
with edges. A transpose with another use, or one whose source the matmul writes, is still
materialised."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from vxc import api, runtime
from vxc.backends.cpu import host_target, lower_to_llvm
from vxc.ir import parse_module

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
TRANSPOSE_FN = "__vx_tile_transpose"
ATTENTION = (
    Path(__file__).resolve().parents[2] / "kernels" / "attention.vx"
)  # tiles.define_transpose's functions


def _source(elem: str, m: int, n: int, k: int, ta: bool, tb: bool) -> str:
    """acc[m, n] += op(a) @ op(b), op a transpose where asked (x holds a or a^T, y b or b^T)."""
    xs, ys = ([k, m] if ta else [m, k]), ([n, k] if tb else [k, n])
    a, b = ("transpose(a)" if ta else "a"), ("transpose(b)" if tb else "b")
    return (
        f"fn k(x: &Tensor<{elem}, {xs}>, y: &Tensor<{elem}, {ys}>) -> Tensor<f32, [{m}, {n}]>\n"
        "    on Topology::TensorCore {\n"
        "  let a = transfer(x, Memory::VMEM);\n"
        "  let b = transfer(y, Memory::VMEM);\n"
        f"  let mut acc = transfer(Tensor<f32>([{m}, {n}]), Memory::ACC);\n"
        f"  matmul_acc(&mut acc, &{a}, &{b});\n"
        "  return transfer(acc, Memory::HBM);\n"
        "}\n"
    )


def _build(src: str, emit: str = "artifact", cpu: str = "native"):
    source = api.Source("k.vx", src.encode())
    result = api.build(api.analyze([source]), "cpu", emit=emit, cpu=cpu)
    assert result.ok, api.render(result.diagnostics, [source])
    return result


def _llvm_ir(src: str, name: str = "k.vx") -> str:
    """The lowering's own LLVM IR, before LLVM's passes inline the tile functions, of the
    module the cpu backend receives (after its vx passes, fold-transpose the last)."""
    source = api.Source(name, src.encode())
    result = api.build(api.analyze([source]), "cpu", emit="vx-mlir:after=fold-transpose")
    assert result.ok, api.render(result.diagnostics, [source])
    (mlir,) = result.outputs.values()
    return lower_to_llvm(parse_module(mlir.decode()), host_target())[0]


CASES = [
    # (cpu, elem, m, n, k): 64 x 96 x 32 fits the bf16 dot kernel's blocking, 24 x 37 x 40
    # has edges in every dimension (the widening path for bf16 as well), 64 x 40 x 32 does
    # not fit in N alone (a transposed B is [N, K]: the fit is of the product's N, not of
    # the operand's second dimension); x86-64-v4 (no AVX512_BF16) runs bf16 through the
    # widening path.
    (cpu, elem, *shape)
    for elem in DTYPES
    for cpu in (["native", "x86-64-v4"] if elem == "bf16" else ["native"])
    for shape in ((64, 96, 32), (24, 37, 40), (64, 40, 32))
]


@pytest.mark.parametrize(("cpu", "elem", "m", "n", "k"), CASES)
@pytest.mark.parametrize(("ta", "tb"), [(False, True), (True, False), (True, True)])
def test_a_folded_transpose_computes_numpys_product(tmp_path, cpu, elem, m, n, k, ta, tb):
    art = runtime.load_outputs(_build(_source(elem, m, n, k, ta, tb), cpu=cpu).outputs, tmp_path)
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(DTYPES[elem])
    b = rng.standard_normal((k, n)).astype(DTYPES[elem])
    got = art.k(np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize(("ta", "tb"), [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("elem", list(DTYPES))
def test_a_transpose_feeding_matmul_acc_is_not_materialised(elem, ta, tb):
    text = _llvm_ir(_source(elem, 128, 128, 128, ta, tb))
    assert "__vx_matmul_acc" in text
    assert TRANSPOSE_FN not in text


def test_attentions_k_transpose_is_not_materialised():
    text = _llvm_ir(ATTENTION.read_text(), "kernels/attention.vx")
    assert "__vx_matmul_acc_bf16dot" in text or "__vx_matmul_acc_f32" in text
    assert TRANSPOSE_FN not in text


def test_a_transpose_with_another_use_is_materialised(tmp_path):
    """`t` feeds the matmul and the sum after it: a tile of its own, and the answer right."""
    src = (
        "fn k(x: &Tensor<f32, [32, 32]>) -> Tensor<f32, [32, 32]> on Topology::TensorCore {\n"
        "  let a = transfer(x, Memory::VMEM);\n"
        "  let t = transpose(a);\n"
        "  let mut acc = transfer(Tensor<f32>([32, 32]), Memory::ACC);\n"
        "  matmul_acc(&mut acc, &a, &t);\n"
        "  return transfer(transfer(acc, Memory::VMEM) + t, Memory::HBM);\n"
        "}\n"
    )
    assert TRANSPOSE_FN in _llvm_ir(src)
    art = runtime.load_outputs(_build(src).outputs, tmp_path)
    x = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    np.testing.assert_allclose(art.k(x), x @ x.T + x.T, rtol=1e-5, atol=1e-4)
