/* kerneltools generated CUDA kernel: ${title}
 * key ${key}; ${scheme} scheme, ${rows} row(s) per thread, tile ${tj}
 */
${preamble}
#define KT_FINITE(x) ((x) - (x) == 0)
#define KT_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); v++)
${exp_defs}
${red_defs}
#define TJ ${tj}
#define NC ${nc}

extern "C" __global__ void kt_kernel(const long long nx, const long long ny${params}) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long i_first = (long long)blockIdx.x * ${rows_block} + threadIdx.x;
${rows_setup}
${p_code}
${i_code}
${init}
  for (long long j0 = 0; j0 < ny; j0 += TJ) {
    const int nj = (int)(ny - j0 < TJ ? ny - j0 : TJ);
${load}
    #pragma unroll ${unroll}
    for (int jj = 0; jj < nj; jj++) {
${j_decl}${ij_code}
    }
${tile_end}
  }
${final}
}
