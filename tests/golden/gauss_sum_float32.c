/* kerneltools generated kernel: Sum, float, i0[3], j1[3], p2[1], j3[1]
 * key golden
 */
#include <tgmath.h>
#include <stdint.h>

typedef float real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#define TJ 512
#define IB 8
#define VL 16
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

typedef struct { acc_t A[1]; } kt_state;

const char *kt_key(void) { return "golden"; }

/* Reduces rows [0, nx) over j in [0, ny). i-variables are row-major (n, d);
 * j-variables are packed by tiles: tile t holds d x TJ values, component c of
 * point t * TJ + jj at [t * d * TJ + c * TJ + jj], zero-padded to whole tiles. */
void kt_kernel(int64_t nx, int64_t ny, void **args, void **outs) {
  const real_t *restrict a0 = (const real_t *)args[0];
  const real_t *restrict a1 = (const real_t *)args[1];
  const real_t *restrict a2 = (const real_t *)args[2];
  const real_t *restrict a3 = (const real_t *)args[3];
  real_t *restrict outf = (real_t *)outs[0];
  const real_t t5_0 = a2[0];
  const int64_t nblocks = (nx + IB - 1) / IB;
  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t ib = 0; ib < nblocks; ib++) {
    const int64_t i0 = ib * IB;
    const int64_t ni = (nx - i0 < IB) ? nx - i0 : IB;
    kt_state st[IB];
    for (int64_t ii = 0; ii < ni; ii++) {
      kt_state *S = &st[ii];
      for (int e = 0; e < 1; e++) S->A[e] = 0;
    }

    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      const real_t *restrict y1 = a1 + j0 * 3;
      const real_t *restrict y3 = a3 + j0 * 1;
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = i0 + ii;
        kt_state *S = &st[ii];
        const real_t t0_0 = a0[i * 3 + 0];
        const real_t t0_1 = a0[i * 3 + 1];
        const real_t t0_2 = a0[i * 3 + 2];
        real_t s0 = 0;
        #pragma omp simd reduction(+:s0)
        for (int64_t jj = 0; jj < nj; jj++) {
          const int64_t j = j0 + jj;
          const real_t t1_0 = y1[0 * TJ + jj];
          const real_t t1_1 = y1[1 * TJ + jj];
          const real_t t1_2 = y1[2 * TJ + jj];
          const real_t t9_0 = y3[0 * TJ + jj];
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
          const real_t t10_0 = (t8_0 * t9_0);
          s0 += t10_0;
        }
        S->A[0] += s0;
      }
    }
    for (int64_t ii = 0; ii < ni; ii++) {
      const int64_t i = i0 + ii;
      kt_state *S = &st[ii];
      for (int e = 0; e < 1; e++) outf[i * 1 + e] = (real_t)S->A[e];
    }
  }
}
