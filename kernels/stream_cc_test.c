/* A C caller of the stream kernel through an ordinary Bazel dep (cc_test deps =
 * [":stream"]): acc = sum_i tiles[i] @ w on tiles and weights it makes, checked
 * against a plain C loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "stream.cpu.h"

#define N 128

static void reference(const float *tiles, int64_t n, const float *w, float *out) {
  for (int i = 0; i < N * N; i++) out[i] = 0.0f;
  for (int64_t t = 0; t < n; t++)
    for (int i = 0; i < N; i++)
      for (int k = 0; k < N; k++) {
        float a = tiles[t * N * N + i * N + k];
        for (int j = 0; j < N; j++) out[i * N + j] += a * w[k * N + j];
      }
}

static int check(int64_t n) {
  float *tiles = malloc(sizeof(float) * N * N * n);
  float *w = malloc(sizeof(float) * N * N);
  float *got = malloc(sizeof(float) * N * N);
  float *want = malloc(sizeof(float) * N * N);
  uint32_t s = 12345u + (uint32_t)n;
  for (int64_t i = 0; i < N * N * n; i++) {
    s = s * 1664525u + 1013904223u;
    tiles[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
  for (int i = 0; i < N * N; i++) {
    s = s * 1664525u + 1013904223u;
    w[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
  int32_t status = stream(tiles, n, w, got);
  reference(tiles, n, w, want);
  int bad = status != VX_OK;
  if (bad) fprintf(stderr, "stream(%lld tiles) returned status %d\n", (long long)n, status);
  for (int i = 0; i < N * N && !bad; i++) {
    float tol = 1e-4f * (float)(n * N); /* f32 sums of n*128 products, in another order */
    if (fabsf(got[i] - want[i]) > tol) {
      fprintf(stderr, "stream(%lld tiles): out[%d] = %f, the C loop gives %f\n", (long long)n,
              i, got[i], want[i]);
      bad = 1;
    }
  }
  if (!bad) printf("stream(%lld tiles) matches the C loop\n", (long long)n);
  free(tiles), free(w), free(got), free(want);
  return bad;
}

int main(void) {
  int bad = 0;
  for (int64_t n = 1; n <= 4; n++) bad |= check(n);
  bad |= check(33);
  return bad;
}
