"""`Kernel.to_torch()` on the cpu (vxc/frameworks/torch_op.py): kernels of kernels/ as a
`torch.library.custom_op`, equal to torch's own ops; `&mut` tensors written in place with
no copy; composed under `torch.compile(fullgraph=True)`; the op's schema and fake
implementation checked by torch's own `opcheck`; the call's checks (dtypes, shapes, shape
parameters, `where` clauses, devices) and the launcher's distinct-argument refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import vxc
from vxc.frameworks import torch_op
from vxc.runtime import ArgumentError, LaunchError

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
T = "Tensor<f32, [128, 128]>"
# A kernel with its own result and a scalar that is not a shape parameter: instance i
# returns its tile of x scaled by `s`.
SCALE = f"""
fn scale(m: i64, s: f32, x: &Tensor<f32, [m, 128]>) -> {T} on Topology::TensorCore
    where m % 128 == 0, instances() == m / 128 {{
  let t = transfer(x[instance() * 128 .. instance() * 128 + 128, 0 .. 128], Memory::VMEM);
  return transfer(t * s, Memory::HBM);
}}
"""


def _ints(shape, seed, dtype=torch.bfloat16):
    """Small integers: every product and sum below is exact in f32."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(-3, 4, shape).astype(np.float32)).to(dtype)


@pytest.fixture(scope="module")
def gemm():
    return vxc.compile(KERNELS / "gemm.vx").to_torch()


@pytest.fixture(scope="module")
def softmax():
    return vxc.compile(KERNELS / "softmax.vx").to_torch()


def test_gemm_equals_torch(gemm):
    a, b = _ints((256, 384), 1), _ints((384, 128), 2)
    c = gemm(a, b)
    assert c.shape == (256, 128) and c.dtype == torch.float32
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=0, atol=0)


def test_a_given_mut_tensor_is_written_in_place_without_a_copy(softmax):
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    y = torch.full_like(x, 7.0)
    pointer = y.data_ptr()
    out = softmax(x, y)
    assert out is y and y.data_ptr() == pointer
    torch.testing.assert_close(y, torch.softmax(x, 1), rtol=1e-6, atol=1e-7)


def test_softmax_of_a_gemm_under_torch_compile_fullgraph(gemm, softmax):
    q, k = _ints((128, 256), 3), _ints((256, 256), 4)

    def attention_scores(q, k):
        return softmax(gemm(q, k) * 0.125)

    compiled = torch.compile(attention_scores, fullgraph=True, backend="inductor")
    want = torch.softmax((q.float() @ k.float()) * 0.125, 1)
    torch.testing.assert_close(compiled(q, k), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(compiled(q, k), attention_scores(q, k), rtol=0, atol=0)


def test_the_op_passes_torchs_opcheck(softmax):
    """Schema, fake implementation, autograd registration and the mutation annotation, as
    `torch.library.opcheck` tests them on real and fake tensors."""
    x = torch.randn(16, 128)
    torch.library.opcheck(softmax.op, (x, torch.zeros_like(x), 0, 0))


def test_a_kernel_result_comes_back_with_the_instances_axis():
    f = vxc.compile(SCALE).to_torch()
    x = torch.arange(256 * 128, dtype=torch.float32).reshape(256, 128)
    out = f(2.0, x)
    assert out.shape == (2, 128, 128)
    torch.testing.assert_close(out, (x * 2).reshape(2, 128, 128), rtol=0, atol=0)
    torch.library.opcheck(f.op, (2.0, x, 0, 0))  # raises on a failure


def test_a_bf16_result_comes_back_as_bfloat16():
    f = vxc.compile(
        SCALE.replace("-> Tensor<f32", "-> Tensor<bf16").replace(
            "transfer(t * s, Memory::HBM)", "transfer(cast::<bf16>(t * s), Memory::HBM)"
        )
    ).to_torch()
    x = torch.arange(128 * 128, dtype=torch.float32).reshape(128, 128) / 64
    out = f(0.5, x)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 128, 128)
    torch.testing.assert_close(out[0], (x * 0.5).bfloat16(), rtol=0, atol=0)


def test_the_schema_marks_mut_tensors_as_mutated(gemm):
    text = torch_op.schema(gemm.layout)
    assert text == "(Tensor a, Tensor b, Tensor(a2!) c, int vx_instances, int vx_threads) -> ()"


def test_shape_and_dtype_errors_name_the_argument(gemm):
    a = _ints((128, 256), 5)
    with pytest.raises(ArgumentError, match="shape parameter 'k' is 256 from argument 'a'"):
        gemm(a, _ints((384, 128), 6))
    with pytest.raises(ArgumentError, match="argument 'a' must have dtype torch.bfloat16"):
        gemm(a.float(), _ints((256, 128), 6))


def test_a_where_clause_the_shapes_break_is_refused_before_the_call(gemm):
    with pytest.raises(LaunchError, match="VX_ERR_WHERE") as e:
        gemm(_ints((100, 128), 7), _ints((128, 128), 8))
    assert "m % 128 == 0" in str(e.value)


def test_aliased_arguments_are_refused_naming_both(softmax):
    x = torch.randn(8, 128)
    with pytest.raises(ArgumentError, match="arguments `x` and `y` overlap"):
        softmax(x, x)


def test_a_non_contiguous_mut_tensor_is_refused(softmax):
    x = torch.randn(8, 128)
    y = torch.zeros(128, 8).t()
    with pytest.raises(ArgumentError, match="must be contiguous"):
        softmax(x, y)


def test_a_tensor_that_requires_grad_is_refused_outside_no_grad(softmax):
    x = torch.randn(8, 128, requires_grad=True)
    with pytest.raises(ArgumentError, match="require grad, and a vxc kernel has no backward"):
        softmax(x)
    with torch.no_grad():
        torch.testing.assert_close(softmax(x), torch.softmax(x, 1))


def test_torch_compile_with_dynamic_shapes(softmax):
    f = torch.compile(lambda x: softmax(x) * 2, dynamic=True, fullgraph=True)
    for m in (16, 32, 64):
        x = torch.randn(m, 256)
        torch.testing.assert_close(f(x), torch.softmax(x, 1) * 2)


def test_other_targets_say_not_yet():
    k = vxc.compile(KERNELS / "softmax.vx", target="b200")
    with pytest.raises(NotImplementedError, match="to_torch\\(\\) calls cpu kernels"):
        k.to_torch()
