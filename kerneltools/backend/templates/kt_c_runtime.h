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
#else
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
