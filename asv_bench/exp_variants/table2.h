/* float64 2^z for z <= 0 (or up to 100) or NaN, tried as an AVX-512 variant
 * of kt_exp2_nonpos for issue 23 (asv_bench/exp_ab.py; results in
 * asv_bench/RESULTS.md): z = n + j/2 + r, t = z + 1.5 * 2^51 rounds z to a
 * multiple of 1/2 (m = 2 n + j in t's low mantissa bits), r = z - m/2
 * exact, |r| <= 1/4; 2^r = 1 + r q(r), q of degree 8 (minimax for the
 * relative error of 1 + r q on |r| <= 1/4: 2.5e-17 with these double
 * coefficients): 10 multiply-class operations per value instead of the
 * portable code's 13, plus an integer select of 2^(j/2). Entry j's bits
 * less j << 51, plus t's bits << 51 (m << 51: the rest of t's bits shift
 * out), are the bits of 2^(n + j/2): n is added to the exponent field, exact
 * for n >= -1022. For j = 1 the double T = 2^(1/2) is off by e = log2(T) -
 * 1/2 = 9.86e-17 (0.43 ulp): 2^(1/2 + r) = T (1 + r q - e ln 2), to 1.3e-17,
 * the correction added to r q. The clamp at -1023 gives n = -1023, j = 0:
 * +0; for -1023 < z < -1022 the result is some value in [0, 2^-1022). */
#pragma omp declare simd notinbranch
static inline double kt_exp2_nonpos(double z) {
  const double lo = kt_exp2n_lo_d;
  const double zc = z < lo ? lo : z;
  const double magic = 3377699720527872.0; /* 1.5 * 2^51 */
  const double t = zc + magic;
  union { double f; uint64_t i; } ut, s, c;
  ut.f = t;
  const uint64_t odd = ut.i & 1; /* j */
  const double r = zc - (t - magic);
  double q = 1.0170624249627991e-07;
  q = q * r + 1.322622497939446e-06;
  q = q * r + 1.5252749868376722e-05;
  q = q * r + 1.540352476224619e-04;
  q = q * r + 1.3333558138254977e-03;
  q = q * r + 9.618129108791675e-03;
  q = q * r + 5.55041086648357e-02;
  q = q * r + 2.4022650695909326e-01;
  q = q * r + 6.931471805599453e-01;
  c.i = odd ? 0xBC93B3EFBF5E2229ULL : 0; /* -e ln 2 */
  s.i = (odd ? 0x3FEEA09E667F3BCDULL : 0x3FF0000000000000ULL) + (ut.i << 51);
  return s.f * (r * q + c.f) + s.f;
}
