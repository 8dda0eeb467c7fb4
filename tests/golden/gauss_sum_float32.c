/* kerneltools generated kernel: Sum, float, i0[3], j1[3], p2[1], j3[1]
 * key golden
 */
#include <tgmath.h>
#include <stdint.h>

typedef float real_t;
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
  const real_t *restrict a3 = (const real_t *)args[3];
  real_t *restrict outf = (real_t *)outs[0];
  const real_t t5_0 = a2[0];
  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t i = 0; i < nx; i++) {
    const real_t t0_0 = a0[i * 3 + 0];
    const real_t t0_1 = a0[i * 3 + 1];
    const real_t t0_2 = a0[i * 3 + 2];
    acc_t A0 = 0;
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      real_t s0 = 0;
      #pragma omp simd reduction(+:s0)
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
        const real_t t6_0 = (t4_0 * t5_0);
        const real_t t7_0 = (-t6_0);
        const real_t t8_0 = exp(t7_0);
        const real_t t9_0 = a3[0 * ny + j];
        const real_t t10_0 = (t8_0 * t9_0);
        s0 += t10_0;
      }
      A0 += s0;
    }
    outf[i * 1 + 0] = (real_t)A0;
  }
}
