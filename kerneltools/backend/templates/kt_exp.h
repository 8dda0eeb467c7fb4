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
