/* kerneltools generated kernel: ${title}
 * key ${key}
 */
#include <tgmath.h>
#include <stdint.h>
#include <stdlib.h>

${preamble}
/* Below this many pairs (about a millisecond of work) one thread does it all:
   waking a team costs more, and far more when another process holds a core. */
#define KT_PARALLEL_PAIRS 1048576
${c_runtime}${helpers}

/* Reduces rows [r0, r1) over j in [0, ny) (the caller runs long reductions
 * by chunks of rows). i-variables are row-major (n, d);
 * j-variables are packed by tiles: tile t holds d x TJ values, component c of
 * point t * TJ + jj at [t * d * TJ + c * TJ + jj], zero-padded to whole tiles. */
void kt_kernel(int64_t r0, int64_t r1, int64_t ny, void **args, void **outs) {
${pointers}
  kt_state *restrict states = (kt_state *)outs[${n_outs}];
${p_code}
  const int64_t nblocks = (r1 - r0 + IB - 1) / IB;
  #pragma omp parallel for schedule(static) if (kt_parallel && (r1 - r0) * ny > KT_PARALLEL_PAIRS)
  for (int64_t ib = 0; ib < nblocks; ib++) {
    const int64_t i0 = r0 + ib * IB;
    const int64_t ni = (r1 - i0 < IB) ? r1 - i0 : IB;
    kt_state *st = states + i0; /* per-row states live in the caller's scratch */
    for (int64_t ii = 0; ii < ni; ii++) {
      kt_state *S = &st[ii];
${init}
    }
${block_setup}
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
${tile_setup}
      /* RB rows at a time share each j-vector (its loads and j-level values);
         a block's last rows past ni repeat its last row, their results unused */
      for (int64_t ii = 0; ii < ni; ii += RB) {
${i_code}
${tile}
      }${block_tail}
    }
    for (int64_t ii = 0; ii < ni; ii++) {
      const int64_t i = i0 + ii;
      kt_state *S = &st[ii];
${final}
    }
  }
${p_tail}}
