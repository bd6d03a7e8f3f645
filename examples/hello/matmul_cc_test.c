/* A C caller of this workspace's kernel through an ordinary Bazel dep
 * (cc_test deps = [":matmul"]): out = x @ w on data it makes, checked against a
 * plain C loop. */
#include <math.h>
#include <stdio.h>

#include "matmul.cpu.h"

#define N 128

static float x[N * N], w[N * N], got[N * N], want[N * N];

int main(void) {
  for (int i = 0; i < N * N; i++) {
    x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    w[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  }
  int32_t status = matmul(x, w, got);
  if (status != VX_OK) {
    fprintf(stderr, "matmul returned status %d\n", status);
    return 1;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      float s = 0.0f;
      for (int k = 0; k < N; k++) s += x[i * N + k] * w[k * N + j];
      want[i * N + j] = s;
    }
  for (int i = 0; i < N * N; i++)
    if (fabsf(got[i] - want[i]) > 1e-3f) {
      fprintf(stderr, "out[%d] = %f, the C loop gives %f\n", i, got[i], want[i]);
      return 1;
    }
  printf("matmul matches the C loop\n");
  return 0;
}
