"""A pre-norm transformer encoder block, written twice in JAX and twice in PyTorch: with the
vxc kernels called through `to_jax()` / `to_torch()` (layer norm, QKV projection,
attention, output projection, GELU MLP), and in the framework's own ops as the reference.

    y = x + Wo . attention(split(LN1(x) . Wqkv))
    z = y + W2 . gelu(LN2(y) . W1 + b1)

Shapes: x is f32[s, d] with d = 128 * h (heads of 128, the attention kernel's), the MLP
4d wide. Precision is the kernels': the matmul operands are bf16, accumulation f32; the
layer norms write bf16 (the next matmul's operand); the reference does the same casts,
so the two agree to bf16 rounding. Heads are split and merged with the framework's own
reshapes: the attention kernel takes `[h * s, 128]`, head after head.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import vxc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EPS = 1e-5
HEAD = 128


@dataclass(frozen=True)
class Weights:
    """numpy arrays; `ln*` are [1, d] f32, the matrices bf16 (ml_dtypes), b1 [1, 4d] f32."""

    ln1_g: np.ndarray
    ln1_b: np.ndarray
    wqkv: np.ndarray
    wo: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray


def weights(d: int, seed: int = 0) -> Weights:
    import ml_dtypes

    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        w = rng.standard_normal((rows, cols), np.float32) / np.sqrt(rows)
        return w.astype(ml_dtypes.bfloat16)

    def vec(n: int, mean: float) -> np.ndarray:
        return (mean + 0.1 * rng.standard_normal((1, n))).astype(np.float32)

    return Weights(
        vec(d, 1.0), vec(d, 0.0), mat(d, 3 * d), mat(d, d),
        vec(d, 1.0), vec(d, 0.0), mat(d, 4 * d), vec(4 * d, 0.0), mat(4 * d, d),
    )  # fmt: skip


def inputs(s: int, d: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((s, d), np.float32)


def kernels(framework: str, s: int, d: int, target: str = "cpu") -> dict[str, Any]:
    """The block's kernels for `target` as `to_jax` or `to_torch` functions (`framework`).
    The attention kernel's `where` clause gives its instance count from `h` and `s`,
    scalars rather than shapes, so it is given here: one instance per head and 128
    queries."""
    files = {
        "layernorm": HERE / "layernorm.vx",
        "gemm": ROOT / "kernels" / "gemm.vx",
        "gemm_gelu": HERE / "gemm_gelu.vx",
    }
    convert = f"to_{framework}"
    out = {n: getattr(vxc.compile(f, target=target), convert)() for n, f in files.items()}
    attention = getattr(vxc.compile(ROOT / "kernels" / "attention.vx", target=target), convert)
    out["attention"] = attention(instances=d // HEAD * (s // 128))
    return out


# -- JAX ------------------------------------------------------------------------------------
def jax_block(k: dict[str, Any], w: Weights) -> Any:
    """The block with the vxc kernels, as a function of x (jit it)."""
    import jax.numpy as jnp

    def block(x):
        s, d = x.shape
        h = d // HEAD
        ln = lambda t, g, b: k["layernorm"](EPS, t, g, b)  # noqa: E731
        qkv = k["gemm"](ln(x, w.ln1_g, w.ln1_b), w.wqkv)  # f32[s, 3d]
        heads = qkv.astype(jnp.bfloat16).reshape(s, 3, h, HEAD).transpose(1, 2, 0, 3)
        q, kk, v = (heads[i].reshape(h * s, HEAD) for i in range(3))
        o = k["attention"](h, s, False, HEAD**-0.5, q, kk, v)  # f32[h * s, 128]
        o = o.reshape(h, s, HEAD).transpose(1, 0, 2).reshape(s, d).astype(jnp.bfloat16)
        y = x + k["gemm"](o, w.wo)
        up = k["gemm_gelu"](ln(y, w.ln2_g, w.ln2_b), w.w1, w.b1)  # bf16[s, 4d]
        return y + k["gemm"](up, w.w2)

    return block


def jax_reference(w: Weights) -> Any:
    """The same block in jnp ops (the same bf16 casts)."""
    import jax
    import jax.numpy as jnp

    bf16, f32 = jnp.bfloat16, jnp.float32

    def dot(a, b):
        return jnp.dot(a.astype(bf16), b, preferred_element_type=f32)

    def ln(t, g, b):
        mean = t.mean(1, keepdims=True)
        var = ((t - mean) ** 2).mean(1, keepdims=True)
        return ((t - mean) * jax.lax.rsqrt(var + EPS) * g + b).astype(bf16)

    def block(x):
        s, d = x.shape
        h = d // HEAD
        qkv = dot(ln(x, w.ln1_g, w.ln1_b), w.wqkv)
        q, k, v = qkv.astype(bf16).reshape(s, 3, h, HEAD).transpose(1, 2, 0, 3)
        scores = jnp.einsum("hqd,hkd->hqk", q, k, preferred_element_type=f32) * HEAD**-0.5
        p = jax.nn.softmax(scores, axis=-1).astype(bf16)
        o = jnp.einsum("hqk,hkd->hqd", p, v, preferred_element_type=f32)
        o = o.transpose(1, 0, 2).reshape(s, d)
        y = x + dot(o, w.wo)
        up = dot(ln(y, w.ln2_g, w.ln2_b), w.w1) + w.b1
        up = jax.nn.gelu(up, approximate=True).astype(bf16)
        return y + dot(up, w.w2)

    return block


# -- PyTorch --------------------------------------------------------------------------------
def torch_weights(w: Weights) -> dict[str, Any]:
    import torch

    def t(a: np.ndarray) -> Any:
        if a.dtype == np.float32:
            return torch.from_numpy(a)
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)

    return {f: t(getattr(w, f)) for f in Weights.__dataclass_fields__}


def torch_block(k: dict[str, Any], w: dict[str, Any]) -> Any:
    """The block with the vxc kernels, as a function of x (torch.compile it)."""
    import torch

    def block(x):
        s, d = x.shape
        h = d // HEAD
        ln = lambda t, g, b: k["layernorm"](EPS, t, g, b)  # noqa: E731
        qkv = k["gemm"](ln(x, w["ln1_g"], w["ln1_b"]), w["wqkv"])
        heads = qkv.to(torch.bfloat16).reshape(s, 3, h, HEAD).permute(1, 2, 0, 3)
        q, kk, v = (heads[i].reshape(h * s, HEAD).contiguous() for i in range(3))
        o = k["attention"](h, s, False, HEAD**-0.5, q, kk, v)
        o = o.reshape(h, s, HEAD).permute(1, 0, 2).reshape(s, d).to(torch.bfloat16)
        y = x + k["gemm"](o.contiguous(), w["wo"])
        up = k["gemm_gelu"](ln(y, w["ln2_g"], w["ln2_b"]), w["w1"], w["b1"])
        return y + k["gemm"](up, w["w2"])

    return block


def torch_reference(w: dict[str, Any]) -> Any:
    import torch

    bf16, f32 = torch.bfloat16, torch.float32

    def dot(a, b):
        return (a.to(bf16).to(f32) @ b.to(f32)).to(f32)

    def ln(t, g, b):
        mean = t.mean(1, keepdim=True)
        var = ((t - mean) ** 2).mean(1, keepdim=True)
        return ((t - mean) * torch.rsqrt(var + EPS) * g + b).to(bf16)

    def block(x):
        s, d = x.shape
        h = d // HEAD
        qkv = dot(ln(x, w["ln1_g"], w["ln1_b"]), w["wqkv"])
        q, k, v = qkv.to(bf16).reshape(s, 3, h, HEAD).permute(1, 2, 0, 3).to(f32)
        p = torch.softmax(q @ k.transpose(1, 2) * HEAD**-0.5, dim=-1).to(bf16).to(f32)
        o = (p @ v).permute(1, 0, 2).reshape(s, d)
        y = x + dot(o, w["wo"])
        up = torch.nn.functional.gelu(dot(ln(y, w["ln2_g"], w["ln2_b"]), w["w1"]) + w["b1"],
                                      approximate="tanh").to(bf16)  # fmt: skip
        return y + dot(up, w["w2"])

    return block
