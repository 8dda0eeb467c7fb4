/* kerneltools generated kernel: ArgKMin, double, i0[3], j1[3]
 * key golden
 */
#include <tgmath.h>
#include <stdint.h>

typedef double real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#define TJ 512
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#pragma omp declare simd notinbranch
double (exp)(double);
#pragma omp declare simd notinbranch
float (expf)(float);
#pragma omp declare simd notinbranch
double (log)(double);
#pragma omp declare simd notinbranch
float (logf)(float);
#pragma omp declare simd notinbranch
double (sin)(double);
#pragma omp declare simd notinbranch
float (sinf)(float);
#pragma omp declare simd notinbranch
double (cos)(double);
#pragma omp declare simd notinbranch
float (cosf)(float);

const char *kt_key(void) { return "golden"; }

void kt_kernel(int64_t nx, int64_t ny, void **args, void **outs) {
  const real_t *restrict a0 = (const real_t *)args[0];
  const real_t *restrict a1 = (const real_t *)args[1];
  int64_t *restrict outi = (int64_t *)outs[0];

  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t i = 0; i < nx; i++) {
    const real_t t0_0 = a0[i * 3 + 0];
    const real_t t0_1 = a0[i * 3 + 1];
    const real_t t0_2 = a0[i * 3 + 2];
    real_t buf0[1 * TJ];
    real_t kv[1][3]; int64_t ki[1][3];
    for (int e = 0; e < 1; e++) for (int k = 0; k < 3; k++) { kv[e][k] = INFINITY; ki[e][k] = -1; }
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      #pragma omp simd
      for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj;
        const real_t t1_0 = a1[0 * ny + j];
        const real_t t1_1 = a1[1 * ny + j];
        const real_t t1_2 = a1[2 * ny + j];
        const real_t t2_0 = (t0_0 - t1_0);
        const real_t t2_1 = (t0_1 - t1_1);
        const real_t t2_2 = (t0_2 - t1_2);
        const real_t t3_0 = (t2_0 * t2_0);
        const real_t t3_1 = (t2_1 * t2_1);
        const real_t t3_2 = (t2_2 * t2_2);
        const real_t t4_0 = (t3_0 + t3_1 + t3_2);
        buf0[0 * TJ + jj] = t4_0;
      }
      for (int e = 0; e < 1; e++) {
        const real_t *b = buf0 + e * TJ;
        for (int64_t jj = 0; jj < nj; jj++) {
          const real_t v = b[jj];
          /* threshold test first: most candidates are rejected here */
          if (ki[e][3 - 1] >= 0 && !KT_LT(v, kv[e][3 - 1])) continue;
          int p = 3 - 1;
          while (p > 0 && (ki[e][p - 1] < 0 || KT_LT(v, kv[e][p - 1]))) {
            kv[e][p] = kv[e][p - 1]; ki[e][p] = ki[e][p - 1]; p--;
          }
          kv[e][p] = v; ki[e][p] = j0 + jj;
        }
      }
    }
    for (int k = 0; k < 3; k++) for (int e = 0; e < 1; e++) outi[(i * 3 + k) * 1 + e] = ki[e][k];
  }
}
