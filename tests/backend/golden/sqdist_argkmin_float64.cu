/* kerneltools generated CUDA kernel: ArgKMin, double, i0[3], j1[3]
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
#define NC 4

extern "C" __global__ void kt_kernel(const long long nx, const long long ny, const real_t *__restrict__ a0, const real_t *__restrict__ a1, long long *__restrict__ outi) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long i_first = (long long)blockIdx.x * 256 + threadIdx.x;
  const long long i0_raw = i_first + 0;
  const long long i0 = i0_raw < nx ? i0_raw : nx - 1;
  const long long i1_raw = i_first + 128;
  const long long i1 = i1_raw < nx ? i1_raw : nx - 1;

  const real_t r0t0_0 = a0[i0 * 3 + 0];
  const real_t r0t0_1 = a0[i0 * 3 + 1];
  const real_t r0t0_2 = a0[i0 * 3 + 2];
  const real_t r1t0_0 = a0[i1 * 3 + 0];
  const real_t r1t0_1 = a0[i1 * 3 + 1];
  const real_t r1t0_2 = a0[i1 * 3 + 2];
  real_t r0kv[1][3]; long long r0ki[1][3];
  KT_FOR(e, 1) KT_FOR(k, 3) { r0kv[e][k] = INFINITY; r0ki[e][k] = -1; }
  real_t r1kv[1][3]; long long r1ki[1][3];
  KT_FOR(e, 1) KT_FOR(k, 3) { r1kv[e][k] = INFINITY; r1ki[e][k] = -1; }
  for (long long j0 = 0; j0 < ny; j0 += TJ) {
    const int nj = (int)(ny - j0 < TJ ? ny - j0 : TJ);
    __syncthreads();
    for (int t = threadIdx.x; t < nj; t += 128) {
      const long long j = j0 + t;
      sj[t * NC + 0] = a1[j * 3 + 0];
      sj[t * NC + 1] = a1[j * 3 + 1];
      sj[t * NC + 2] = a1[j * 3 + 2];
    }
    __syncthreads();
    #pragma unroll 4
    for (int jj = 0; jj < nj; jj++) {
      const long long j = j0 + jj;
      const real_t r0t1_0 = sj[jj * NC + 0];
      const real_t r0t1_1 = sj[jj * NC + 1];
      const real_t r0t1_2 = sj[jj * NC + 2];
      const real_t r0t2_0 = (r0t0_0 - r0t1_0);
      const real_t r0t2_1 = (r0t0_1 - r0t1_1);
      const real_t r0t2_2 = (r0t0_2 - r0t1_2);
      const real_t r0t3_0 = (r0t2_0 * r0t2_0);
      const real_t r0t3_1 = (r0t2_1 * r0t2_1);
      const real_t r0t3_2 = (r0t2_2 * r0t2_2);
      const real_t r0t4_0 = (r0t3_0 + r0t3_1 + r0t3_2);
      const real_t r0v0[1] = {r0t4_0};
      KT_FOR(e, 1) {
        const real_t v = r0v0[e];
        if (r0ki[e][3 - 1] < 0 || KT_LT(v, r0kv[e][3 - 1])) {
          r0kv[e][3 - 1] = v; r0ki[e][3 - 1] = j;
          _Pragma("unroll") for (int k = 3 - 1; k > 0; k--) {
            if (r0ki[e][k - 1] < 0 || KT_LT(r0kv[e][k], r0kv[e][k - 1])) {
              const real_t tv = r0kv[e][k]; r0kv[e][k] = r0kv[e][k - 1]; r0kv[e][k - 1] = tv;
              const long long ti = r0ki[e][k]; r0ki[e][k] = r0ki[e][k - 1]; r0ki[e][k - 1] = ti;
            }
          }
        }
      }
      const real_t r1t2_0 = (r1t0_0 - r0t1_0);
      const real_t r1t2_1 = (r1t0_1 - r0t1_1);
      const real_t r1t2_2 = (r1t0_2 - r0t1_2);
      const real_t r1t3_0 = (r1t2_0 * r1t2_0);
      const real_t r1t3_1 = (r1t2_1 * r1t2_1);
      const real_t r1t3_2 = (r1t2_2 * r1t2_2);
      const real_t r1t4_0 = (r1t3_0 + r1t3_1 + r1t3_2);
      const real_t r1v0[1] = {r1t4_0};
      KT_FOR(e, 1) {
        const real_t v = r1v0[e];
        if (r1ki[e][3 - 1] < 0 || KT_LT(v, r1kv[e][3 - 1])) {
          r1kv[e][3 - 1] = v; r1ki[e][3 - 1] = j;
          _Pragma("unroll") for (int k = 3 - 1; k > 0; k--) {
            if (r1ki[e][k - 1] < 0 || KT_LT(r1kv[e][k], r1kv[e][k - 1])) {
              const real_t tv = r1kv[e][k]; r1kv[e][k] = r1kv[e][k - 1]; r1kv[e][k - 1] = tv;
              const long long ti = r1ki[e][k]; r1ki[e][k] = r1ki[e][k - 1]; r1ki[e][k - 1] = ti;
            }
          }
        }
      }
    }


  }
  if (i0_raw < nx) {
    const long long i = i0;
    KT_FOR(k, 3) KT_FOR(e, 1) outi[(i * 3 + k) * 1 + e] = r0ki[e][k];
  }
  if (i1_raw < nx) {
    const long long i = i1;
    KT_FOR(k, 3) KT_FOR(e, 1) outi[(i * 3 + k) * 1 + e] = r1ki[e][k];
  }
}
