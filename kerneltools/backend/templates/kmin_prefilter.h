
/* K-min of a squared distance |x_i - y_j|^2: the expanded-distance
 * prefilter (see _cpu_kmin.py for the bound's proof). With x', y' the points
 * moved by a centre c (kpar[1..D]), |y'_j|^2 (kyn) and y' packed by tiles
 * (kyp), the scan computes, RB rows at a time, e_j = |y'_j|^2 + sum_c
 * (-2 x'_c) y'_c (D FMAs per pair) and flags the lanes where e_j is not above
 * the row's bound T_i (kt_kpf_bound): every lane whose exact (direct-form)
 * value could rank before the row's K-th kept value is flagged, and a NaN
 * bound or a NaN e_j flags the lane. It returns at the first vector where a
 * row has a flagged lane (its masks in m), or at nj. */
#if defined(__AVX512F__)
#define KPD ${D}
#if defined(KT_REAL_double)
#define KT_KPF_VL 8
typedef __m512d kt_kpf_v;
#define KT_KPF_LOAD _mm512_loadu_pd
#define KT_KPF_SET1 _mm512_set1_pd
#define KT_KPF_FMA _mm512_fmadd_pd
#define KT_KPF_NGT(a, b) ((uint32_t)_mm512_cmp_pd_mask(a, b, _CMP_NGT_UQ))
#define KT_KPF_U 0x1p-53
#define KT_KPF_ETA 0x1p-1000 /* >= 56 x the smallest subnormal, and normal */
#define KT_KPF_BIG 0x1p1020
#else
#define KT_KPF_VL 16
typedef __m512 kt_kpf_v;
#define KT_KPF_LOAD _mm512_loadu_ps
#define KT_KPF_SET1 _mm512_set1_ps
#define KT_KPF_FMA _mm512_fmadd_ps
#define KT_KPF_NGT(a, b) ((uint32_t)_mm512_cmp_ps_mask(a, b, _CMP_NGT_UQ))
#define KT_KPF_U 0x1p-24
#define KT_KPF_ETA 0x1p-120
#define KT_KPF_BIG 0x1p124
#endif
static inline int64_t kt_kpf_scan(const real_t *restrict yc, const real_t *restrict yn,
                                  int64_t jv, int64_t nj, const real_t *restrict xm,
                                  const real_t *restrict T, uint32_t *restrict m) {
  kt_kpf_v t[RB], xb[RB][KPD];
  for (int r = 0; r < RB; r++) {
    t[r] = KT_KPF_SET1(T[r]);
    for (int c = 0; c < KPD; c++) xb[r][c] = KT_KPF_SET1(xm[r * KPD + c]);
  }
  for (; jv < nj; jv += KT_KPF_VL) {
    kt_kpf_v e[RB];
    const kt_kpf_v n = KT_KPF_LOAD(yn + jv);
    for (int r = 0; r < RB; r++) e[r] = n;
    for (int c = 0; c < KPD; c++) {
      const kt_kpf_v yv = KT_KPF_LOAD(yc + c * TJ + jv);
      for (int r = 0; r < RB; r++) e[r] = KT_KPF_FMA(xb[r][c], yv, e[r]);
    }
    uint32_t any = 0;
    for (int r = 0; r < RB; r++) any |= m[r] = KT_KPF_NGT(e[r], t[r]);
    if (any) {
      if (nj - jv < KT_KPF_VL) { /* the tile's last vector: lanes past nj */
        any = 0;
        for (int r = 0; r < RB; r++) any |= m[r] &= (UINT32_C(1) << (nj - jv)) - 1;
        if (!any) continue;
      }
      return jv;
    }
  }
  return jv;
}
/* The seed bound U_i (_cpu_kmin): from the KPW points ys near x in the seed
 * order, the K-th smallest squared distance computed in double (NaN ones
 * left out), raised past the kernel's rounding: every one of those K
 * points' kernel values is strictly below it, so the row's final K-th value
 * is too. +inf where fewer than K are not NaN. */
#define KPK ${K}
#define KPW ${W}
static inline double kt_kpf_seed(const real_t *restrict x, const real_t *restrict ys) {
  double kb[KPK];
  int n = 0;
  for (int w = 0; w < KPW; w++) {
    double d = 0;
    for (int c = 0; c < KPD; c++) {
      const double t = (double)x[c] - (double)ys[w * KPD + c];
      d += t * t;
    }
    if (d != d || (n == KPK && !(d < kb[KPK - 1]))) continue;
    int p = n < KPK ? n++ : KPK - 1;
    for (; p > 0 && kb[p - 1] > d; p--) kb[p] = kb[p - 1];
    kb[p] = d;
  }
  return n < KPK ? INFINITY : kb[KPK - 1] * (1 + (2 * KPD + 10) * KT_KPF_U) + 2 * KT_KPF_ETA;
}
/* The bound T_i of a row whose K-th kept value is thr (full: the list is
 * full), seed bound U, |x'_i|^2 = xx (in double) and max_j |y'_j|^2 <= yy:
 * with lim = thr where the list is full, thr is not NaN and below U, else
 * lim = U, T is NaN (every lane flagged) where lim is +inf or xx or yy is
 * not below the dtype's largest value / 16 (NaN and inf included: then no
 * e_j, -2 x' or bound can overflow); else
 * lim (1 + (2D + 8) u) - xx + 2 ((6D + 20) u (xx + 2 yy) + eta), rounded up
 * to real_t (eta >= 8 (D + 4) times the smallest subnormal, but itself
 * normal: a subnormal operand costs a microcode assist). */
static inline real_t kt_kpf_bound(real_t thr, int full, double U, double xx, double yy) {
  double lim = U;
  if (full && thr == thr && (double)thr < lim) lim = thr;
  if (!(lim < INFINITY) || !(xx < KT_KPF_BIG) || !(yy < KT_KPF_BIG)) return (real_t)NAN;
  const double u = KT_KPF_U;
  const double t = lim * (1 + (2 * KPD + 8) * u) - xx
                   + 2 * ((6 * KPD + 20) * u * (xx + 2 * yy) + KT_KPF_ETA);
#if defined(KT_REAL_double)
  return t;
#else /* rounded up: t plus more than half a float ulp of t */
  return (real_t)(t + fabs(t) * 0x1p-22 + 0x1p-120);
#endif
}
#endif