/* kerneltools generated block-sparse kernel: ${title}
 * key ${key}
 */
#include <tgmath.h>
#include <stdint.h>

${preamble}
#define KT_PARALLEL_PAIRS 1048576
${c_runtime}

/* The many-column Sum K_ij * B_j over block-sparse pairs: per block of IB
 * rows and per tile of an interval, K for RB rows at a time into kb (they
 * share each j-vector's loads), then kb times the tile's rows of B (bq:
 * row-major, sorted, columns padded) by the micro-kernel of the dense kernel.
 * i-variables are row-major (n, d), rows in sorted order; j-variables are
 * (d, js), sorted; imap: the caller's index of each sorted output row.
 * blk[4 b .. 4 b + 3] = r0, r1, v0, v1 of output block b;
 * red[2 v], red[2 v + 1]: interval v of the reduced index. */
void kt_kernel(int64_t nblk, const int64_t *blk, const int64_t *red,
               const int64_t *jmap, const int64_t *imap, int64_t js,
               int64_t npairs, void **args, void **outs) {
${pointers}
  kt_state *restrict states = (kt_state *)outs[${n_outs}];
${p_code}
  #pragma omp parallel for schedule(dynamic, 1) if (kt_parallel && npairs > KT_PARALLEL_PAIRS)
  for (int64_t ob = 0; ob < nblk; ob++) {
    const int64_t r0 = blk[4 * ob], r1 = blk[4 * ob + 1];
    const int64_t v0 = blk[4 * ob + 2], v1 = blk[4 * ob + 3];
${block_setup}
    for (int64_t i0 = r0; i0 < r1; i0 += IB) {
      const int64_t ni = (r1 - i0 < IB) ? r1 - i0 : IB;
      kt_state *st = states + i0;
      for (int64_t ii = 0; ii < ni; ii++) {
        kt_state *S = &st[ii];
${init}
      }
      for (int64_t iv = v0; iv < v1; iv++) {
        const int64_t jend = red[2 * iv + 1];
        for (int64_t j0 = red[2 * iv]; j0 < jend; j0 += TJ) {
          const int64_t nj = (jend - j0 < TJ) ? jend - j0 : TJ;
          const int64_t njv = (nj + KT_VL - 1) / KT_VL * KT_VL;
${tile_setup}
          /* RB rows at a time; a block's last rows past ni repeat its last
             row, their results unused */
          for (int64_t ii = 0; ii < ni; ii += RB) {
${i_code}
${tile}
          }${block_tail}
        }
      }
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = imap[i0 + ii]; /* outputs in the caller's order */
        kt_state *S = &st[ii];
${final}
      }
    }
  }
}
