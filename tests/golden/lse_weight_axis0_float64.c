/* kerneltools generated kernel: LogSumExpWeight, double, j0[3], i1[3], j2[2]
 * key golden
 */
#include <tgmath.h>
#include <stdint.h>

typedef double real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#define TJ 256
#define IB 8
#define VL 8
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

typedef struct { acc_t lm[1], ls[2]; } kt_state;

const char *kt_key(void) { return "golden"; }

/* Reduces rows [0, nx) over j in [0, ny). i-variables are row-major (n, d);
 * j-variables are packed by tiles: tile t holds d x TJ values, component c of
 * point t * TJ + jj at [t * d * TJ + c * TJ + jj], zero-padded to whole tiles. */
void kt_kernel(int64_t nx, int64_t ny, void **args, void **outs) {
  const real_t *restrict a0 = (const real_t *)args[0];
  const real_t *restrict a1 = (const real_t *)args[1];
  const real_t *restrict a2 = (const real_t *)args[2];
  real_t *restrict outf = (real_t *)outs[0];

  const int64_t nblocks = (nx + IB - 1) / IB;
  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t ib = 0; ib < nblocks; ib++) {
    const int64_t i0 = ib * IB;
    const int64_t ni = (nx - i0 < IB) ? nx - i0 : IB;
    kt_state st[IB];
    for (int64_t ii = 0; ii < ni; ii++) {
      kt_state *S = &st[ii];
      S->lm[0] = -INFINITY; for (int e = 0; e < 2; e++) S->ls[e] = 0;
    }
    real_t buf0[1 * TJ];
    real_t buf1[2 * TJ];
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      const real_t *restrict y0 = a0 + j0 * 3;
      const real_t *restrict y2 = a2 + j0 * 2;
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = i0 + ii;
        kt_state *S = &st[ii];
        const real_t t1_0 = a1[i * 3 + 0];
        const real_t t1_1 = a1[i * 3 + 1];
        const real_t t1_2 = a1[i * 3 + 2];
        #pragma omp simd
        for (int64_t jj = 0; jj < nj; jj++) {
          const int64_t j = j0 + jj;
          const real_t t0_0 = y0[0 * TJ + jj];
          const real_t t0_1 = y0[1 * TJ + jj];
          const real_t t0_2 = y0[2 * TJ + jj];
          const real_t t6_0 = y2[0 * TJ + jj];
          const real_t t6_1 = y2[1 * TJ + jj];
          const real_t t2_0 = (t0_0 - t1_0);
          const real_t t2_1 = (t0_1 - t1_1);
          const real_t t2_2 = (t0_2 - t1_2);
          const real_t t3_0 = (t2_0 * t2_0);
          const real_t t3_1 = (t2_1 * t2_1);
          const real_t t3_2 = (t2_2 * t2_2);
          const real_t t4_0 = (t3_0 + t3_1 + t3_2);
          const real_t t5_0 = (-t4_0);
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
          const acc_t nw = S->lm[0] > (acc_t)sh ? S->lm[0] : (acc_t)sh;
          const acc_t ca = S->lm[0] == -INFINITY ? 0 : exp(S->lm[0] - nw);
          const acc_t cb = sh == -INFINITY ? 0 : exp((acc_t)sh - nw);
          S->lm[0] = nw;
          for (int e = 0; e < 2; e++) {
            const real_t *w = buf1 + e * TJ;
            real_t s = 0;
            #pragma omp simd reduction(+:s)
            for (int64_t jj = 0; jj < nj; jj++) s += b[jj] * w[jj];
            S->ls[e] = (ca == 0 ? 0 * S->ls[e] : S->ls[e] * ca) + (cb == 0 ? 0 * (acc_t)s : (acc_t)s * cb);
          }
        }
      }
    }
    for (int64_t ii = 0; ii < ni; ii++) {
      const int64_t i = i0 + ii;
      kt_state *S = &st[ii];
      for (int e = 0; e < 2; e++) outf[i * 2 + e] = (real_t)(S->lm[0] + log(S->ls[e]));
    }
  }
}
