/* kerneltools generated kernel: ArgKMin, double, i0[3], j1[3]
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

typedef struct { real_t kv[1][3]; int64_t ki[1][3]; } kt_state;

const char *kt_key(void) { return "golden"; }

/* Reduces rows [0, nx) over j in [0, ny). i-variables are row-major (n, d);
 * j-variables are packed by tiles: tile t holds d x TJ values, component c of
 * point t * TJ + jj at [t * d * TJ + c * TJ + jj], zero-padded to whole tiles. */
void kt_kernel(int64_t nx, int64_t ny, void **args, void **outs) {
  const real_t *restrict a0 = (const real_t *)args[0];
  const real_t *restrict a1 = (const real_t *)args[1];
  int64_t *restrict outi = (int64_t *)outs[0];

  const int64_t nblocks = (nx + IB - 1) / IB;
  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t ib = 0; ib < nblocks; ib++) {
    const int64_t i0 = ib * IB;
    const int64_t ni = (nx - i0 < IB) ? nx - i0 : IB;
    kt_state st[IB];
    for (int64_t ii = 0; ii < ni; ii++) {
      kt_state *S = &st[ii];
      for (int e = 0; e < 1; e++) for (int k = 0; k < 3; k++) { S->kv[e][k] = INFINITY; S->ki[e][k] = -1; }
    }
    real_t buf0[1 * TJ];
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
      const real_t *restrict y1 = a1 + j0 * 3;
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = i0 + ii;
        kt_state *S = &st[ii];
        const real_t t0_0 = a0[i * 3 + 0];
        const real_t t0_1 = a0[i * 3 + 1];
        const real_t t0_2 = a0[i * 3 + 2];
        #pragma omp simd
        for (int64_t jj = 0; jj < nj; jj++) {
          const int64_t j = j0 + jj;
          const real_t t1_0 = y1[0 * TJ + jj];
          const real_t t1_1 = y1[1 * TJ + jj];
          const real_t t1_2 = y1[2 * TJ + jj];
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
            if (S->ki[e][3 - 1] >= 0 && !KT_LT(v, S->kv[e][3 - 1])) continue;
            int p = 3 - 1;
            while (p > 0 && (S->ki[e][p - 1] < 0 || KT_LT(v, S->kv[e][p - 1]))) {
              S->kv[e][p] = S->kv[e][p - 1]; S->ki[e][p] = S->ki[e][p - 1]; p--;
            }
            S->kv[e][p] = v; S->ki[e][p] = j0 + jj;
          }
        }
      }
    }
    for (int64_t ii = 0; ii < ni; ii++) {
      const int64_t i = i0 + ii;
      kt_state *S = &st[ii];
      for (int k = 0; k < 3; k++) for (int e = 0; e < 1; e++) outi[(i * 3 + k) * 1 + e] = S->ki[e][k];
    }
  }
}
