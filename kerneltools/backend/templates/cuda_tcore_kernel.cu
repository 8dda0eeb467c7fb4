/* kerneltools generated CUDA kernel: ${title}
 * key ${key}; tensor cores: mma.m16n8k8 TF32 with the 3xTF32 split,
 * ${warps} warp(s) x 16 rows, tile ${bn}, D ${d}, E ${e}, ${product} product
 */
#define D ${d}
#define DP ${dp}
#define E ${e}
#define EP ${ep}
#define WARPS ${warps}
#define THREADS (32 * WARPS)
#define BM (16 * WARPS)
#define BN ${bn}
#define KT_MMA_PRODUCT ${mma_product}
/* Row strides in shared memory: +4 floats (+8 for B) so that the lanes of a
   fragment load hit 32 distinct banks. */
#define XS (DP + 4)
#define BS (EP + 8)
#define KS (BN + 4)

__device__ __forceinline__ float kt_exp2f(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* x rounded to TF32 (10-bit mantissa, to nearest, ties away from 0). */
__device__ __forceinline__ unsigned kt_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/* x = hi + lo, both TF32 (x - hi is exact in float32). */
__device__ __forceinline__ void kt_split(float x, unsigned &hi, unsigned &lo) {
  hi = kt_tf32(x);
  lo = kt_tf32(x - __uint_as_float(hi));
}

/* c += a b on one m16n8k8 tile (a row-major 16 x 8, b column-major 8 x 8). */
__device__ __forceinline__ void kt_mma(float (&c)[4], const unsigned (&a)[4],
                                       const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* 3xTF32: c += a_lo b_hi + a_hi b_lo + a_hi b_hi, the small terms first
   (a_lo b_lo, below float32's rounding, is dropped). */
__device__ __forceinline__ void kt_mma3(float (&c)[4], const unsigned (&ah)[4],
                                        const unsigned (&al)[4], const unsigned (&bh)[2],
                                        const unsigned (&bl)[2]) {
  kt_mma(c, al, bh);
  kt_mma(c, ah, bl);
  kt_mma(c, ah, bh);
}

/* The A fragment (rows g, g + 8; columns k0 + t, k0 + t + 4) of a row-major
   tile with row stride ld, split. */
__device__ __forceinline__ void kt_load_a(const float *a, int ld, int k0, int g, int t,
                                          unsigned (&hi)[4], unsigned (&lo)[4]) {
  kt_split(a[g * ld + k0 + t], hi[0], lo[0]);
  kt_split(a[(g + 8) * ld + k0 + t], hi[1], lo[1]);
  kt_split(a[g * ld + k0 + t + 4], hi[2], lo[2]);
  kt_split(a[(g + 8) * ld + k0 + t + 4], hi[3], lo[3]);
}

/* c[nt] += A B[:, 8 nt : 8 nt + 8] for nt < NT, over k < K (a multiple of
   8), by 3xTF32: A row-major 16 x K (row stride lda), B[k][n] at
   b[k * sk + n * sn]. */
template <int NT>
__device__ __forceinline__ void kt_mma_tiles(float (&c)[NT][4], const float *a, int lda,
                                             const float *b, int sk, int sn, int K, int g,
                                             int t) {
  for (int k0 = 0; k0 < K; k0 += 8) {
    unsigned ah[4], al[4];
    kt_load_a(a, lda, k0, g, t, ah, al);
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      unsigned bh[2], bl[2];
      kt_split(b[(k0 + t) * sk + (nt * 8 + g) * sn], bh[0], bl[0]);
      kt_split(b[(k0 + t + 4) * sk + (nt * 8 + g) * sn], bh[1], bl[1]);
      kt_mma3(c[nt], ah, al, bh, bl);
    }
  }
}

/* out_i = sum_j exp2(c2 d2_ij) b_j, d2_ij = |x_i|^2 + |y_j|^2 - 2 <x_i, y_j>
   clamped at 0, c2 = c log2 e for K = exp(c d2). One block: BM rows; the
   reduced points in tiles of BN; each warp its 16 rows. */
extern "C" __global__ void __launch_bounds__(THREADS)
kt_kernel(const long long nx, const long long ny, const float c2,
          const float *__restrict__ x, const float *__restrict__ y,
          const float *__restrict__ b, const float *__restrict__ xn_g,
          const float *__restrict__ yn_g, float *__restrict__ out) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  float *xs = (float *)kt_smem;  /* BM x XS: the block's rows, zero-padded */
  float *ys = xs + BM * XS;      /* BN x XS: the tile's points */
  float *bs = ys + BN * XS;      /* BN x BS: their right-hand sides */
  float *ks = bs + BN * BS;      /* BM x KS: the kernel's values */
  float *xn = ks + BM * KS;      /* BM: |x_i|^2 (summed in double by the caller) */
  float *yn = xn + BM;           /* BN: |y_j|^2 */
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const long long i0 = (long long)blockIdx.x * BM;
  for (int u = tid; u < BM * DP; u += THREADS) {
    const int r = u / DP, c = u % DP;
    xs[r * XS + c] = (i0 + r < nx && c < D) ? x[(i0 + r) * D + c] : 0.0f;
  }
  for (int r = tid; r < BM; r += THREADS) xn[r] = i0 + r < nx ? xn_g[i0 + r] : 0.0f;
  const float *xw = xs + warp * 16 * XS;
  float *kw = ks + warp * 16 * KS;
#if KT_MMA_PRODUCT
  double acc[EP / 8][4];
  for (int et = 0; et < EP / 8; et++)
    for (int q = 0; q < 4; q++) acc[et][q] = 0;
#else
  /* two threads per row (of this warp's rows), columns e0, e0 + 2, ... */
  const int row = tid >> 1, e0 = tid & 1;
  double acc[(E + 1) / 2];
  for (int q = 0; q < (E + 1) / 2; q++) acc[q] = 0;
#endif
  for (long long j0 = 0; j0 < ny; j0 += BN) {
    const int nj = (int)(ny - j0 < BN ? ny - j0 : BN);
    __syncthreads(); /* the previous tile is read */
    for (int u = tid; u < BN * DP; u += THREADS) {
      const int r = u / DP, c = u % DP;
      ys[r * XS + c] = (r < nj && c < D) ? y[(j0 + r) * D + c] : 0.0f;
    }
    for (int u = tid; u < BN * EP; u += THREADS) {
      const int r = u / EP, c = u % EP;
      bs[r * BS + c] = (r < nj && c < E) ? b[(j0 + r) * E + c] : 0.0f;
    }
    for (int r = tid; r < BN; r += THREADS) yn[r] = r < nj ? yn_g[j0 + r] : 0.0f;
    __syncthreads();
    /* <x_i, y_j> for the warp's 16 rows and the tile (B = Y^T: B[k][n] = ys[n][k]) */
    float s[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
      for (int q = 0; q < 4; q++) s[nt][q] = 0.0f;
    kt_mma_tiles<BN / 8>(s, xw, XS, ys, 1, XS, DP, g, t);
    /* K_ij from the accumulator fragments (rows g, g + 8; columns 2t, 2t + 1);
       0 past the tile's last point. The clamp keeps NaN (a comparison). */
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
      for (int q = 0; q < 4; q++) {
        const int r = g + (q >> 1) * 8, c = nt * 8 + 2 * t + (q & 1);
        const float v = xn[warp * 16 + r] + yn[c] - 2.0f * s[nt][q];
        const float d2 = v < 0.0f ? 0.0f : v;
        kw[r * KS + c] = c < nj ? kt_exp2f(c2 * d2) : 0.0f;
      }
    __syncwarp(); /* a warp reads back only its own rows of ks */
#if KT_MMA_PRODUCT
    float part[EP / 8][4];
#pragma unroll
    for (int et = 0; et < EP / 8; et++)
      for (int q = 0; q < 4; q++) part[et][q] = 0.0f;
    kt_mma_tiles<EP / 8>(part, kw, KS, bs, BS, 1, BN, g, t);
    /* a tile's terms in float, folded into double once per tile */
#pragma unroll
    for (int et = 0; et < EP / 8; et++)
      for (int q = 0; q < 4; q++) acc[et][q] += part[et][q];
#else
    float part[(E + 1) / 2];
#pragma unroll
    for (int q = 0; q < (E + 1) / 2; q++) part[q] = 0.0f;
    for (int jj = 0; jj < BN; jj++) {
      const float kv = ks[row * KS + jj];
#pragma unroll
      for (int q = 0; q < (E + 1) / 2; q++)
        part[q] = fmaf(kv, bs[jj * BS + e0 + 2 * q], part[q]);
    }
#pragma unroll
    for (int q = 0; q < (E + 1) / 2; q++) acc[q] += part[q];
#endif
  }
#if KT_MMA_PRODUCT
#pragma unroll
  for (int et = 0; et < EP / 8; et++)
    for (int q = 0; q < 4; q++) {
      const long long i = i0 + warp * 16 + g + (q >> 1) * 8;
      const int c = et * 8 + 2 * t + (q & 1);
      if (i < nx && c < E) out[i * E + c] = (float)acc[et][q];
    }
#else
  if (i0 + row < nx)
    for (int q = 0; q < (E + 1) / 2; q++)
      if (e0 + 2 * q < E) out[(i0 + row) * E + e0 + 2 * q] = (float)acc[q];
#endif
}
