/* A C caller of kernels/gemm.vx (a kernel with an output) through ordinary Bazel deps:
 * the caller allocates C (C-contiguous, f32[m, n]) and gemm_launch writes it in place.
 * Inputs are small integers, exact in bf16, so the f32 product is exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.cpu.h"

static uint16_t bf16(float f) { /* exact for the small integers used here */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

int main(void) {
  const int64_t m = 256, n = 384, k = 256;
  uint16_t *a = malloc(sizeof *a * m * k), *b = malloc(sizeof *b * k * n);
  float *c = malloc(sizeof *c * m * n);
  for (int64_t i = 0; i < m * k; i++) a[i] = bf16((float)(i % 7) - 3.0f);
  for (int64_t i = 0; i < k * n; i++) b[i] = bf16((float)(i % 5) - 2.0f);
  int32_t s = gemm_launch((m / 128) * (n / 128), 0, m, n, k, a, m, k, b, k, n, c, m, n);
  if (s != VX_OK) {
    fprintf(stderr, "gemm_launch: status %d\n", s);
    return 1;
  }
  for (int64_t i = 0; i < m; i += 37)
    for (int64_t j = 0; j < n; j += 41) {
      float want = 0.0f;
      for (int64_t p = 0; p < k; p++)
        want += (float)((i * k + p) % 7 - 3) * (float)((p * n + j) % 5 - 2);
      if (c[i * n + j] != want) {
        fprintf(stderr, "c[%ld, %ld] = %g, want %g\n", (long)i, (long)j, c[i * n + j], want);
        return 1;
      }
    }
  /* a wrong shape parameter is refused before any instance runs */
  if (gemm_launch(1, 0, 128, n, k, a, m, k, b, k, n, c, m, n) != VX_ERR_SHAPE_PARAM) return 1;
  puts("gemm_cc_test: ok");
  return 0;
}
