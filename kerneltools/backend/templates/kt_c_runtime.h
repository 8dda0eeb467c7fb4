${vecmath}
${kt_exp}
#define KT_EXP(x) ${exp_fn}(x)
#define KT_EXPN(x) ${exp_fn}_nonpos(x) /* x <= 0 or NaN */
#define KT_EXP2N(z) ${exp2_fn}_nonpos(z) /* z <= 0 (or up to 100) or NaN */
#define KT_EXP2(x) exp2(x)

/* Bit l set where b[l] ranks before thr (KT_LT), for l < 32 (the caller
 * masks lanes past its count; b[0..31] must be readable): the K-min fold's
 * test of 32 candidates. With AVX-512, two or four compares that give the
 * bits directly; otherwise a vectorised loop. */
#define KT_REAL_${real} 1
/* acc + a b in a loop over the features (feature_loop): with FMA hardware
 * always one fused rounding, so that no compiler choice (contracting in one
 * loop, vectorising the products apart in another, as GCC's SLP does on some
 * CPUs' tuning) makes two kernels' copies of a statement round differently;
 * without it never fused (nothing to contract into). */
#if defined(__FMA__) || defined(__aarch64__)
#if defined(KT_REAL_double)
#define KT_FMA_ACC(acc, a, b) ((acc) = fma((a), (b), (acc)))
#else
#define KT_FMA_ACC(acc, a, b) ((acc) = fmaf((a), (b), (acc)))
#endif
#else
#define KT_FMA_ACC(acc, a, b) ((acc) += (a) * (b))
#endif
/* Before the row loop of a register-blocked micro-kernel (rows r x lanes l,
 * `#pragma omp simd` on l): clang unrolls the short lane loop first, then
 * vectorises the row loop, with gathers and scatters of the accumulators
 * through memory (float64 at MR = VL = 8: 15x gcc's time); vectorise the
 * lanes only. No effect on the results: each lane's FMAs stay in order. */
#if defined(__clang__)
#define KT_ROWS_LOOP _Pragma("clang loop vectorize(disable)")
#else
#define KT_ROWS_LOOP
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
static inline uint32_t kt_below32(const real_t *b, real_t thr) {
#if defined(KT_REAL_double)
  uint32_t m = 0;
  if (thr != thr) { /* every non-NaN value ranks before a NaN */
    for (int q = 0; q < 4; q++) {
      const __m512d x = _mm512_loadu_pd(b + 8 * q);
      m |= (uint32_t)_mm512_cmp_pd_mask(x, x, _CMP_ORD_Q) << (8 * q);
    }
  } else {
    const __m512d t = _mm512_set1_pd(thr);
    for (int q = 0; q < 4; q++)
      m |= (uint32_t)_mm512_cmp_pd_mask(_mm512_loadu_pd(b + 8 * q), t, _CMP_LT_OQ) << (8 * q);
  }
  return m;
#else
  const __m512 x0 = _mm512_loadu_ps(b), x1 = _mm512_loadu_ps(b + 16);
  if (thr != thr)
    return (uint32_t)_mm512_cmp_ps_mask(x0, x0, _CMP_ORD_Q)
           | (uint32_t)_mm512_cmp_ps_mask(x1, x1, _CMP_ORD_Q) << 16;
  const __m512 t = _mm512_set1_ps(thr);
  return (uint32_t)_mm512_cmp_ps_mask(x0, t, _CMP_LT_OQ)
         | (uint32_t)_mm512_cmp_ps_mask(x1, t, _CMP_LT_OQ) << 16;
#endif
}

/* The K-min fold of one tile, K <= 16 (KT_KMIN_VEC), its sorted list of (kv,
 * ki) held in vector registers: lane k is entry k; lanes K.. and empty
 * slots (index -1) are flagged in `empty` and rank after every value.
 * Candidates come 32 at a time from kt_below32 against the K-th kept value
 * (every one while the list is not full); for each, one compare of the
 * whole list gives the lanes it ranks before (KT_LT: a suffix of the
 * sorted lanes, none below K: it does not enter), and the insertion is a
 * lane shift under that mask with the candidate at its lowest lane: a
 * dozen vector instructions instead of K - 1 scalar steps. Equal values
 * keep index order (strict compare, candidates in index order). */
#define KT_KMIN_VEC 16
#if defined(KT_REAL_double)
typedef struct { __m512d lo, hi; } kt_kvec; /* entries 0..7, 8..15 */
static inline kt_kvec kt_kvec_load(const real_t *kv, __mmask16 live) {
  const __m512d inf = _mm512_set1_pd(INFINITY);
  kt_kvec k = {_mm512_mask_loadu_pd(inf, (__mmask8)live, kv),
               _mm512_mask_loadu_pd(inf, (__mmask8)(live >> 8), kv + 8)};
  return k;
}
/* lanes that a non-NaN v ranks before (KT_LT: smaller, or NaN), empty aside */
static inline __mmask16 kt_kvec_before(kt_kvec k, real_t v) {
  const __m512d vv = _mm512_set1_pd(v);
  return (__mmask16)(_mm512_cmp_pd_mask(vv, k.lo, _CMP_LT_OQ)
                     | _mm512_cmp_pd_mask(k.lo, k.lo, _CMP_UNORD_Q)
                     | (_mm512_cmp_pd_mask(vv, k.hi, _CMP_LT_OQ)
                        | _mm512_cmp_pd_mask(k.hi, k.hi, _CMP_UNORD_Q)) << 8);
}
static inline kt_kvec kt_kvec_insert(kt_kvec k, __mmask16 lt, __mmask16 at, real_t v,
                                     __m512i plo, __m512i phi) {
  const __m512d vv = _mm512_set1_pd(v);
  const __m512d slo = _mm512_permutex2var_pd(k.lo, plo, k.hi);
  const __m512d shi = _mm512_permutex2var_pd(k.lo, phi, k.hi);
  k.lo = _mm512_mask_mov_pd(_mm512_mask_mov_pd(k.lo, (__mmask8)lt, slo), (__mmask8)at, vv);
  k.hi = _mm512_mask_mov_pd(_mm512_mask_mov_pd(k.hi, (__mmask8)(lt >> 8), shi),
                            (__mmask8)(at >> 8), vv);
  return k;
}
static inline real_t kt_kvec_entry(kt_kvec k, int e) {
  return _mm512_cvtsd_f64(_mm512_permutexvar_pd(_mm512_set1_epi64(e & 7), e > 7 ? k.hi : k.lo));
}
static inline void kt_kvec_store(real_t *kv, __mmask16 live, kt_kvec k) {
  _mm512_mask_storeu_pd(kv, (__mmask8)live, k.lo);
  _mm512_mask_storeu_pd(kv + 8, (__mmask8)(live >> 8), k.hi);
}
#else
typedef struct { __m512 v; } kt_kvec; /* entries 0..15 */
static inline kt_kvec kt_kvec_load(const real_t *kv, __mmask16 live) {
  kt_kvec k = {_mm512_mask_loadu_ps(_mm512_set1_ps(INFINITY), live, kv)};
  return k;
}
static inline __mmask16 kt_kvec_before(kt_kvec k, real_t v) {
  return _mm512_cmp_ps_mask(_mm512_set1_ps(v), k.v, _CMP_LT_OQ)
         | _mm512_cmp_ps_mask(k.v, k.v, _CMP_UNORD_Q);
}
static inline kt_kvec kt_kvec_insert(kt_kvec k, __mmask16 lt, __mmask16 at, real_t v,
                                     __m512i plo, __m512i phi) {
  (void)plo, (void)phi;
  const __m512i prev = _mm512_set_epi32(14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0);
  k.v = _mm512_mask_mov_ps(_mm512_mask_mov_ps(k.v, lt, _mm512_permutexvar_ps(prev, k.v)),
                           at, _mm512_set1_ps(v));
  return k;
}
static inline real_t kt_kvec_entry(kt_kvec k, int e) {
  return _mm512_cvtss_f32(_mm512_permutexvar_ps(_mm512_set1_epi32(e), k.v));
}
static inline void kt_kvec_store(real_t *kv, __mmask16 live, kt_kvec k) {
  _mm512_mask_storeu_ps(kv, live, k.v);
}
#endif
static inline void kt_kmin_fold(const real_t *b, int64_t nj, int64_t j0, real_t *kv,
                                int64_t *ki, int K) {
  const __mmask16 live = (__mmask16)((1u << K) - 1);
  const __mmask8 lo8 = (__mmask8)live, hi8 = (__mmask8)(live >> 8);
  const __m512i none = _mm512_set1_epi64(-1);
  kt_kvec vk = kt_kvec_load(kv, live);
  __m512i ilo = _mm512_mask_loadu_epi64(none, lo8, ki);
  __m512i ihi = _mm512_mask_loadu_epi64(none, hi8, ki + 8);
  __mmask16 empty = (__mmask16)(~live | _mm512_cmplt_epi64_mask(ilo, _mm512_setzero_si512())
                                | _mm512_cmplt_epi64_mask(ihi, _mm512_setzero_si512()) << 8);
  /* lane k takes lane k - 1 (lo: 0,0..6 of lo; hi: 7 of lo, 0..6 of hi) */
  const __m512i plo = _mm512_set_epi64(6, 5, 4, 3, 2, 1, 0, 0);
  const __m512i phi = _mm512_set_epi64(14, 13, 12, 11, 10, 9, 8, 7);
  real_t thr = kv[K - 1];
  for (int64_t jc = 0; jc < nj; jc += 32) {
    const int64_t nc = nj - jc < 32 ? nj - jc : 32;
    uint32_t mask = nc < 32 ? (UINT32_C(1) << nc) - 1 : ~UINT32_C(0);
    if (!(empty >> (K - 1) & 1)) mask &= kt_below32(b + jc, thr);
    if (!mask) continue;
    while (mask) {
      const int l = __builtin_ctz(mask);
      mask &= mask - 1;
      const real_t v = b[jc + l];
      const __mmask16 lt = empty | (v == v ? kt_kvec_before(vk, v) : 0);
      if (!(lt & live)) continue;
      const __mmask16 at = lt & (__mmask16)(-lt); /* the candidate's lane */
      const __m512i tlo = _mm512_permutex2var_epi64(ilo, plo, ihi);
      const __m512i thi = _mm512_permutex2var_epi64(ilo, phi, ihi);
      const __m512i jv = _mm512_set1_epi64(j0 + jc + l);
      vk = kt_kvec_insert(vk, lt, at, v, plo, phi);
      ilo = _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(ilo, (__mmask8)lt, tlo),
                                  (__mmask8)at, jv);
      ihi = _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(ihi, (__mmask8)(lt >> 8), thi),
                                  (__mmask8)(at >> 8), jv);
      empty = (__mmask16)((empty & ~lt) | ((empty << 1) & lt & ~at) | ~live);
    }
    thr = kt_kvec_entry(vk, K - 1);
  }
  kt_kvec_store(kv, live, vk);
  _mm512_mask_storeu_epi64(ki, lo8, ilo);
  _mm512_mask_storeu_epi64(ki + 8, hi8, ihi);
}
#else
#define KT_KMIN_VEC 0
static inline uint32_t kt_below32(const real_t *b, real_t thr) {
  uint32_t m = 0;
  #pragma omp simd reduction(|:m)
  for (int l = 0; l < 32; l++) m |= (uint32_t)KT_LT(b[l], thr) << l;
  return m;
}
#endif

typedef struct { ${state} } kt_state;

const char *kt_key(void) { return "${key}"; }
int64_t kt_state_size(void) { return (int64_t)sizeof(kt_state); }
/* 0 in a process forked after OpenMP started: its thread pool is gone there. */
static int kt_parallel = 1;
void kt_set_parallel(int on) { kt_parallel = on; }
