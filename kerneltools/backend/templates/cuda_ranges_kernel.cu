/* kerneltools generated block-sparse CUDA kernel: ${title}
 * key ${key}; ${scheme} scheme, ${rows} row(s) per thread, tile ${tj}
 */
${preamble}
#define KT_FINITE(x) ((x) - (x) == 0)
#define KT_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); v++)
/* (a, ja) before (b, jb): by value (NaN last), then by the caller's index */
#define KT_KLT(a, ja, b, jb) (KT_LT(a, b) || (!KT_LT(b, a) && (ja) < (jb)))
${exp_defs}
${red_defs}
#define TJ ${tj}
#define NC ${nc}

/* One thread block per task: task[4 b .. 4 b + 3] = r0, r1, v0, v1, rows
 * [r0, r1) (at most ${rows_block}) of sorted output positions and the
 * intervals red[v0:v1] of sorted reduced positions (red[2 v], red[2 v + 1]:
 * start and end of interval v). Variables are row-major (n, d) in sorted
 * order; jmap / imap: the caller's index of a sorted reduced position /
 * output row (arg-indices are the caller's, outputs written in its order). */
extern "C" __global__ void kt_kernel(const long long *__restrict__ task,
                                     const long long *__restrict__ red,
                                     const long long *__restrict__ jmap,
                                     const long long *__restrict__ imap${params}) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long r0 = task[4 * (long long)blockIdx.x], nx = task[4 * (long long)blockIdx.x + 1];
  const long long v0 = task[4 * (long long)blockIdx.x + 2], v1 = task[4 * (long long)blockIdx.x + 3];
  const long long i_first = r0 + threadIdx.x;
${rows_setup}
${p_code}
${i_code}
${init}
  /* threads past the task's rows load tiles and wait at the barriers only:
     whole warps of them skip the pair loop */
  const bool live = i0_raw < nx;
  for (long long iv = v0; iv < v1; iv++) {
    const long long jend = red[2 * iv + 1];
    for (long long j0 = red[2 * iv]; j0 < jend; j0 += TJ) {
      const int nj = (int)(jend - j0 < TJ ? jend - j0 : TJ);
${load}
      #pragma unroll ${unroll}
      for (int jj = 0; jj < (live ? nj : 0); jj++) {
${j_decl}${ij_code}
      }
${tile_end}
    }
  }
${final}
}
