/* Running selection of each row's K smallest values over tiles of columns
   (kerneltools/backend/_cpu_select.py), and the exact re-ranking of the
   candidates it keeps. real_t (the tiles' type) is #defined before this
   text. No OpenMP: the caller runs one row block per thread. */
#include <stdint.h>
#include <string.h>
#include <math.h>

const char *kt_key(void) { return "${key}"; }

/* The k-th smallest (0-based) of a[0..n), a reordered (quickselect with a
   median-of-three pivot). Values are never NaN here: only values <= a
   threshold (a comparison NaN fails) are kept. */
static real_t kth_smallest(real_t *a, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (hi > lo) {
    const int64_t mid = lo + (hi - lo) / 2;
    real_t x = a[lo], y = a[mid], z = a[hi];
    real_t p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (a[i] < p) i++;
      while (a[j] > p) j--;
      if (i <= j) { const real_t t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k];
  }
  return a[k];
}

/* The least real_t >= t (t a double). */
static real_t round_up(double t) {
  real_t r = (real_t)t;
  if ((double)r < t) r = nextafter(r, (real_t)INFINITY);
  return r;
}

/* Row state: ``cnt`` kept (value, column) pairs in ``v``, ``c`` (capacity
   ``cap``), every value <= ``thr``. When full: thr becomes the K-th
   smallest kept value plus the row's slack, and the pairs above it are
   dropped. Returns the new count. */
static int64_t compact(real_t *v, int64_t *c, int64_t cnt, int64_t k, double slack,
                       real_t *thr, real_t *scratch) {
  memcpy(scratch, v, (size_t)cnt * sizeof(real_t));
  const real_t t = round_up((double)kth_smallest(scratch, cnt, k - 1) + slack);
  int64_t m = 0;
  for (int64_t q = 0; q < cnt; q++)
    if (v[q] <= t) { v[m] = v[q]; c[m] = c[q]; m++; }
  *thr = t;
  return m;
}

/* The bits of the values e[l] <= t, l < 64 (a few vector comparisons). */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline uint64_t below64(const real_t *e, real_t t) {
  uint64_t m = 0;
#if KT_TILE_DOUBLE
  const __m512d v = _mm512_set1_pd(t);
  for (int q = 0; q < 8; q++)
    m |= (uint64_t)_mm512_cmp_pd_mask(_mm512_loadu_pd(e + 8 * q), v, _CMP_LE_OQ)
         << (8 * q);
#else
  const __m512 v = _mm512_set1_ps(t);
  for (int q = 0; q < 4; q++)
    m |= (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(e + 16 * q), v, _CMP_LE_OQ)
         << (16 * q);
#endif
  return m;
}
#else
static inline uint64_t below64(const real_t *e, real_t t) {
  uint64_t m = 0;
  #pragma omp simd reduction(|:m)
  for (int l = 0; l < 64; l++) m |= (uint64_t)(e[l] <= t) << l;
  return m;
}
#endif

/* One tile: rows r < nr of ``E`` (row stride lde), columns first + l,
   l < nc. The test of 64 values against the threshold is a few vector
   comparisons; only its set bits are visited. A row whose compaction frees
   fewer than half of its free slots (a band of values within the slack too
   dense for the capacity) is flagged in ``over`` and skipped from then on:
   the caller searches it another way. */
void kt_select(int64_t nr, int64_t nc, const real_t *E, int64_t lde, int64_t first,
               int64_t k, int64_t cap, real_t *vals, int64_t *cols, int64_t *cnt,
               real_t *thr, const double *slack, uint8_t *over, real_t *scratch) {
  for (int64_t r = 0; r < nr; r++) {
    if (over[r]) continue;
    const real_t *e = E + r * lde;
    real_t *v = vals + r * cap;
    int64_t *c = cols + r * cap;
    int64_t n = cnt[r];
    real_t t = thr[r];
    for (int64_t j0 = 0; j0 < nc && n >= 0; j0 += 64) {
      uint64_t mask = 0;
      if (nc - j0 >= 64) {
        mask = below64(e + j0, t);
      } else {
        for (int l = 0; l < nc - j0; l++) mask |= (uint64_t)(e[j0 + l] <= t) << l;
      }
      while (mask) {
        const int l = __builtin_ctzll(mask);
        mask &= mask - 1;
        const real_t x = e[j0 + l];
        if (!(x <= t)) continue; /* the threshold dropped since the test */
        v[n] = x;
        c[n] = first + j0 + l;
        if (++n == cap) {
          n = compact(v, c, n, k, slack[r], &t, scratch);
          if (n > k + (cap - k) / 2) { n = -1; break; }
        }
      }
    }
    if (n < 0) { over[r] = 1; n = 0; }
    cnt[r] = n;
    thr[r] = t;
  }
}

/* The K nearest of each row's candidates by exact squared distance (direct
   differences in double; equal distances in column order): rows r < nr of
   X (nr x d), candidates cols[r * cap + q], q < cnt[r], rows of Y (. x d).
   The candidates are first cut to those within the slack of the K-th
   smallest tile value (the last compaction may be far behind). Rows
   flagged in ``over`` are left as they are. */
void kt_rerank(int64_t nr, int64_t d, int64_t k, int64_t cap, const double *X,
               const double *Y, real_t *vals, int64_t *cols, int64_t *cnt,
               real_t *thr, const double *slack, const uint8_t *over,
               double *out_d, int64_t *out_i, real_t *scratch, double *sd,
               int64_t *si) {
  for (int64_t r = 0; r < nr; r++) {
    if (over[r]) continue;
    const double *x = X + r * d;
    int64_t *c = cols + r * cap;
    int64_t n = cnt[r];
    if (n > k) n = compact(vals + r * cap, c, n, k, slack[r], thr + r, scratch);
    int64_t m = 0;
    for (int64_t q = 0; q < n; q++) {
      const int64_t j = c[q];
      const double *y = Y + j * d;
      double s = 0;
      for (int64_t f = 0; f < d; f++) { const double g = x[f] - y[f]; s += g * g; }
      /* its rank by (distance, column) among the m kept (at most k) */
      int64_t lo = 0, hi = m;
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (sd[mid] < s || (sd[mid] == s && si[mid] < j)) lo = mid + 1;
        else hi = mid;
      }
      if (lo >= k) continue;
      const int64_t top = m < k ? m : k - 1;
      memmove(sd + lo + 1, sd + lo, (size_t)(top - lo) * sizeof(double));
      memmove(si + lo + 1, si + lo, (size_t)(top - lo) * sizeof(int64_t));
      sd[lo] = s;
      si[lo] = j;
      if (m < k) m++;
    }
    cnt[r] = n;
    memcpy(out_d + r * k, sd, (size_t)k * sizeof(double));
    memcpy(out_i + r * k, si, (size_t)k * sizeof(int64_t));
  }
}
