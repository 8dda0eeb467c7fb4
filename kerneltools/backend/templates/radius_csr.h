/* kerneltools radius search over block-sparse cell pairs, to CSR rows
 * (see _cpu_radius.py); DIM features, double precision.
 * key ${key}
 *
 * Compiled with -ffp-contract=off: each squared distance is
 * ((x0 - y0)^2 + (x1 - y1)^2) + ..., rounded step by step in feature order,
 * the sum that scikit-learn's trees compute, so that a pair at the radius
 * falls on the same side. Vectorised across the points j, never across the
 * features: the rounding does not depend on the vector width.
 *
 * x: the sorted queries, row-major (n, DIM); yt: the sorted points,
 * transposed (DIM, ys); thr: the squared radius of each sorted query;
 * blk[4 b .. 4 b + 3] = r0, r1, v0, v1 of output block b; red[2 v],
 * red[2 v + 1]: interval v of sorted points; jmap / imap: the caller's index
 * of each sorted point / query; skip: the caller's index of the point that
 * each sorted query leaves out (-1: none). Each query lies in one block.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIM ${dim}
/* candidates per vectorised distance loop (the distances stay in L1) */
#define KT_CHUNK 256
/* rows of at most this many entries are sorted by ranks */
#define KT_SMALL_ROW 64

const char *kt_key(void) { return "${key}"; }

/* d[t] = |x - y_(j0 + t)|^2 for t < nj */
static inline void kt_sqdist(const double *restrict x, const double *restrict yt,
                             int64_t ys, int64_t j0, int64_t nj, double *restrict d) {
  #pragma omp simd
  for (int64_t t = 0; t < nj; t++) {
    double s = 0.0;
    for (int f = 0; f < DIM; f++) {
      const double u = x[f] - yt[f * ys + j0 + t];
      s += u * u;
    }
    d[t] = s;
  }
}

/* counts[imap[r]]: the points within thr[r] of query r (but skip[r]). */
void kt_radius_count(int64_t nblk, const int64_t *blk, const int64_t *red,
                     const double *x, const double *yt, int64_t ys,
                     const double *thr, const int64_t *jmap, const int64_t *imap,
                     const int64_t *skip, int threads, int64_t *counts) {
  #pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t b = 0; b < nblk; b++) {
    double d[KT_CHUNK];
    const int64_t *B = blk + 4 * b;
    for (int64_t r = B[0]; r < B[1]; r++) {
      const double *xr = x + r * DIM, t = thr[r];
      const int64_t self = skip[r];
      int64_t c = 0;
      for (int64_t v = B[2]; v < B[3]; v++) {
        for (int64_t j0 = red[2 * v]; j0 < red[2 * v + 1]; j0 += KT_CHUNK) {
          const int64_t left = red[2 * v + 1] - j0;
          const int64_t nj = left < KT_CHUNK ? left : KT_CHUNK;
          kt_sqdist(xr, yt, ys, j0, nj, d);
          #pragma omp simd reduction(+:c)
          for (int64_t u = 0; u < nj; u++)
            c += (d[u] <= t) & (jmap[j0 + u] != self);
        }
      }
      counts[imap[r]] = c;
    }
  }
}

typedef struct { double d; int64_t i; } kt_entry;

static int kt_by_index(const void *a, const void *b) {
  const int64_t p = ((const kt_entry *)a)->i, q = ((const kt_entry *)b)->i;
  return (p > q) - (p < q);
}

static int kt_by_distance(const void *a, const void *b) {
  const kt_entry *p = (const kt_entry *)a, *q = (const kt_entry *)b;
  if (p->d != q->d) return p->d < q->d ? -1 : 1;
  return (p->i > q->i) - (p->i < q->i);
}

/* (d[k], i[k]) before (d[l], i[l]) */
static inline int kt_before(const double *d, const int64_t *i, int64_t k, int64_t l,
                            int by_distance) {
  if (by_distance && d[k] != d[l]) return d[k] < d[l];
  return i[k] < i[l];
}

/* Sort the n entries (d, i) of a row: by index, or by distance then index
 * (indices are distinct). A short row by ranks: each entry's rank counts
 * the entries before it, a vectorised loop without branches (an insertion
 * sort mispredicts about once per move); a long one by qsort. Returns 0, or
 * -1 if a long row's buffer could not be allocated. */
static int kt_sort_row(double *d, int64_t *i, int64_t n, int by_distance) {
  if (n <= KT_SMALL_ROW) {
    double td[KT_SMALL_ROW];
    int64_t ti[KT_SMALL_ROW];
    memcpy(td, d, (size_t)n * sizeof(double));
    memcpy(ti, i, (size_t)n * sizeof(int64_t));
    for (int64_t a = 0; a < n; a++) {
      const double da = td[a];
      const int64_t ia = ti[a];
      int64_t rank = 0;
      if (by_distance) {
        #pragma omp simd reduction(+:rank)
        for (int64_t b = 0; b < n; b++)
          rank += (td[b] < da) | ((td[b] == da) & (ti[b] < ia));
      } else {
        #pragma omp simd reduction(+:rank)
        for (int64_t b = 0; b < n; b++) rank += ti[b] < ia;
      }
      d[rank] = da;
      i[rank] = ia;
    }
    return 0;
  }
  int sorted = 1;
  for (int64_t k = 1; k < n && sorted; k++) sorted = kt_before(d, i, k - 1, k, by_distance);
  if (sorted) return 0;
  kt_entry *e = (kt_entry *)malloc((size_t)n * sizeof(kt_entry));
  if (e == NULL) return -1;
  for (int64_t k = 0; k < n; k++) { e[k].d = d[k]; e[k].i = i[k]; }
  qsort(e, (size_t)n, sizeof(kt_entry), by_distance ? kt_by_distance : kt_by_index);
  for (int64_t k = 0; k < n; k++) { d[k] = e[k].d; i[k] = e[k].i; }
  free(e);
  return 0;
}

/* The CSR rows of the queries in the caller's order: query imap[r] writes
 * its squared distances and the caller's indices jmap of its points at
 * indptr[imap[r]] .. indptr[imap[r] + 1] (the counts of kt_radius_count),
 * sorted by index or (by_distance) by distance, ties by index. Returns the
 * number of rows whose entries did not match their count (0: all did) or
 * -1 when memory ran out; never writes outside a row's slice. */
int64_t kt_radius_fill(int64_t nblk, const int64_t *blk, const int64_t *red,
                       const double *x, const double *yt, int64_t ys,
                       const double *thr, const int64_t *jmap, const int64_t *imap,
                       const int64_t *skip, int threads, const int64_t *indptr,
                       int by_distance, double *out_d, int64_t *out_i) {
  int64_t bad = 0, oom = 0;
  #pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1) \
      reduction(+:bad, oom)
  for (int64_t b = 0; b < nblk; b++) {
    double d[KT_CHUNK], hit_d[KT_CHUNK];
    int64_t hit_i[KT_CHUNK];
    const int64_t *B = blk + 4 * b;
    for (int64_t r = B[0]; r < B[1]; r++) {
      const double *xr = x + r * DIM, t = thr[r];
      const int64_t self = skip[r];
      const int64_t start = indptr[imap[r]], end = indptr[imap[r] + 1];
      int64_t pos = start;
      for (int64_t v = B[2]; v < B[3]; v++) {
        for (int64_t j0 = red[2 * v]; j0 < red[2 * v + 1]; j0 += KT_CHUNK) {
          const int64_t left = red[2 * v + 1] - j0;
          const int64_t nj = left < KT_CHUNK ? left : KT_CHUNK;
          kt_sqdist(xr, yt, ys, j0, nj, d);
          /* the chunk's entries: bit masks of 64 tests (vectorised), then
           * their set bits (few: most candidates lie beyond the radius) */
          int64_t k = 0;
          for (int64_t u0 = 0; u0 < nj; u0 += 64) {
            const int64_t nu = nj - u0 < 64 ? nj - u0 : 64;
            uint64_t m = 0;
            #pragma omp simd reduction(|:m)
            for (int64_t u = 0; u < nu; u++) m |= (uint64_t)(d[u0 + u] <= t) << u;
            while (m) {
              const int64_t u = u0 + __builtin_ctzll(m);
              m &= m - 1;
              hit_d[k] = d[u];
              hit_i[k] = jmap[j0 + u];
              k += hit_i[k] != self;
            }
          }
          if (k > 0 && pos + k <= end) {
            memcpy(out_d + pos, hit_d, (size_t)k * sizeof(double));
            memcpy(out_i + pos, hit_i, (size_t)k * sizeof(int64_t));
          }
          pos += k;
        }
      }
      if (pos != end) {
        bad++;
        continue;
      }
      if (kt_sort_row(out_d + start, out_i + start, end - start, by_distance)) oom++;
    }
  }
  return oom ? -1 : bad;
}
