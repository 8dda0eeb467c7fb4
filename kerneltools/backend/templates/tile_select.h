/* Running selection of each row's K smallest values over tiles of columns
   (kerneltools/backend/cpu/_select.py), and the exact re-ranking of the
   candidates it keeps. real_t (the tiles' type) is #defined before this
   text. No OpenMP: the caller runs one row block per thread. */
#include <stdint.h>
#include <string.h>
#include <math.h>

const char *kt_key(void) { return "${key}"; }

/* The number of values a[q] <= x, q < n (NaN never counts). */
static inline int64_t count_le(const real_t *a, int64_t n, real_t x) {
  int64_t m = 0;
  #pragma omp simd reduction(+:m)
  for (int64_t q = 0; q < n; q++) m += a[q] <= x;
  return m;
}

#if defined(__AVX512F__) && KT_TILE_DOUBLE
#include <immintrin.h>
/* count_le by 8 lanes: a mask comparison and a popcount each (the
   reduction of the generic loop goes through memory). */
static inline int64_t count_le8(const double *a, int64_t n, double x) {
  const __m512d v = _mm512_set1_pd(x);
  int64_t m = 0, q = 0;
  for (; q + 8 <= n; q += 8)
    m += __builtin_popcount(_mm512_cmp_pd_mask(_mm512_loadu_pd(a + q), v, _CMP_LE_OQ));
  if (q < n) {
    const __mmask8 in = (__mmask8)((1u << (n - q)) - 1);
    m += __builtin_popcount(
        _mm512_mask_cmp_pd_mask(in, _mm512_maskz_loadu_pd(in, a + q), v, _CMP_LE_OQ));
  }
  return m;
}
#define count_le count_le8
#endif

/* An upper bound of the k-th smallest (1-based) of a[0..n), within
   (max - min) / 2^12 of it, or sooner one at most which k to k + extra
   values lie: a bisection on the value by vector counts (no branch per
   value to mispredict, as a quickselect's); the largest value where fewer
   than k are not NaN. (extra = 8 in the cell K-min, whose compactions
   only have to leave few values: its K-min of 10^5 points in 3-D, K =
   91, one thread, 0.517 -> 0.488 CPU s, median of 15.) */
static real_t kth_bound(const real_t *a, int64_t n, int64_t k, int64_t extra) {
  real_t lo = (real_t)INFINITY, hi = -(real_t)INFINITY;
  #pragma omp simd reduction(min:lo) reduction(max:hi)
  for (int64_t q = 0; q < n; q++) {
    lo = a[q] < lo ? a[q] : lo;
    hi = a[q] > hi ? a[q] : hi;
  }
  if (count_le(a, n, lo) >= k) return lo;
  for (int it = 0; it < 12; it++) { /* count(<= lo) < k <= count(<= hi) */
    const real_t mid = lo / 2 + hi / 2;
    if (!(mid > lo && mid < hi)) break;
    const int64_t below = count_le(a, n, mid);
    if (below >= k) {
      hi = mid;
      if (below <= k + extra) break; /* close enough in count */
    } else {
      lo = mid;
    }
  }
  return hi;
}

/* The least real_t >= t (t a double). */
static real_t round_up(double t) {
  real_t r = (real_t)t;
  if ((double)r < t) r = nextafter(r, (real_t)INFINITY);
  return r;
}

/* Row state: ``cnt`` kept (value, column) pairs in ``v``, ``c``, every
   value seen at most ``thr`` among them. Compaction: thr becomes (if
   lower) a bound of the K-th smallest kept value plus the row's slack
   (kth_bound, with ``extra``), and the pairs above it are dropped, without
   a branch per pair (the kept ratio is unpredictable). Returns the new
   count. */
static int64_t compact(real_t *v, int64_t *c, int64_t cnt, int64_t k, double slack,
                       real_t *thr, int64_t extra) {
  const real_t t = round_up((double)kth_bound(v, cnt, k, extra) + slack);
  if (t < *thr) *thr = t;
  int64_t m = 0;
  const real_t th = *thr;
  for (int64_t q = 0; q < cnt; q++) {
    const real_t x = v[q];
    const int64_t y = c[q];
    v[m] = x;
    c[m] = y;
    m += x <= th;
  }
  return m;
}

/* The bits of the values e[l] <= t, l < nb <= 64: a few vector
   comparisons (lanes past nb never loaded). */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline uint64_t below64(const real_t *e, real_t t, int nb) {
  uint64_t m = 0;
#if KT_TILE_DOUBLE
  const __m512d v = _mm512_set1_pd(t);
  for (int q = 0; q < 8 && 8 * q < nb; q++) {
    const int w = nb - 8 * q;
    const __mmask8 in = w >= 8 ? (__mmask8)0xff : (__mmask8)((1u << w) - 1);
    const __m512d x = _mm512_maskz_loadu_pd(in, e + 8 * q);
    m |= (uint64_t)_mm512_mask_cmp_pd_mask(in, x, v, _CMP_LE_OQ) << (8 * q);
  }
#else
  const __m512 v = _mm512_set1_ps(t);
  for (int q = 0; q < 4 && 16 * q < nb; q++) {
    const int w = nb - 16 * q;
    const __mmask16 in = w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(in, e + 16 * q);
    m |= (uint64_t)_mm512_mask_cmp_ps_mask(in, x, v, _CMP_LE_OQ) << (16 * q);
  }
#endif
  return m;
}
#else
static inline uint64_t below64(const real_t *e, real_t t, int nb) {
  uint64_t m = 0;
  if (nb == 64) {
    #pragma omp simd reduction(|:m)
    for (int l = 0; l < 64; l++) m |= (uint64_t)(e[l] <= t) << l;
  } else {
    for (int l = 0; l < nb; l++) m |= (uint64_t)(e[l] <= t) << l;
  }
  return m;
}
#endif

/* Appends the values e[l] whose bit l of m is set (l < 16) to v, their
   columns (cm[l], or base + l without cm) to c; returns their number. With
   AVX-512: compressed in registers and stored whole (16 slots of room
   needed; a compress straight to memory is slow on some CPUs), lanes
   outside m never loaded. */
static inline int append16(real_t *v, int64_t *c, const real_t *e, const int64_t *cm,
                           int64_t base, uint32_t m) {
#if defined(__AVX512F__)
  const __mmask8 m0 = (__mmask8)m, m1 = (__mmask8)(m >> 8);
  const int n0 = __builtin_popcount(m & 0xffu);
  __m512i c0, c1;
  if (cm) {
    c0 = _mm512_maskz_loadu_epi64(m0, cm);
    c1 = _mm512_maskz_loadu_epi64(m1, cm + 8);
  } else {
    c0 = _mm512_add_epi64(_mm512_set1_epi64(base),
                          _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    c1 = _mm512_add_epi64(c0, _mm512_set1_epi64(8));
  }
#if KT_TILE_DOUBLE
  _mm512_storeu_pd(v, _mm512_maskz_compress_pd(m0, _mm512_maskz_loadu_pd(m0, e)));
  _mm512_storeu_pd(v + n0,
                   _mm512_maskz_compress_pd(m1, _mm512_maskz_loadu_pd(m1, e + 8)));
#else
  const __mmask16 mm = (__mmask16)m;
  _mm512_storeu_ps(v, _mm512_maskz_compress_ps(mm, _mm512_maskz_loadu_ps(mm, e)));
#endif
  _mm512_storeu_si512(c, _mm512_maskz_compress_epi64(m0, c0));
  _mm512_storeu_si512(c + n0, _mm512_maskz_compress_epi64(m1, c1));
  return __builtin_popcount(m);
#else
  int n = 0;
  for (; m; m &= m - 1) {
    const int l = __builtin_ctz(m);
    v[n] = e[l];
    c[n++] = cm ? cm[l] : base + l;
  }
  return n;
#endif
}

/* One tile: rows q < nr of ``E`` (row stride lde), the state's rows
   rows[q] (q without ``rows``), columns cmap[l] (first + l without
   ``cmap``), l < nc. The test of 64 values against the threshold is a few
   vector comparisons; the values that pass are appended 16 columns at a
   time. A row with fewer than 16 free slots is compacted first; one whose
   compaction frees fewer than half of its free slots (a band of values
   within the slack too dense for the capacity, cap >= k + 32) is flagged
   in ``over`` and skipped from then on: the caller searches it another
   way. Values that passed a threshold since lowered may be appended too:
   the next compaction drops them. */
void kt_select(int64_t nr, int64_t nc, const real_t *E, int64_t lde, int64_t first,
               const int64_t *rows, const int64_t *cmap, int64_t k, int64_t cap,
               real_t *vals, int64_t *cols, int64_t *cnt, real_t *thr,
               const double *slack, uint8_t *over) {
  for (int64_t q = 0; q < nr; q++) {
    const int64_t r = rows ? rows[q] : q;
    if (over[r]) continue;
    const real_t *e = E + q * lde;
    real_t *v = vals + r * cap;
    int64_t *c = cols + r * cap;
    int64_t n = cnt[r];
    real_t t = thr[r];
    if (t == (real_t)INFINITY && nc >= k && n + nc > cap) {
      /* no threshold yet, and the tile would fill the slots: this tile's
         K-th smallest bounds every later K-th */
      t = round_up((double)kth_bound(e, nc, k, 0) + slack[r]);
    }
    for (int64_t j0 = 0; j0 < nc && n >= 0; j0 += 64) {
      uint64_t mask = below64(e + j0, t, nc - j0 < 64 ? (int)(nc - j0) : 64);
      while (mask) {
        const int s = __builtin_ctzll(mask) & ~15; /* the lowest bit's 16 */
        uint32_t m = (uint32_t)(mask >> s) & 0xffffu;
        mask &= ~((uint64_t)0xffffu << s);
        if (n + 16 > cap) {
          n = compact(v, c, n, k, slack[r], &t, 0);
          if (n > k + (cap - k) / 2) { n = -1; break; }
          for (uint32_t b = m; b; b &= b - 1) { /* again, at the new threshold */
            const int l = __builtin_ctz(b);
            if (!(e[j0 + s + l] <= t)) m &= ~(1u << l);
          }
        }
        n += append16(v + n, c + n, e + j0 + s, cmap ? cmap + j0 + s : 0,
                      first + j0 + s, m);
      }
    }
    if (n < 0) { over[r] = 1; n = 0; }
    cnt[r] = n;
    thr[r] = t;
  }
}

typedef struct { double d; int64_t l; } kt_pair;

static inline int pair_before(kt_pair a, kt_pair b) {
  return a.d < b.d || (a.d == b.d && a.l < b.l);
}

/* The first min(n, k) of the n (distance, label) pairs ``p`` by distance,
   then label (labels distinct), into od, oi: an insertion sort in runs of
   SORT_RUN (1.5 us for 95 pairs: faster here than merging), then
   bottom-up merges (n log n for large K; ``tmp``: room for n pairs). */
#define SORT_RUN 256
static void order_pairs(int64_t n, int64_t k, kt_pair *p, kt_pair *tmp, double *od,
                        int64_t *oi) {
  for (int64_t s = 0; s < n; s += SORT_RUN) {
    const int64_t e = s + SORT_RUN < n ? s + SORT_RUN : n;
    for (int64_t a = s + 1; a < e; a++) {
      const kt_pair x = p[a];
      int64_t at = a;
      while (at > s && pair_before(x, p[at - 1])) { p[at] = p[at - 1]; at--; }
      p[at] = x;
    }
  }
  kt_pair *src = p, *dst = tmp;
  for (int64_t w = SORT_RUN; w < n; w *= 2) {
    for (int64_t s = 0; s < n; s += 2 * w) {
      int64_t i = s, j = s + w < n ? s + w : n, o = s;
      const int64_t mid = j, end = s + 2 * w < n ? s + 2 * w : n;
      while (i < mid && j < end)
        dst[o++] = pair_before(src[j], src[i]) ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < end) dst[o++] = src[j++];
    }
    kt_pair *t = src;
    src = dst;
    dst = t;
  }
  for (int64_t q = 0; q < n && q < k; q++) { od[q] = src[q].d; oi[q] = src[q].l; }
}

/* The K nearest of each row's candidates by exact squared distance (direct
   differences in double; equal distances by label): rows r < nr of X
   (nr x d), candidates cols[r * cap + q], q < cnt[r], rows of Y (. x d),
   labelled lab[column] (the column itself without ``lab``). The
   candidates are first cut to those within the slack of the K-th smallest
   tile value (the last compaction may be far behind). The sums over the d
   features run in any order (vectorised). Rows flagged in ``over`` are
   left as they are. ``pairs``: room for 2 cap (distance, label) pairs. */
void kt_rerank(int64_t nr, int64_t d, int64_t k, int64_t cap, const double *X,
               const double *Y, const int64_t *lab, real_t *vals, int64_t *cols,
               int64_t *cnt, real_t *thr, const double *slack, const uint8_t *over,
               double *out_d, int64_t *out_i, kt_pair *pairs) {
  for (int64_t r = 0; r < nr; r++) {
    if (over[r]) continue;
    const double *x = X + r * d;
    int64_t *c = cols + r * cap;
    int64_t n = cnt[r];
    if (n > k) n = compact(vals + r * cap, c, n, k, slack[r], thr + r, 0);
    for (int64_t q = 0; q < n; q++) {
      const double *y = Y + c[q] * d;
      double s = 0;
      #pragma omp simd reduction(+:s)
      for (int64_t f = 0; f < d; f++) s += (x[f] - y[f]) * (x[f] - y[f]);
      pairs[q].d = s;
      pairs[q].l = lab ? lab[c[q]] : c[q];
    }
    cnt[r] = n;
    order_pairs(n, k, pairs, pairs + cap, out_d + r * k, out_i + r * k);
  }
}

#if KT_TILE_DOUBLE
/* Keeps the k smallest of the n kept (value, column) pairs by value, then
   label lab[column], where compacting left too many (values tied at the
   threshold: duplicated points): equal values still pass the threshold
   later, and the next compaction or trim keeps the k first again. ``tmp``:
   room for 2 n pairs. Returns k. */
static int64_t trim_ties(real_t *v, int64_t *c, int64_t n, int64_t k,
                         const int64_t *lab, kt_pair *tmp) {
  for (int64_t u = 0; u < n; u++) { tmp[u].d = v[u]; tmp[u].l = u; }
  for (int64_t a = 1; a < n; a++) { /* insertion by (value, label) */
    const kt_pair x = tmp[a];
    int64_t at = a;
    while (at > 0 && (tmp[at - 1].d > x.d || (tmp[at - 1].d == x.d
                                              && lab[c[tmp[at - 1].l]] > lab[c[x.l]]))) {
      tmp[at] = tmp[at - 1];
      at--;
    }
    tmp[at] = x;
  }
  for (int64_t q = 0; q < k; q++) {
    tmp[n + q].d = v[tmp[q].l];
    tmp[n + q].l = c[tmp[q].l];
  }
  for (int64_t q = 0; q < k; q++) { v[q] = tmp[n + q].d; c[q] = tmp[n + q].l; }
  return k;
}

/* The squared smallest distances between the box [lo, hi] (d features;
   a point when lo = hi) and the w <= 64 boxes [blo[b], bhi[b]], b =
   cells[u]: the per-feature gaps squared, summed in feature order, into
   g2[u]; feature by feature over the boxes (vector gathers, no branch per
   box and feature). */
static inline void box_gaps(int w, const int64_t *cells, int64_t d, const real_t *lo,
                            const real_t *hi, const real_t *blo, const real_t *bhi,
                            real_t *g2) {
  for (int u = 0; u < w; u++) g2[u] = 0;
  for (int64_t f = 0; f < d; f++) {
    const real_t lf = lo[f], hf = hi[f];
    #pragma omp simd
    for (int u = 0; u < w; u++) {
      const int64_t bf = cells[u] * d + f;
      const real_t below = blo[bf] - hf, above = lf - bhi[bf];
      const real_t g = below > above ? below : above;
      g2[u] += g > 0 ? g * g : 0;
    }
  }
}

/* order_pairs for the n values v[u] >= 0 (finite) labelled lab[c[u]]: a
   counting sort into N_BUCKETS buckets of equal width up to the largest
   value, then an insertion sort by (value, label) of the nearly ordered
   result (a few short moves each; the insertion alone made ~n^2 / 4 for
   K = 91, 0.2 of the 0.8 CPU s of the 10^5-point K-min in 3-D). ``p``,
   ``tmp``: room for n pairs each. */
#define N_BUCKETS 128
#define BUCKETS_MAX_N 2048
static void order_by_buckets(int64_t n, int64_t k, const double *v, const int64_t *c,
                             const int64_t *lab, kt_pair *p, kt_pair *tmp, double *od,
                             int64_t *oi) {
  double top = 0;
  #pragma omp simd reduction(max:top)
  for (int64_t u = 0; u < n; u++) top = v[u] > top ? v[u] : top;
  const double scale = top > 0 ? N_BUCKETS / top : 0;
  int64_t at[N_BUCKETS + 1] = {0};
  for (int64_t u = 0; u < n; u++) {
    const int64_t b = (int64_t)(v[u] * scale);
    at[(b < N_BUCKETS ? b : N_BUCKETS - 1) + 1]++;
    tmp[u].d = v[u];
    tmp[u].l = lab[c[u]];
  }
  for (int b = 0; b < N_BUCKETS; b++) at[b + 1] += at[b];
  for (int64_t u = 0; u < n; u++) {
    const int64_t b = (int64_t)(tmp[u].d * scale);
    p[at[b < N_BUCKETS ? b : N_BUCKETS - 1]++] = tmp[u];
  }
  for (int64_t a = 1; a < n; a++) {
    const kt_pair x = p[a];
    int64_t to = a;
    while (to > 0 && pair_before(x, p[to - 1])) { p[to] = p[to - 1]; to--; }
    p[to] = x;
  }
  for (int64_t q = 0; q < n && q < k; q++) { od[q] = p[q].d; oi[q] = p[q].l; }
}

/* The squared distances e[l], l < 16, from x to the points l of y (D
   features, y[f * m + l]): the feature loop of kt_cells_kmin with D a
   constant where it is inlined (unrolled, the sums in the same order; the
   K-min of 10^5 points in 3-D, K = 91, one thread, 0.47 -> 0.42 CPU s,
   median of 9). */
static inline void dist16(const real_t *x, const real_t *y, int64_t m, int D,
                          real_t *e) {
  #pragma omp simd
  for (int l = 0; l < 16; l++) {
    real_t s = 0;
    for (int f = 0; f < D; f++) s += (x[f] - y[f * m + l]) * (x[f] - y[f * m + l]);
    e[l] = s;
  }
}

/* The K nearest of each query among the fitted points of its cell's pairs
   (block-sparse, low dimension): the squared distances computed here, by
   direct differences in real_t (double), 16 points at a time, and
   selected as kt_select does, with no slack (the values are the final
   ones; ties past the slots trimmed by label, trim_ties); then ordered by
   (distance, label). Queries qs[c] <= q < qs[c + 1]
   of X (n x d, row-major) belong to cell c, which visits the fitted cells
   pc[p], ps[c] <= p < ps[c + 1], nearest first: fitted cell b is
   [cr[2 b], cr[2 b + 1]) (positions in Yt, the fitted points d x m by
   feature, labelled lab) with the box blo[b], bhi[b] (d each), skipped
   by a query whose threshold its box's distance passes (no point in it
   would pass; the distance shrunk by 1e-12 for its rounding). Missing
   slots (fewer than k points visited): +inf and -1. Query q's results go
   to row orow[q] of out_d, out_i (n x k). ``v``, ``c``, ``pairs``: room
   for cap values, cap columns and 2 cap pairs. */
void kt_cells_kmin(int64_t c0, int64_t c1, const int64_t *qs, const int64_t *ps,
                   const int64_t *pc, const int64_t *cr, const real_t *blo,
                   const real_t *bhi, const real_t *X, int64_t d, const real_t *Yt,
                   int64_t m, const int64_t *lab, int64_t k, int64_t cap,
                   const int64_t *orow, real_t *out_d, int64_t *out_i, real_t *v,
                   int64_t *c, kt_pair *pairs) {
  for (int64_t cell = c0; cell < c1; cell++) {
    for (int64_t q = qs[cell]; q < qs[cell + 1]; q++) {
      const real_t *x = X + q * d;
      const int64_t o = orow[q] * k;
      real_t t = (real_t)INFINITY;
      if (q > qs[cell]) {
        /* the previous query of the cell (a neighbour along the Z-order)
           visited the same cells: its K nearest are within its K-th
           distance plus the distance between the two queries (widened by
           far more than their rounding), a first threshold */
        const real_t *xp = X + (q - 1) * d;
        double e2 = 0;
        for (int64_t f = 0; f < d; f++) e2 += (x[f] - xp[f]) * (x[f] - xp[f]);
        const double kp = out_d[orow[q - 1] * k + k - 1];
        if (kp < INFINITY) {
          const double r = sqrt(kp) + sqrt(e2);
          t = round_up(r * r * (1 + 1e-9) + 1e-300);
        }
      }
      int64_t n = 0;
      for (int64_t p0 = ps[cell]; p0 < ps[cell + 1]; p0 += 64) {
        const int w = ps[cell + 1] - p0 < 64 ? (int)(ps[cell + 1] - p0) : 64;
        real_t g2[64];
        box_gaps(w, pc + p0, d, x, x, blo, bhi, g2);
        for (int u = 0; u < w; u++) {
        const int64_t b = pc[p0 + u];
        /* the box's distance against the threshold (+inf: none) */
        if (g2[u] * (1 - 1e-12) > t) continue;
        for (int64_t j0 = cr[2 * b]; j0 < cr[2 * b + 1]; j0 += 16) {
          const int nb = cr[2 * b + 1] - j0 < 16 ? (int)(cr[2 * b + 1] - j0) : 16;
          real_t e[16];
          if (nb == 16 && d == 3) {
            dist16(x, Yt + j0, m, 3, e);
          } else if (nb == 16 && d == 2) {
            dist16(x, Yt + j0, m, 2, e);
          } else {
          for (int l = 0; l < 16; l++) e[l] = 0;
          for (int64_t f = 0; f < d; f++) {
            const real_t *yf = Yt + f * m + j0;
            const real_t xf = x[f];
            if (nb == 16) {
              #pragma omp simd
              for (int l = 0; l < 16; l++) e[l] += (xf - yf[l]) * (xf - yf[l]);
            } else {
              for (int l = 0; l < nb; l++) e[l] += (xf - yf[l]) * (xf - yf[l]);
            }
          }
          }
          uint32_t mask = (uint32_t)below64(e, t, nb);
          if (!mask) continue;
          if (n + 16 > cap) {
            n = compact(v, c, n, k, 0.0, &t, 8);
            if (n + 16 > cap) n = trim_ties(v, c, n, k, lab, pairs);
            mask &= (uint32_t)below64(e, t, nb);
          }
          n += append16(v + n, c + n, e, 0, j0, mask);
          if (n >= k && t == (real_t)INFINITY) n = compact(v, c, n, k, 0.0, &t, 8);
        }
        }
      }
      if (n > k) n = compact(v, c, n, k, 0.0, &t, 8);
      if (n <= BUCKETS_MAX_N) {
        order_by_buckets(n, k, v, c, lab, pairs, pairs + cap, out_d + o, out_i + o);
      } else {
        for (int64_t u = 0; u < n; u++) { pairs[u].d = v[u]; pairs[u].l = lab[c[u]]; }
        order_pairs(n, k, pairs, pairs + cap, out_d + o, out_i + o);
      }
      for (int64_t u = n; u < k; u++) {
        out_d[o + u] = (real_t)INFINITY;
        out_i[o + u] = -1;
      }
    }
  }
}
/* The pairs of boxes within a radius (the pruned k-NN's cell pairs):
   box a (lo[a], hi[a], d features each), in group g when gf[g] <= a <
   gf[g + 1], is paired with the candidates cb[p], gs[g] <= p < gs[g + 1],
   of its group (boxes blo[b], bhi[b]) whose box distance is at most
   rad[a]: the largest per-feature gaps, squared, summed in feature order
   and rooted, as the NumPy reference (_cpu_select._box_pairs_numpy). Box
   a's pairs go to ob[os[a]], ..., by increasing distance (an insertion:
   stable, and short, the candidates coming nearly in order), os[a + 1]
   set; ``od``: room for as many distances. The group's candidate boxes are
   first gathered feature by feature into ``soa`` (room for 2 d times the
   most candidates of a group), once for its boxes, which then read them
   in order (measured, 10^5 blobs, D = 3: 0.034 -> 0.021 CPU s for 1.44M
   box x candidate tests). Returns the pairs' number. */
int64_t kt_box_pairs(int64_t ng, const int64_t *gf, const int64_t *gs, const int64_t *cb,
                     int64_t d, const double *lo, const double *hi, const double *rad,
                     const double *blo, const double *bhi, int64_t *os, int64_t *ob,
                     double *od, double *soa) {
  int64_t o = 0;
  os[gf[0]] = 0;
  for (int64_t g = 0; g < ng; g++) {
    const int64_t nc = gs[g + 1] - gs[g];
    const int64_t *cand = cb + gs[g];
    double *slo = soa, *shi = soa + d * nc;
    if (gf[g + 1] > gf[g]) {
      for (int64_t f = 0; f < d; f++)
        for (int64_t u = 0; u < nc; u++) {
          slo[f * nc + u] = blo[cand[u] * d + f];
          shi[f * nc + u] = bhi[cand[u] * d + f];
        }
    }
    for (int64_t a = gf[g]; a < gf[g + 1]; a++) {
      const int64_t start = o;
      const double r = rad[a];
      for (int64_t p0 = 0; p0 < nc; p0 += 64) {
        const int w = nc - p0 < 64 ? (int)(nc - p0) : 64;
        double acc[64];
        int pass[64];
        for (int u = 0; u < w; u++) acc[u] = 0;
        for (int64_t f = 0; f < d; f++) {
          const double lf = lo[a * d + f], hf = hi[a * d + f];
          const double *cl = slo + f * nc + p0, *ch = shi + f * nc + p0;
          #pragma omp simd
          for (int u = 0; u < w; u++) {
            const double below = cl[u] - hf, above = lf - ch[u];
            const double gap = below > above ? below : above;
            acc[u] += gap > 0 ? gap * gap : 0;
          }
        }
        #pragma omp simd
        for (int u = 0; u < w; u++) acc[u] = sqrt(acc[u]);
        int np_ = 0;
        for (int u = 0; u < w; u++) { /* branchless: which pass */
          pass[np_] = u;
          np_ += acc[u] <= r;
        }
        for (int q = 0; q < np_; q++) {
          const int u = pass[q];
          const double dist = acc[u];
          int64_t at = o++;
          while (at > start && od[at - 1] > dist) {
            od[at] = od[at - 1];
            ob[at] = ob[at - 1];
            at--;
          }
          od[at] = dist;
          ob[at] = cand[p0 + u];
        }
      }
      os[a + 1] = o;
    }
  }
  return o;
}
#endif

