
/* K-min of a squared distance |x_i - y_j|^2: the expanded-distance
 * prefilter (see _cpu_kmin.py for the bound's proof). With x', y' the points
 * moved by a centre c and scaled by a power of two s (kpar), rounded to
 * float whatever the data's type, |y'_j|^2 (kyn) and y' packed by tiles
 * (kyp), the scan computes, RB rows at a time, e_j = |y'_j|^2 + sum_c
 * (-2 x'_c) y'_c (D float FMAs per pair, 16 lanes) and flags the lanes
 * where e_j is not above the row's bound T_i (kt_kpf_bound): every lane
 * whose exact (direct-form) value could rank before the row's K-th kept
 * value, or could be in the output, is flagged, and a NaN bound or a NaN
 * e_j flags the lane. */
#if defined(__AVX512F__)
#define KPD ${D}
#define KT_KPF_VL 16
#if defined(KT_REAL_double)
#define KT_KPF_U 0x1p-53 /* the data's unit roundoff */
#define KT_KPF_ETA 0x1p-1000 /* normal, >= 8 (D + 4) x the smallest subnormal */
#define KT_KPF_HALFMAX 0x1p1023
#else
#define KT_KPF_U 0x1p-24
#define KT_KPF_ETA 0x1p-120
#define KT_KPF_HALFMAX 0x1p127
#endif
#define KT_KPF_UP 0x1p-24 /* the prefilter's (float) */
#define KT_KPF_BIG 0x1p124 /* FLT_MAX / 16 */
/* kpar: [Y >= max |y'_j|^2, s, the absolute term, c_0 .. c_{D-1}] */
#define KT_KPF_YY kpar[0]
#define KT_KPF_S kpar[1]
#define KT_KPF_ABS kpar[2]
#define KT_KPF_C(c) kpar[3 + (c)]
/* Up to KT_KPF_Q vectors with a flagged lane (their starts in qj, the RB
 * rows' masks in qm) from jv on, stopping after the KT_KPF_Q-th or at nj
 * (*pjv: where to go on); the bounds T are those at the call: a bound
 * lowered by the folds of the queued vectors only flags fewer lanes. */
#define KT_KPF_Q 8
static inline int kt_kpf_scan(const float *restrict yc, const float *restrict yn,
                              int64_t *restrict pjv, int64_t nj, const float *restrict xm,
                              const float *restrict T, int64_t *restrict qj,
                              uint32_t (*restrict qm)[RB]) {
  __m512 t[RB], xb[RB][KPD];
  for (int r = 0; r < RB; r++) {
    t[r] = _mm512_set1_ps(T[r]);
    for (int c = 0; c < KPD; c++) xb[r][c] = _mm512_set1_ps(xm[r * KPD + c]);
  }
  int nq = 0;
  int64_t jv = *pjv;
  for (; jv < nj; jv += KT_KPF_VL) {
    __m512 e[RB];
    const __m512 n = _mm512_loadu_ps(yn + jv);
    for (int r = 0; r < RB; r++) e[r] = n;
    for (int c = 0; c < KPD; c++) {
      const __m512 yv = _mm512_loadu_ps(yc + c * TJ + jv);
      for (int r = 0; r < RB; r++) e[r] = _mm512_fmadd_ps(xb[r][c], yv, e[r]);
    }
    __mmask16 k[RB], any = 0;
    for (int r = 0; r < RB; r++) {
      k[r] = _mm512_cmp_ps_mask(e[r], t[r], _CMP_NGT_UQ);
      any = r ? _kor_mask16(any, k[r]) : k[r];
    }
    if (!_kortestz_mask16_u8(any, any)) {
      uint32_t keep = nj - jv < KT_KPF_VL ? (UINT32_C(1) << (nj - jv)) - 1 : 0xFFFFu;
      uint32_t all = 0; /* (the tile's last vector: lanes past nj) */
      for (int r = 0; r < RB; r++) all |= qm[nq][r] = _cvtmask16_u32(k[r]) & keep;
      if (all) {
        qj[nq] = jv;
        if (++nq == KT_KPF_Q) { jv += KT_KPF_VL; break; }
      }
    }
  }
  *pjv = jv;
  return nq;
}
/* Whether a tile may hold a lane that one of the nr rows would flag: its box
 * of y' (lo[KPD], hi[KPD]) lower-bounds |x' - y'|^2 by B (in double: exact
 * but for a relative (D + 2) 2^-53, covered by the factor); a row with
 * B - |x'|^2 > T has r^2 - X > T for every lane of the tile, more than the
 * scan's test e > T asks (_cpu_kmin: the proof's step 4). A NaN box
 * coordinate (a NaN row) bounds nothing; a NaN x' or T scans. */
static inline int kt_kpf_near(const double *restrict box, const float *restrict xm,
                              const double *restrict xx, const float *restrict T, int nr) {
  for (int r = 0; r < nr; r++) {
    double B = 0;
    for (int c = 0; c < KPD; c++) {
      const double v = -0.5 * (double)xm[r * KPD + c];
      const double lo = box[c] - v, hi = v - box[KPD + c];
      const double t = lo > hi ? lo : hi;
      B += t > 0 ? t * t : 0;
    }
    if (!(B * (1 - 0x1p-40) - xx[r] > (double)T[r])) return 1;
  }
  return 0;
}
#ifndef KT_KLT /* (value, index) order: NaN last, then the smaller index */
#define KT_KLT(a, ja, b, jb) (KT_LT(a, b) || (!KT_LT(b, a) && (ja) < (jb)))
#endif
/* The seed bound U_i (_cpu_kmin): from the KPW points of ysp (y packed by
 * tiles in the seed order) from start on, near x in the seed
 * order, the K-th smallest squared distance computed in double (NaN ones
 * left out), raised past the kernel's rounding: every one of those K
 * points' kernel values is strictly below it, so the row's final K-th value
 * is too (if it is below half the type's largest value: no kernel value
 * below it overflows). +inf where fewer than K are not NaN. */
#define KPK ${K}
#define KPW ${W}
static inline double kt_kpf_seed(const real_t *restrict x, const real_t *restrict ysp,
                                 int64_t start) {
  double dd[KPW], kb[KPK];
  double xd[KPD];
  for (int c = 0; c < KPD; c++) xd[c] = x[c];
  #pragma omp simd
  for (int w = 0; w < KPW; w++) {
    const int64_t j = start + w; /* y packed by tiles: tile j / TJ, lane j % TJ */
    const real_t *yj = ysp + j / TJ * (TJ * KPD) + j % TJ;
    double d = 0;
    for (int c = 0; c < KPD; c++) {
      const double t = xd[c] - (double)yj[c * TJ];
      d += t * t;
    }
    dd[w] = d;
  }
  int n = 0;
  for (int w = 0; w < KPW; w++) {
    const double d = dd[w];
    if (d != d || (n == KPK && !(d < kb[KPK - 1]))) continue;
    int p = n < KPK ? n++ : KPK - 1;
    for (; p > 0 && kb[p - 1] > d; p--) kb[p] = kb[p - 1];
    kb[p] = d;
  }
  if (n < KPK) return INFINITY;
  const double U = kb[KPK - 1] * (1 + (2 * KPD + 10) * KT_KPF_U) + 2 * KT_KPF_ETA;
  /* from half the type's largest value, a kernel value may overflow to inf */
  return U < KT_KPF_HALFMAX ? U : INFINITY;
}
/* The bound T_i of a row whose K-th kept value is thr (full: the list is
 * full), seed bound U, |x'_i|^2 = xx (in double), with s, Y and the
 * absolute term from kpar: with lim = thr where the list is full, thr is
 * not NaN and below U, else lim = U, T is NaN (every lane flagged) where
 * lim is +inf or xx or Y is not below FLT_MAX / 16 (NaN and inf included:
 * then no e_j, -2 x' or bound can overflow); else
 * s^2 lim (1 + (2D + 8) u) - xx + 2 (6D + 20) u_p (xx + 2 Y) + abs, rounded
 * up to float. */
static inline float kt_kpf_bound(real_t thr, int full, double U, double xx,
                                 const double *restrict kpar) {
  double lim = U;
  if (full && thr == thr && (double)thr < lim) lim = thr;
  if (!(lim < INFINITY) || !(xx < KT_KPF_BIG) || !(KT_KPF_YY < KT_KPF_BIG)) return NAN;
  const double t = KT_KPF_S * KT_KPF_S * lim * (1 + (2 * KPD + 8) * KT_KPF_U) - xx
                   + 2 * (6 * KPD + 20) * KT_KPF_UP * (xx + 2 * KT_KPF_YY) + KT_KPF_ABS;
  /* rounded up: t plus more than half a float ulp of t */
  return (float)(t + fabs(t) * 0x1p-22 + 0x1p-120);
}
#endif
