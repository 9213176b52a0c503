// Writes test rows and the bytes llama.cpp's x86 quantize_row_q8_0 / quantize_row_q8_1 (the
// activation quantizers its matrix products use) make of them.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
void quantize_row_q8_0(const float*, void*, int64_t);
void quantize_row_q8_1(const float*, void*, int64_t);
void ggml_cpu_init(void);
static uint64_t s = 0x9E3779B97F4A7C15ull;
static float rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (float)((s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f; }
static void emit(FILE* f, const float* x, int n) {
  uint8_t a[34 * 64], b[36 * 64];
  quantize_row_q8_0(x, a, n); quantize_row_q8_1(x, b, n);
  uint32_t nn = n; fwrite(&nn, 4, 1, f); fwrite(x, 4, n, f); fwrite(a, 34, n / 32, f); fwrite(b, 36, n / 32, f);
}
int main(int argc, char** argv) {
  ggml_cpu_init();
  FILE* f = fopen(argv[1], "wb");
  float x[2048];
  for (int r = 0; r < 200; r++) { int n = 32 * (1 + r % 8); float scale = powf(10.0f, (float)(r % 13) - 6.0f); for (int i = 0; i < n; i++) x[i] = rnd() * scale; emit(f, x, n); }
  // ties: values that scale to k + 0.5 exactly
  for (int r = 0; r < 20; r++) { for (int i = 0; i < 64; i++) x[i] = (float)((i % 20) - 10) + 0.5f; x[0] = 127.0f; emit(f, x, 64); }
  memset(x, 0, sizeof x); emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = 3.25f; emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = (i % 2 ? -1 : 1) * 1e-40f; emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = rnd() * 3e38f; emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = rnd(); x[5] = NAN; emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = rnd(); x[7] = INFINITY; emit(f, x, 32);
  for (int i = 0; i < 32; i++) x[i] = rnd(); x[0] = -INFINITY; x[9] = NAN; emit(f, x, 32);
  fclose(f);
  return 0;
}
