/* kerneltools generated kernel: LogSumExpWeight, double, j0[3], i1[3], j2[2]
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
  const real_t *restrict a2 = (const real_t *)args[2];
  real_t *restrict outf = (real_t *)outs[0];

  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t i = 0; i < nx; i++) {
    const real_t t1_0 = a1[i * 3 + 0];
    const real_t t1_1 = a1[i * 3 + 1];
    const real_t t1_2 = a1[i * 3 + 2];
    real_t buf0[1 * TJ];
    real_t buf1[2 * TJ];
    acc_t lm[1], ls[2];
    lm[0] = -INFINITY; for (int e = 0; e < 2; e++) ls[e] = 0;
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      #pragma omp simd
      for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj;
        const real_t t0_0 = a0[0 * ny + j];
        const real_t t0_1 = a0[1 * ny + j];
        const real_t t0_2 = a0[2 * ny + j];
        const real_t t2_0 = (t0_0 - t1_0);
        const real_t t2_1 = (t0_1 - t1_1);
        const real_t t2_2 = (t0_2 - t1_2);
        const real_t t3_0 = (t2_0 * t2_0);
        const real_t t3_1 = (t2_1 * t2_1);
        const real_t t3_2 = (t2_2 * t2_2);
        const real_t t4_0 = (t3_0 + t3_1 + t3_2);
        const real_t t5_0 = (-t4_0);
        const real_t t6_0 = a2[0 * ny + j];
        const real_t t6_1 = a2[1 * ny + j];
        buf0[0 * TJ + jj] = t5_0;
        buf1[0 * TJ + jj] = t6_0;
        buf1[1 * TJ + jj] = t6_1;
      }
      {
        real_t *b = buf0;
        real_t m = -INFINITY;
        #pragma omp simd reduction(max:m)
        for (int64_t jj = 0; jj < nj; jj++) m = b[jj] > m ? b[jj] : m;
        const real_t sh = isfinite(m) ? m : (m == -INFINITY ? -INFINITY : (real_t)0);
        const real_t shc = sh == -INFINITY ? (real_t)0 : sh;
        #pragma omp simd
        for (int64_t jj = 0; jj < nj; jj++) b[jj] = exp(b[jj] - shc);
        const acc_t nw = lm[0] > (acc_t)sh ? lm[0] : (acc_t)sh;
        const acc_t ca = lm[0] == -INFINITY ? 0 : exp(lm[0] - nw);
        const acc_t cb = sh == -INFINITY ? 0 : exp((acc_t)sh - nw);
        lm[0] = nw;
        for (int e = 0; e < 2; e++) {
          const real_t *w = buf1 + e * TJ;
          real_t s = 0;
          #pragma omp simd reduction(+:s)
          for (int64_t jj = 0; jj < nj; jj++) s += b[jj] * w[jj];
          ls[e] = (ca == 0 ? 0 * ls[e] : ls[e] * ca) + (cb == 0 ? 0 * (acc_t)s : (acc_t)s * cb);
        }
      }
    }
    for (int e = 0; e < 2; e++) outf[i * 2 + e] = (real_t)(lm[0] + log(ls[e]));
  }
}
