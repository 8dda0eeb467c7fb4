/* kerneltools generated CUDA kernel: Sum, float, i0[3], j1[3], p2[1], j3[1]
 * key golden; shared scheme, 4 row(s) per thread, tile 128
 */
typedef float real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define KT_FINITE(x) ((x) - (x) == 0)
#define KT_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); v++)
__device__ __forceinline__ float kt_exp2f(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define KT_EXP(x) kt_exp2f((x) * 1.44269504088896341f)
#define KT_EXP2(x) kt_exp2f(x)
#define KT_REAL_MAX 3.402823466e38f
#define KT_EXPR(x) KT_EXP2(x)
#define KT_LOGR(x) log2(x)
#define KT_RSCALE 0.693147180559945309417
#define TJ 128
#define NC 4

extern "C" __global__ void kt_kernel(const long long nx, const long long ny, const real_t *__restrict__ a0, const real_t *__restrict__ a1, const real_t *__restrict__ a2, const real_t *__restrict__ a3, real_t *__restrict__ outf) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long i_first = (long long)blockIdx.x * 512 + threadIdx.x;
  const long long i0_raw = i_first + 0;
  const long long i0 = i0_raw < nx ? i0_raw : nx - 1;
  const long long i1_raw = i_first + 128;
  const long long i1 = i1_raw < nx ? i1_raw : nx - 1;
  const long long i2_raw = i_first + 256;
  const long long i2 = i2_raw < nx ? i2_raw : nx - 1;
  const long long i3_raw = i_first + 384;
  const long long i3 = i3_raw < nx ? i3_raw : nx - 1;
  const real_t r0t0_0 = a2[0];
  const real_t r0t2_0 = log(((real_t)2));
  const real_t r0t3_0 = ((real_t)1 / r0t2_0);
  const real_t r0t4_0 = (r0t0_0 * r0t3_0);
  const real_t r0t5_0 = a0[i0 * 3 + 0];
  const real_t r0t5_1 = a0[i0 * 3 + 1];
  const real_t r0t5_2 = a0[i0 * 3 + 2];
  const real_t r1t1_0 = a0[i1 * 3 + 0];
  const real_t r1t1_1 = a0[i1 * 3 + 1];
  const real_t r1t1_2 = a0[i1 * 3 + 2];
  const real_t r2t1_0 = a0[i2 * 3 + 0];
  const real_t r2t1_1 = a0[i2 * 3 + 1];
  const real_t r2t1_2 = a0[i2 * 3 + 2];
  const real_t r3t1_0 = a0[i3 * 3 + 0];
  const real_t r3t1_1 = a0[i3 * 3 + 1];
  const real_t r3t1_2 = a0[i3 * 3 + 2];
  acc_t r0acc[1]; real_t r0tacc[1];
  KT_FOR(e, 1) { r0acc[e] = 0; r0tacc[e] = 0; }
  acc_t r1acc[1]; real_t r1tacc[1];
  KT_FOR(e, 1) { r1acc[e] = 0; r1tacc[e] = 0; }
  acc_t r2acc[1]; real_t r2tacc[1];
  KT_FOR(e, 1) { r2acc[e] = 0; r2tacc[e] = 0; }
  acc_t r3acc[1]; real_t r3tacc[1];
  KT_FOR(e, 1) { r3acc[e] = 0; r3tacc[e] = 0; }
  for (long long j0 = 0; j0 < ny; j0 += TJ) {
    const int nj = (int)(ny - j0 < TJ ? ny - j0 : TJ);
    __syncthreads();
    for (int t = threadIdx.x; t < nj; t += 128) {
      const long long j = j0 + t;
      sj[t * NC + 0] = a1[j * 3 + 0];
      sj[t * NC + 1] = a1[j * 3 + 1];
      sj[t * NC + 2] = a1[j * 3 + 2];
      sj[t * NC + 3] = a3[j * 1 + 0];
    }
    __syncthreads();
    #pragma unroll 4
    for (int jj = 0; jj < nj; jj++) {
      const real_t r0t6_0 = sj[jj * NC + 0];
      const real_t r0t6_1 = sj[jj * NC + 1];
      const real_t r0t6_2 = sj[jj * NC + 2];
      const real_t r0t13_0 = sj[jj * NC + 3];
      const real_t r0t7_0 = (r0t5_0 - r0t6_0);
      const real_t r0t7_1 = (r0t5_1 - r0t6_1);
      const real_t r0t7_2 = (r0t5_2 - r0t6_2);
      const real_t r0t8_0 = (r0t7_0 * r0t7_0);
      const real_t r0t8_1 = (r0t7_1 * r0t7_1);
      const real_t r0t8_2 = (r0t7_2 * r0t7_2);
      const real_t r0t9_0 = (r0t8_0 + r0t8_1 + r0t8_2);
      const real_t r0t10_0 = (r0t4_0 * r0t9_0);
      const real_t r0t11_0 = (-r0t10_0);
      const real_t r0t12_0 = KT_EXP2(r0t11_0);
      const real_t r0t14_0 = (r0t12_0 * r0t13_0);
      const real_t r0v0[1] = {r0t14_0};
      KT_FOR(e, 1) r0tacc[e] += r0v0[e];
      const real_t r1t3_0 = (r1t1_0 - r0t6_0);
      const real_t r1t3_1 = (r1t1_1 - r0t6_1);
      const real_t r1t3_2 = (r1t1_2 - r0t6_2);
      const real_t r1t4_0 = (r1t3_0 * r1t3_0);
      const real_t r1t4_1 = (r1t3_1 * r1t3_1);
      const real_t r1t4_2 = (r1t3_2 * r1t3_2);
      const real_t r1t5_0 = (r1t4_0 + r1t4_1 + r1t4_2);
      const real_t r1t6_0 = (r0t4_0 * r1t5_0);
      const real_t r1t7_0 = (-r1t6_0);
      const real_t r1t8_0 = KT_EXP2(r1t7_0);
      const real_t r1t10_0 = (r1t8_0 * r0t13_0);
      const real_t r1v0[1] = {r1t10_0};
      KT_FOR(e, 1) r1tacc[e] += r1v0[e];
      const real_t r2t3_0 = (r2t1_0 - r0t6_0);
      const real_t r2t3_1 = (r2t1_1 - r0t6_1);
      const real_t r2t3_2 = (r2t1_2 - r0t6_2);
      const real_t r2t4_0 = (r2t3_0 * r2t3_0);
      const real_t r2t4_1 = (r2t3_1 * r2t3_1);
      const real_t r2t4_2 = (r2t3_2 * r2t3_2);
      const real_t r2t5_0 = (r2t4_0 + r2t4_1 + r2t4_2);
      const real_t r2t6_0 = (r0t4_0 * r2t5_0);
      const real_t r2t7_0 = (-r2t6_0);
      const real_t r2t8_0 = KT_EXP2(r2t7_0);
      const real_t r2t10_0 = (r2t8_0 * r0t13_0);
      const real_t r2v0[1] = {r2t10_0};
      KT_FOR(e, 1) r2tacc[e] += r2v0[e];
      const real_t r3t3_0 = (r3t1_0 - r0t6_0);
      const real_t r3t3_1 = (r3t1_1 - r0t6_1);
      const real_t r3t3_2 = (r3t1_2 - r0t6_2);
      const real_t r3t4_0 = (r3t3_0 * r3t3_0);
      const real_t r3t4_1 = (r3t3_1 * r3t3_1);
      const real_t r3t4_2 = (r3t3_2 * r3t3_2);
      const real_t r3t5_0 = (r3t4_0 + r3t4_1 + r3t4_2);
      const real_t r3t6_0 = (r0t4_0 * r3t5_0);
      const real_t r3t7_0 = (-r3t6_0);
      const real_t r3t8_0 = KT_EXP2(r3t7_0);
      const real_t r3t10_0 = (r3t8_0 * r0t13_0);
      const real_t r3v0[1] = {r3t10_0};
      KT_FOR(e, 1) r3tacc[e] += r3v0[e];
    }
    KT_FOR(e, 1) { r0acc[e] += (acc_t)r0tacc[e]; r0tacc[e] = 0; }
    KT_FOR(e, 1) { r1acc[e] += (acc_t)r1tacc[e]; r1tacc[e] = 0; }
    KT_FOR(e, 1) { r2acc[e] += (acc_t)r2tacc[e]; r2tacc[e] = 0; }
    KT_FOR(e, 1) { r3acc[e] += (acc_t)r3tacc[e]; r3tacc[e] = 0; }
  }
  if (i0_raw < nx) {
    const long long i = i0;
    KT_FOR(e, 1) outf[i * 1 + e] = (real_t)r0acc[e];
  }
  if (i1_raw < nx) {
    const long long i = i1;
    KT_FOR(e, 1) outf[i * 1 + e] = (real_t)r1acc[e];
  }
  if (i2_raw < nx) {
    const long long i = i2;
    KT_FOR(e, 1) outf[i * 1 + e] = (real_t)r2acc[e];
  }
  if (i3_raw < nx) {
    const long long i = i3;
    KT_FOR(e, 1) outf[i * 1 + e] = (real_t)r3acc[e];
  }
}
