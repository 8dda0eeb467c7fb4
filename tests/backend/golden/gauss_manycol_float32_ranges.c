/* kerneltools generated block-sparse kernel: Sum, float, i0[3], j1[3], p2[1], j3[8]
 * key golden
 */
#include <tgmath.h>
#include <stdint.h>

typedef float real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#define TJ 512
#define IB 8
#define RB 4
#define KT_VL 16
#define CW 8
#define GR 8
#if !defined(__AVX512F__)
#undef GR
#define GR 4
#endif
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define KT_PARALLEL_PAIRS 1048576
#pragma omp declare simd notinbranch
double (exp)(double);
#pragma omp declare simd notinbranch
float (expf)(float);
#pragma omp declare simd notinbranch
double (log)(double);
#pragma omp declare simd notinbranch
float (logf)(float);
#pragma omp declare simd notinbranch
double (sin)(double);
#pragma omp declare simd notinbranch
float (sinf)(float);
#pragma omp declare simd notinbranch
double (cos)(double);
#pragma omp declare simd notinbranch
float (cosf)(float);
/* Vectorisable exp for the generated kernels (no library call, no slow path).
 *
 * exp(x) = 2^n exp(r) with n = rint(x / ln 2) and r = x - n ln 2 (Cody-Waite,
 * two constants), |r| <= ln(2) / 2; exp(r) by a polynomial (float: degree 6,
 * minimax; double: degree 11, least squares on Chebyshev nodes, error 1.6e-16
 * relative with its rounding, 1.2e-16 for Taylor to degree 13); 2^n built
 * from exponent bits in two halves so that no intermediate overflows. Results
 * below (about) the smallest normal number are flushed to 0, above the largest
 * finite one they are +inf, and NaN propagates.
 */
/* The clamp bounds live in (never written) global variables on purpose: with
 * literal constants the compiler folds exp(lo) and rewrites exp(clamp(x)) as
 * select(x < lo, exp(lo), exp(x)), evaluating the polynomial on unclamped
 * lanes, whose subnormal intermediates cost a ~100-cycle assist each. */
float kt_exp_lo_f = -87.0f, kt_exp_hi_f = 88.72283f;
double kt_exp_lo_d = -708.0, kt_exp_hi_d = 709.782712893384;

/* exp(r) for |r| <= ln(2) / 2, shared by the exps below */
#pragma omp declare simd notinbranch
static inline float kt_expf_poly(float r) {
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  return p;
}

#pragma omp declare simd notinbranch
static inline double kt_exp_poly(double r) {
  double p = 2.510518786655422e-08;
  p = p * r + 2.762007704909092e-07;
  p = p * r + 2.755725547334665e-06;
  p = p * r + 2.480152131958722e-05;
  p = p * r + 0.00019841269874759982;
  p = p * r + 0.0013888888917198768;
  p = p * r + 0.008333333333326153;
  p = p * r + 0.04166666666662416;
  p = p * r + 0.1666666666666667;
  p = p * r + 0.5000000000000001;
  p = p * r * r + r + 1.0;
  return p;
}

#pragma omp declare simd notinbranch
static inline float kt_expf(float x) {
  /* lo keeps 2^n p (p >= 0.7) above the smallest normal number even for the
     clamped lanes; exp(hi) is the largest float */
  const float lo = kt_exp_lo_f, hi = kt_exp_hi_f;
  const float xc = x < lo ? lo : (x > hi ? hi : x);
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  const float t = xc * 1.44269504088896341f + magic;
  const float n = t - magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float p = kt_expf_poly(r);
  union { float f; int32_t i; } ut, s1, s2;
  ut.f = t;
  const int32_t ni = ut.i - 0x4B400000; /* the integer n, from t's mantissa */
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  s1.i = (n1 + 127) << 23;
  s2.i = (n2 + 127) << 23;
  const float y = p * s1.f * s2.f;
  return xc != xc ? xc : (xc <= lo ? 0.0f : (xc >= hi ? INFINITY : y));
}

#pragma omp declare simd notinbranch
static inline double kt_exp(double x) {
  const double lo = kt_exp_lo_d, hi = kt_exp_hi_d; /* as in kt_expf */
  const double xc = x < lo ? lo : (x > hi ? hi : x);
  const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
  const double t = xc * 1.4426950408889634074 + magic;
  const double n = t - magic;
  double r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  const double p = kt_exp_poly(r);
  union { double f; int64_t i; } ut, s1, s2;
  ut.f = t;
  const int64_t ni = ut.i - 0x4338000000000000LL;
  const int64_t n1 = ni >> 1, n2 = ni - n1;
  s1.i = (n1 + 1023) << 52;
  s2.i = (n2 + 1023) << 52;
  const double y = p * s1.f * s2.f;
  return xc != xc ? xc : (xc <= lo ? 0.0 : (xc >= hi ? INFINITY : y));
}

/* exp(x) for x <= 0 or NaN only (the kernels use it where the formula and
 * the parameters prove that, e.g. exp(-g |x - y|^2) with g >= 0): the same
 * polynomial, no upper clamp, 2^n in one step and no final test: the lower
 * clamp (-88, -709) gives n = -127 (-1023), whose 2^n has a zero exponent
 * field, i.e. is +0, below about the smallest normal number (exp(-inf) = 0),
 * a normal 2^n above; a NaN propagates through the polynomial. */
float kt_expn_lo_f = -88.0f;
double kt_expn_lo_d = -709.0;
#pragma omp declare simd notinbranch
static inline float kt_expf_nonpos(float x) {
  const float lo = kt_expn_lo_f;
  const float xc = x < lo ? lo : x;
  const float magic = 12582912.0f;
  const float t = xc * 1.44269504088896341f + magic;
  const float n = t - magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float p = kt_expf_poly(r);
  union { float f; int32_t i; } ut, s;
  ut.f = t;
  s.i = (ut.i - 0x4B400000 + 127) << 23;
  return p * s.f;
}

#pragma omp declare simd notinbranch
static inline double kt_exp_nonpos(double x) {
  const double lo = kt_expn_lo_d;
  const double xc = x < lo ? lo : x;
  const double magic = 6755399441055744.0;
  const double t = xc * 1.4426950408889634074 + magic;
  const double n = t - magic;
  double r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  const double p = kt_exp_poly(r);
  union { double f; int64_t i; } ut, s;
  ut.f = t;
  s.i = (ut.i - 0x4338000000000000LL + 1023) << 52;
  return p * s.f;
}

/* 2^z for z <= 0 or NaN: exp(x) = 2^(x log2 e), where the kernel folds
 * log2 e into a parameter (exp(-g d) as 2^(d * (-g log2 e))): z = n + r,
 * |r| <= 1/2, r exact; 2^r by a polynomial in r (float: kt_expf_nonpos's in
 * r ln 2, its coefficients multiplied by powers of ln 2; double: degree 11,
 * fitted as kt_exp_poly's, error 2.2e-16 relative); the clamp at -127
 * (-1023) gives +0 as above. Positive z up to 100 give normal results too
 * (2^n stays a normal number): the log-sum-exp sums use that (_cpu_rows). */
float kt_exp2n_lo_f = -127.0f;
double kt_exp2n_lo_d = -1023.0;
#pragma omp declare simd notinbranch
static inline float kt_exp2f_nonpos(float z) {
  const float lo = kt_exp2n_lo_f;
  const float zc = z < lo ? lo : z;
  const float magic = 12582912.0f;
  const float t = zc + magic;
  const float r = zc - (t - magic);
  /* even and odd halves in r^2, as in kt_exp2_nonpos */
  const float r2 = r * r;
  float pe = 1.5506795114375121e-04f, po = 1.5279195033704184e-05f;
  pe = pe * r2 + 9.617928102734123e-03f;
  po = po * r2 + 1.3333747867973944e-03f;
  pe = pe * r2 + 2.402265127293414e-01f;
  po = po * r2 + 5.550410464299386e-02f;
  const float p = (po * r + pe) * r2 + (r * 0.6931471805599453f + 1.0f);
  union { float f; int32_t i; } ut, s;
  ut.f = t;
  s.i = (ut.i - 0x4B400000 + 127) << 23;
  return p * s.f;
}

#pragma omp declare simd notinbranch
static inline double kt_exp2_nonpos(double z) {
  const double lo = kt_exp2n_lo_d;
  const double zc = z < lo ? lo : z;
  const double magic = 6755399441055744.0;
  const double t = zc + magic;
  const double r = zc - (t - magic);
  /* the polynomial's even and odd halves in r^2, two chains of half the
     length of Horner's (its latency bounds the kernels that call it) */
  const double r2 = r * r;
  double pe = 7.070978146309952e-09, po = 4.4549579606816324e-10;
  pe = pe * r2 + 1.3215451631846369e-06;
  po = po * r2 + 1.017806245966077e-07;
  pe = pe * r2 + 0.0001540353042477861;
  po = po * r2 + 1.5252733829812152e-05;
  pe = pe * r2 + 0.009618129107618665;
  po = po * r2 + 0.001333355814641695;
  pe = pe * r2 + 0.24022650695910075;
  po = po * r2 + 0.0555041086648216;
  const double p = (po * r + pe) * r2 + (r * 0.6931471805599453 + 1.0);
  union { double f; int64_t i; } ut, s;
  ut.f = t;
  s.i = (ut.i - 0x4338000000000000LL + 1023) << 52;
  return p * s.f;
}

/* The same 2^z on eight doubles at once, where the compiler targets AVX-512
 * (the float64 sums' vector loops, _cpu_vec): z = m + r with m = z rounded
 * to a multiple of 1/16 (adding 1.5 * 2^48 rounds there, and t's low 4
 * mantissa bits are then 16 m mod 16) and |r| <= 1/32, r exact;
 * 2^z = 2^floor(m) T 2^r with T = 2^frac(m) from a 16-entry table held in
 * two registers (one permute); 2^r - 1 by a degree-6 polynomial (fitted to
 * relative error 7.5e-18 on |r| <= 1/32); T (1 + q) as one FMA; 2^floor(m)
 * by vscalefpd. Lanes with z < -1022 (-inf included) are set to +0 by the
 * scalef's zero mask, as kt_exp2_nonpos flushes them: a subnormal result
 * would cost an assist in each operation that reads it; z >= -1022 gives a
 * normal result; a NaN keeps its lane (the compare is unordered-true) and
 * propagates. 13 vector operations against kt_exp2_nonpos's 19; max error
 * 1.07 ulp against 1.23 (asv_bench/exp_ab.py --vector). */
#if defined(__AVX512F__) && !defined(KT_NO_VEC)
#include <immintrin.h>
#define KT_VEC_F64 1
typedef double kt_vd __attribute__((vector_size(64)));
#define KT_VLOAD(p) ((kt_vd)_mm512_loadu_pd(p))
/* c < v ? c : v (v where v is NaN), c a number */
#define KT_VMIN(c, v) ((kt_vd)_mm512_min_pd(_mm512_set1_pd(c), (__m512d)(v)))
static inline kt_vd kt_exp2v_nonpos(kt_vd z) {
  const __m512d lo = _mm512_set_pd(1.3542555469368927, 1.2968395546510096,
      1.241857812073484, 1.189207115002721, 1.1387886347566916, 1.0905077326652577,
      1.0442737824274138, 1.0);
  const __m512d hi = _mm512_set_pd(1.9152065613971474, 1.8340080864093424,
      1.7562521603732995, 1.681792830507429, 1.6104903319492543, 1.5422108254079407,
      1.4768261459394993, 1.4142135623730951);
  const __mmask8 live = _mm512_cmp_pd_mask((__m512d)z, _mm512_set1_pd(-1022.0), _CMP_NLT_UQ);
  const kt_vd t = z + 422212465065984.0; /* 1.5 * 2^48 */
  const kt_vd m = t - 422212465065984.0;
  const kt_vd r = z - m;
  const kt_vd T = (kt_vd)_mm512_permutex2var_pd(lo, _mm512_castpd_si512((__m512d)t), hi);
  kt_vd q = r * 0.00015403402660969833 + 0.0013333818661593715;
  q = q * r + 0.00961812911139063;
  q = q * r + 0.05550410865211484;
  q = q * r + 0.24022650695909933;
  q = q * r + 0.6931471805599468;
  q = q * r;
  return (kt_vd)_mm512_maskz_scalef_pd(live, (__m512d)(T * q + T), (__m512d)m);
}
/* f 2^z for finite |z| <= 1000 (no test), tab = kt_exp2v_table(f): the 16
 * entries of kt_exp2v_nonpos's table times f. For _cpu_near's rows, whose
 * factor f = 2^(k |x_i - c|^2) leaves z (and its bound spares the test);
 * the scalar form KT_EXP2T(z, a, tab) (a tile's last points, no AVX-512)
 * computes 2^(z + a), a = log2 f. Error: kt_exp2v_nonpos's, plus the
 * rounding of the table's products and f's own (max 1.82 ulp against
 * 2^(z + a) in long double, f = exp2(a) for a in {0, -0.3, -3.7, -23.9},
 * 8e6 points of z on [-48, 24]). */
typedef struct { __m512d lo, hi; } kt_vtab;
static inline kt_vtab kt_exp2v_table(double f) {
  const __m512d s = _mm512_set1_pd(f);
  const kt_vtab t = {_mm512_mul_pd(s, _mm512_set_pd(1.3542555469368927,
      1.2968395546510096, 1.241857812073484, 1.189207115002721, 1.1387886347566916,
      1.0905077326652577, 1.0442737824274138, 1.0)),
    _mm512_mul_pd(s, _mm512_set_pd(1.9152065613971474, 1.8340080864093424,
      1.7562521603732995, 1.681792830507429, 1.6104903319492543, 1.5422108254079407,
      1.4768261459394993, 1.4142135623730951))};
  return t;
}
static inline kt_vd kt_exp2v_tab(kt_vd z, double a, kt_vtab tab) {
  (void)a;
  const kt_vd t = z + 422212465065984.0; /* 1.5 * 2^48 */
  const kt_vd m = t - 422212465065984.0;
  const kt_vd r = z - m;
  const kt_vd T = (kt_vd)_mm512_permutex2var_pd(tab.lo, _mm512_castpd_si512((__m512d)t),
                                                tab.hi);
  kt_vd q = r * 0.00015403402660969833 + 0.0013333818661593715;
  q = q * r + 0.00961812911139063;
  q = q * r + 0.05550410865211484;
  q = q * r + 0.24022650695909933;
  q = q * r + 0.6931471805599468;
  q = q * r;
  return (kt_vd)_mm512_scalef_pd((__m512d)(T * q + T), (__m512d)m);
}
#endif
#define KT_EXP2T(z, a, tab) KT_EXP2N((z) + (a)) /* scalar: 2^(z + a) */

#define KT_EXP(x) kt_expf(x)
#define KT_EXPN(x) kt_expf_nonpos(x) /* x <= 0 or NaN */
#define KT_EXP2N(z) kt_exp2f_nonpos(z) /* z <= 0 (or up to 100) or NaN */
#define KT_EXP2(x) exp2(x)

/* Bit l set where b[l] ranks before thr (KT_LT), for l < 32 (the caller
 * masks lanes past its count; b[0..31] must be readable): the K-min fold's
 * test of 32 candidates. With AVX-512, two or four compares that give the
 * bits directly; otherwise a vectorised loop. */
#define KT_REAL_float 1
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

typedef struct { acc_t A[8]; } kt_state;

const char *kt_key(void) { return "golden"; }
int64_t kt_state_size(void) { return (int64_t)sizeof(kt_state); }
/* 0 in a process forked after OpenMP started: its thread pool is gone there. */
static int kt_parallel = 1;
void kt_set_parallel(int on) { kt_parallel = on; }

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
  const real_t *restrict a0 = (const real_t *)args[0];
  const real_t *restrict a1 = (const real_t *)args[1];
  const real_t *restrict a2 = (const real_t *)args[2];
  const real_t *restrict a3 = (const real_t *)args[3];
  real_t *restrict outf = (real_t *)outs[0];
  const real_t *restrict bq = (const real_t *)args[4];
  kt_state *restrict states = (kt_state *)outs[1];
  const real_t t5_0 = a2[0];
  const real_t kc0 = (real_t)(-1.4426950408889634074 * (double)t5_0);
  const int kt_nonpos = t5_0 >= (real_t)0;
  #pragma omp parallel for schedule(dynamic, 1) if (kt_parallel && npairs > KT_PARALLEL_PAIRS)
  for (int64_t ob = 0; ob < nblk; ob++) {
    const int64_t r0 = blk[4 * ob], r1 = blk[4 * ob + 1];
    const int64_t v0 = blk[4 * ob + 2], v1 = blk[4 * ob + 3];
    /* K for the block's rows and the tile (rows never written stay 0) */
    real_t kb[IB * TJ];
    for (int64_t q = 0; q < IB * TJ; q++) kb[q] = 0;
    for (int64_t i0 = r0; i0 < r1; i0 += IB) {
      const int64_t ni = (r1 - i0 < IB) ? r1 - i0 : IB;
      kt_state *st = states + i0;
      for (int64_t ii = 0; ii < ni; ii++) {
        kt_state *S = &st[ii];
        for (int e = 0; e < 8; e++) S->A[e] = 0;
      }
      for (int64_t iv = v0; iv < v1; iv++) {
        const int64_t jend = red[2 * iv + 1];
        for (int64_t j0 = red[2 * iv]; j0 < jend; j0 += TJ) {
          const int64_t nj = (jend - j0 < TJ) ? jend - j0 : TJ;
          const int64_t njv = (nj + KT_VL - 1) / KT_VL * KT_VL;
          const real_t *restrict y1 = a1 + j0;
          /* RB rows at a time; a block's last rows past ni repeat its last
             row, their results unused */
          for (int64_t ii = 0; ii < ni; ii += RB) {
            const int64_t i_0 = i0 + ii;
            const int64_t i_1 = ii + 1 < ni ? i0 + ii + 1 : i0 + ni - 1;
            const int64_t i_2 = ii + 2 < ni ? i0 + ii + 2 : i0 + ni - 1;
            const int64_t i_3 = ii + 3 < ni ? i0 + ii + 3 : i0 + ni - 1;
            const real_t t0_0 = a0[i_0 * 3 + 0];
            const real_t t0_1 = a0[i_0 * 3 + 1];
            const real_t t0_2 = a0[i_0 * 3 + 2];
            const real_t r1_0_0 = a0[i_1 * 3 + 0];
            const real_t r1_0_1 = a0[i_1 * 3 + 1];
            const real_t r1_0_2 = a0[i_1 * 3 + 2];
            const real_t r2_0_0 = a0[i_2 * 3 + 0];
            const real_t r2_0_1 = a0[i_2 * 3 + 1];
            const real_t r2_0_2 = a0[i_2 * 3 + 2];
            const real_t r3_0_0 = a0[i_3 * 3 + 0];
            const real_t r3_0_1 = a0[i_3 * 3 + 1];
            const real_t r3_0_2 = a0[i_3 * 3 + 2];
            if (kt_nonpos) {
              #pragma omp simd
              for (int64_t jj = 0; jj < njv; jj++) {
                const int64_t j = j0 + jj;
                const real_t t1_0 = y1[0 * js + jj];
                const real_t t1_1 = y1[1 * js + jj];
                const real_t t1_2 = y1[2 * js + jj];
                const real_t t2_0 = (t0_0 - t1_0);
                const real_t t2_1 = (t0_1 - t1_1);
                const real_t t2_2 = (t0_2 - t1_2);
                const real_t t3_0 = (t2_0 * t2_0);
                const real_t t3_1 = (t2_1 * t2_1);
                const real_t t3_2 = (t2_2 * t2_2);
                const real_t t4_0 = (t3_0 + t3_1 + t3_2);
                const real_t t6_0 = (t4_0 * t5_0);
                const real_t t7_0 = (-t6_0);
                const real_t t8_0 = KT_EXP2N(t4_0 * kc0);
                const real_t r1_2_0 = (r1_0_0 - t1_0);
                const real_t r1_2_1 = (r1_0_1 - t1_1);
                const real_t r1_2_2 = (r1_0_2 - t1_2);
                const real_t r1_3_0 = (r1_2_0 * r1_2_0);
                const real_t r1_3_1 = (r1_2_1 * r1_2_1);
                const real_t r1_3_2 = (r1_2_2 * r1_2_2);
                const real_t r1_4_0 = (r1_3_0 + r1_3_1 + r1_3_2);
                const real_t r1_6_0 = (r1_4_0 * t5_0);
                const real_t r1_7_0 = (-r1_6_0);
                const real_t r1_8_0 = KT_EXP2N(r1_4_0 * kc0);
                const real_t r2_2_0 = (r2_0_0 - t1_0);
                const real_t r2_2_1 = (r2_0_1 - t1_1);
                const real_t r2_2_2 = (r2_0_2 - t1_2);
                const real_t r2_3_0 = (r2_2_0 * r2_2_0);
                const real_t r2_3_1 = (r2_2_1 * r2_2_1);
                const real_t r2_3_2 = (r2_2_2 * r2_2_2);
                const real_t r2_4_0 = (r2_3_0 + r2_3_1 + r2_3_2);
                const real_t r2_6_0 = (r2_4_0 * t5_0);
                const real_t r2_7_0 = (-r2_6_0);
                const real_t r2_8_0 = KT_EXP2N(r2_4_0 * kc0);
                const real_t r3_2_0 = (r3_0_0 - t1_0);
                const real_t r3_2_1 = (r3_0_1 - t1_1);
                const real_t r3_2_2 = (r3_0_2 - t1_2);
                const real_t r3_3_0 = (r3_2_0 * r3_2_0);
                const real_t r3_3_1 = (r3_2_1 * r3_2_1);
                const real_t r3_3_2 = (r3_2_2 * r3_2_2);
                const real_t r3_4_0 = (r3_3_0 + r3_3_1 + r3_3_2);
                const real_t r3_6_0 = (r3_4_0 * t5_0);
                const real_t r3_7_0 = (-r3_6_0);
                const real_t r3_8_0 = KT_EXP2N(r3_4_0 * kc0);
                kb[(ii + 0) * TJ + jj] = t8_0;
                kb[(ii + 1) * TJ + jj] = r1_8_0;
                kb[(ii + 2) * TJ + jj] = r2_8_0;
                kb[(ii + 3) * TJ + jj] = r3_8_0;
              }
            } else {
              #pragma omp simd
              for (int64_t jj = 0; jj < njv; jj++) {
                const int64_t j = j0 + jj;
                const real_t t1_0 = y1[0 * js + jj];
                const real_t t1_1 = y1[1 * js + jj];
                const real_t t1_2 = y1[2 * js + jj];
                const real_t t2_0 = (t0_0 - t1_0);
                const real_t t2_1 = (t0_1 - t1_1);
                const real_t t2_2 = (t0_2 - t1_2);
                const real_t t3_0 = (t2_0 * t2_0);
                const real_t t3_1 = (t2_1 * t2_1);
                const real_t t3_2 = (t2_2 * t2_2);
                const real_t t4_0 = (t3_0 + t3_1 + t3_2);
                const real_t t6_0 = (t4_0 * t5_0);
                const real_t t7_0 = (-t6_0);
                const real_t t8_0 = KT_EXP(t7_0);
                const real_t r1_2_0 = (r1_0_0 - t1_0);
                const real_t r1_2_1 = (r1_0_1 - t1_1);
                const real_t r1_2_2 = (r1_0_2 - t1_2);
                const real_t r1_3_0 = (r1_2_0 * r1_2_0);
                const real_t r1_3_1 = (r1_2_1 * r1_2_1);
                const real_t r1_3_2 = (r1_2_2 * r1_2_2);
                const real_t r1_4_0 = (r1_3_0 + r1_3_1 + r1_3_2);
                const real_t r1_6_0 = (r1_4_0 * t5_0);
                const real_t r1_7_0 = (-r1_6_0);
                const real_t r1_8_0 = KT_EXP(r1_7_0);
                const real_t r2_2_0 = (r2_0_0 - t1_0);
                const real_t r2_2_1 = (r2_0_1 - t1_1);
                const real_t r2_2_2 = (r2_0_2 - t1_2);
                const real_t r2_3_0 = (r2_2_0 * r2_2_0);
                const real_t r2_3_1 = (r2_2_1 * r2_2_1);
                const real_t r2_3_2 = (r2_2_2 * r2_2_2);
                const real_t r2_4_0 = (r2_3_0 + r2_3_1 + r2_3_2);
                const real_t r2_6_0 = (r2_4_0 * t5_0);
                const real_t r2_7_0 = (-r2_6_0);
                const real_t r2_8_0 = KT_EXP(r2_7_0);
                const real_t r3_2_0 = (r3_0_0 - t1_0);
                const real_t r3_2_1 = (r3_0_1 - t1_1);
                const real_t r3_2_2 = (r3_0_2 - t1_2);
                const real_t r3_3_0 = (r3_2_0 * r3_2_0);
                const real_t r3_3_1 = (r3_2_1 * r3_2_1);
                const real_t r3_3_2 = (r3_2_2 * r3_2_2);
                const real_t r3_4_0 = (r3_3_0 + r3_3_1 + r3_3_2);
                const real_t r3_6_0 = (r3_4_0 * t5_0);
                const real_t r3_7_0 = (-r3_6_0);
                const real_t r3_8_0 = KT_EXP(r3_7_0);
                kb[(ii + 0) * TJ + jj] = t8_0;
                kb[(ii + 1) * TJ + jj] = r1_8_0;
                kb[(ii + 2) * TJ + jj] = r2_8_0;
                kb[(ii + 3) * TJ + jj] = r3_8_0;
              }
            }
          }
              /* (IB x nj) buffer of K times the tile's (nj x 8) block of B: GR rows
                 x CW columns of accumulators, each CW-chunk of B reused by the block's
                 row groups from cache; rows past ni are computed (kb holds zeros or
                 copies there) but not stored */
              {
                const real_t *restrict bt = bq + j0 * 8;
                for (int e0 = 0; e0 < 8; e0 += CW) {
                  for (int r4 = 0; r4 < ni; r4 += GR) {
                    real_t acc[GR][CW];
                    for (int r = 0; r < GR; r++) for (int l = 0; l < CW; l++) acc[r][l] = 0;
                    const real_t *restrict k0 = kb + r4 * TJ;
                    for (int64_t jj = 0; jj < nj; jj++) {
                      const real_t *restrict bv = bt + jj * 8 + e0;
                      KT_ROWS_LOOP
                      for (int r = 0; r < GR; r++) {
                        const real_t kv = k0[r * TJ + jj];
                        #pragma omp simd
                        for (int l = 0; l < CW; l++) acc[r][l] += kv * bv[l];
                      }
                    }
                    for (int r = 0; r < GR && r4 + r < ni; r++) {
                      acc_t *restrict A = st[r4 + r].A;
                      const int ne = 8 - e0 < CW ? 8 - e0 : CW;
                      for (int l = 0; l < ne; l++) A[e0 + l] += (acc_t)acc[r][l];
                    }
                  }
                }
              }
        }
      }
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = imap[i0 + ii]; /* outputs in the caller's order */
        kt_state *S = &st[ii];
        for (int e = 0; e < 8; e++) outf[i * 8 + e] = (real_t)S->A[e];
      }
    }
  }
}
