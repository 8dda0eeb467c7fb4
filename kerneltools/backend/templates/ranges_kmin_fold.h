for (int e = 0; e < $E; e++) {
  const real_t *b = buf0 + e * TJ;
  /* the K-th (value, index), kept in registers: with few candidates per
     row (block-sparse), most of the time goes to this test */
  real_t thr = S->kv[e][$K - 1];
  int64_t thri = S->ki[e][$K - 1];
  if (thri >= 0) { /* most tiles hold nothing below the K-th value */
    int any = 0;
    #pragma omp simd reduction(|:any)
    for (int64_t jj = 0; jj < njv; jj++) any |= (jj < nj) & !KT_LT(thr, b[jj]);
    if (!any) continue;
  }
  for (int64_t jc = 0; jc < nj; jc += 16) {
    const int64_t je = jc + 16 < nj ? jc + 16 : nj;
    /* bit t: candidate jc + t may enter (vectorised test); then only
       those are visited, without a mispredicted branch per candidate */
    uint32_t mask = je - jc == 16 ? 0xFFFFu : (1u << (je - jc)) - 1u;
    if (thri >= 0) {
      uint32_t pass = 0;
      #pragma omp simd reduction(|:pass)
      for (int64_t jj = jc; jj < je; jj++) pass |= (uint32_t)!KT_LT(thr, b[jj]) << (jj - jc);
      mask &= pass;
    }
    while (mask) {
      const int64_t jj = jc + __builtin_ctz(mask);
      mask &= mask - 1u;
      const real_t v = b[jj];
      if (thri >= 0 && KT_LT(thr, v)) continue;
      const int64_t jo = jmap[j0 + jj];
      if (thri >= 0 && !KT_KLT(v, jo, thr, thri)) continue;
      int p = $K - 1;
      while (p > 0 && (S->ki[e][p - 1] < 0 || KT_KLT(v, jo, S->kv[e][p - 1], S->ki[e][p - 1]))) {
        S->kv[e][p] = S->kv[e][p - 1]; S->ki[e][p] = S->ki[e][p - 1]; p--;
      }
      S->kv[e][p] = v; S->ki[e][p] = jo;
      thr = S->kv[e][$K - 1]; thri = S->ki[e][$K - 1];
    }
  }
}
