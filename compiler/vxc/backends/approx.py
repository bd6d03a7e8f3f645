"""The f32 approximations that the cpu and nvidia lowerings of `tanh`, `log` and `erf`
share (LANGUAGE.md section 4.3; each target's accuracy is in docs/LANGUAGE.md section 9).

One table per function, read by both backends, so the two compute the same polynomial
in the same order (Horner, one f32 multiply and one f32 add per step, no fused
multiply-add: the PTX simulator models `mul.rn`/`add.rn` exactly, and an LLVM target
without FMA computes the same bits). Each error below was measured over 2^20 f32 inputs
(random bit patterns and a dense sample of [-5, 5]) against the f64 reference, with a
correctly rounded exp; the backends' own exp adds its error (docs/LANGUAGE.md).
"""

from __future__ import annotations

# tanh, |x| < TANH_SMALL: x + x z P(z), z = x^2 (Cephes tanhf); above it
# 1 - 2 / (exp(2|x|) + 1) with x's sign, which has no cancellation there. Max 1.7 ulp.
TANH_SMALL = 0.625
TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
          -3.33332819422e-1)  # fmt: skip

# log (Cephes logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1,
# log x = f - f^2 / 2 + f^3 P(f) + e ln2, ln2 split in two so e ln2 is exact enough.
# Subnormal inputs are scaled by 2^23 first. Max 0.8 ulp.
LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
         1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
         3.3333331174e-1)  # fmt: skip
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
SQRT_HALF = 0.707106781186547524

# erf (N. Juffa's erff, with the polynomials evaluated by Horner's rule in f32):
# |x| <= ERF_SMALL: x + x P(x^2); above, with t = min(|x|, ERF_CLAMP) (erf is 1.0f past
# 3.92), 1 - exp(t Q(t) - t) with x's sign, Q's leading pair evaluated in t^2 as Juffa
# splits it. Max 1.24 ulp.
ERF_SMALL = 0.927734375
ERF_CLAMP = 4.0
ERF_P = (-5.96761703e-4, 4.99119423e-3, -2.67681349e-2, 1.12819925e-1,
         -3.76125336e-1, 1.28379166e-1)  # fmt: skip
ERF_Q_HI = (-1.72853470e-5, 3.83197126e-4)  # times t^2 ...
ERF_Q_MID = (-3.88396438e-3, 2.42546219e-2)  # ... plus this, both linear in t
ERF_Q_LO = (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1)  # then Horner in t
