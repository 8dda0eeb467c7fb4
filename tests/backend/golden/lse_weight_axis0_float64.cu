/* kerneltools generated CUDA kernel: LogSumExpWeight, double, j0[3], i1[3], j2[2]
 * key golden; shared scheme, 2 row(s) per thread, tile 128
 */
typedef double real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define KT_FINITE(x) ((x) - (x) == 0)
#define KT_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); v++)
#define KT_EXP(x) exp(x)
#define KT_EXP2(x) exp2(x)
#define KT_REAL_MAX 1.7976931348623157e308
#define KT_EXPR(x) KT_EXP(x)
#define KT_LOGR(x) log(x)
#define KT_RSCALE 1.0
#define TJ 128
#define NC 6

extern "C" __global__ void kt_kernel(const long long nx, const long long ny, const real_t *__restrict__ a0, const real_t *__restrict__ a1, const real_t *__restrict__ a2, real_t *__restrict__ outf) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long i_first = (long long)blockIdx.x * 256 + threadIdx.x;
  const long long i0_raw = i_first + 0;
  const long long i0 = i0_raw < nx ? i0_raw : nx - 1;
  const long long i1_raw = i_first + 128;
  const long long i1 = i1_raw < nx ? i1_raw : nx - 1;

  const real_t r0t1_0 = a1[i0 * 3 + 0];
  const real_t r0t1_1 = a1[i0 * 3 + 1];
  const real_t r0t1_2 = a1[i0 * 3 + 2];
  const real_t r1t1_0 = a1[i1 * 3 + 0];
  const real_t r1t1_1 = a1[i1 * 3 + 1];
  const real_t r1t1_2 = a1[i1 * 3 + 2];
  real_t r0m[1], r0ts[2], r0bad[2]; bool r0nf; acc_t r0s[2];
  r0m[0] = -KT_REAL_MAX; r0nf = false;
  KT_FOR(e, 2) { r0ts[e] = 0; r0bad[e] = 0; r0s[e] = 0; }
  real_t r1m[1], r1ts[2], r1bad[2]; bool r1nf; acc_t r1s[2];
  r1m[0] = -KT_REAL_MAX; r1nf = false;
  KT_FOR(e, 2) { r1ts[e] = 0; r1bad[e] = 0; r1s[e] = 0; }
  for (long long j0 = 0; j0 < ny; j0 += TJ) {
    const int nj = (int)(ny - j0 < TJ ? ny - j0 : TJ);
    __syncthreads();
    for (int t = threadIdx.x; t < nj; t += 128) {
      const long long j = j0 + t;
      sj[t * NC + 0] = a0[j * 3 + 0];
      sj[t * NC + 1] = a0[j * 3 + 1];
      sj[t * NC + 2] = a0[j * 3 + 2];
      sj[t * NC + 3] = a2[j * 2 + 0];
      sj[t * NC + 4] = a2[j * 2 + 1];
    }
    __syncthreads();
    #pragma unroll 4
    for (int jj = 0; jj < nj; jj++) {
      const real_t r0t0_0 = sj[jj * NC + 0];
      const real_t r0t0_1 = sj[jj * NC + 1];
      const real_t r0t0_2 = sj[jj * NC + 2];
      const real_t r0t6_0 = sj[jj * NC + 3];
      const real_t r0t6_1 = sj[jj * NC + 4];
      const real_t r0t2_0 = (r0t0_0 - r0t1_0);
      const real_t r0t2_1 = (r0t0_1 - r0t1_1);
      const real_t r0t2_2 = (r0t0_2 - r0t1_2);
      const real_t r0t3_0 = (r0t2_0 * r0t2_0);
      const real_t r0t3_1 = (r0t2_1 * r0t2_1);
      const real_t r0t3_2 = (r0t2_2 * r0t2_2);
      const real_t r0t4_0 = (r0t3_0 + r0t3_1 + r0t3_2);
      const real_t r0t5_0 = (-r0t4_0);
      const real_t r0v0[1] = {r0t5_0};
      const real_t r0v1[2] = {r0t6_0, r0t6_1};
      {
        const real_t v = r0v0[0];
        if (v > r0m[0]) {
          if (KT_FINITE(v)) {
            const real_t c = KT_EXPR(r0m[0] - v);
            KT_FOR(e, 2) { r0ts[e] = r0ts[e] * c + r0v1[e]; r0s[e] *= (acc_t)c; }
            r0m[0] = v;
          } else { r0nf = true; KT_FOR(e, 2) r0bad[e] += v * r0v1[e]; }
        } else {
          const real_t x = KT_EXPR(v - r0m[0]);
          KT_FOR(e, 2) r0ts[e] += x * r0v1[e];
        }
      }
      const real_t r1t2_0 = (r0t0_0 - r1t1_0);
      const real_t r1t2_1 = (r0t0_1 - r1t1_1);
      const real_t r1t2_2 = (r0t0_2 - r1t1_2);
      const real_t r1t3_0 = (r1t2_0 * r1t2_0);
      const real_t r1t3_1 = (r1t2_1 * r1t2_1);
      const real_t r1t3_2 = (r1t2_2 * r1t2_2);
      const real_t r1t4_0 = (r1t3_0 + r1t3_1 + r1t3_2);
      const real_t r1t5_0 = (-r1t4_0);
      const real_t r1v0[1] = {r1t5_0};
      const real_t r1v1[2] = {r0t6_0, r0t6_1};
      {
        const real_t v = r1v0[0];
        if (v > r1m[0]) {
          if (KT_FINITE(v)) {
            const real_t c = KT_EXPR(r1m[0] - v);
            KT_FOR(e, 2) { r1ts[e] = r1ts[e] * c + r1v1[e]; r1s[e] *= (acc_t)c; }
            r1m[0] = v;
          } else { r1nf = true; KT_FOR(e, 2) r1bad[e] += v * r1v1[e]; }
        } else {
          const real_t x = KT_EXPR(v - r1m[0]);
          KT_FOR(e, 2) r1ts[e] += x * r1v1[e];
        }
      }
    }
    KT_FOR(e, 2) { r0s[e] += (acc_t)r0ts[e]; r0ts[e] = 0; }
    KT_FOR(e, 2) { r1s[e] += (acc_t)r1ts[e]; r1ts[e] = 0; }
  }
  if (i0_raw < nx) {
    const long long i = i0;
    KT_FOR(e, 2) outf[i * 2 + e] = r0nf ? (real_t)log(r0bad[e] + r0s[e])
        : (real_t)(((acc_t)r0m[0] + KT_LOGR(r0s[e])) * KT_RSCALE);
  }
  if (i1_raw < nx) {
    const long long i = i1;
    KT_FOR(e, 2) outf[i * 2 + e] = r1nf ? (real_t)log(r1bad[e] + r1s[e])
        : (real_t)(((acc_t)r1m[0] + KT_LOGR(r1s[e])) * KT_RSCALE);
  }
}
