{
  const real_t thr = S->kv[0][${K} - 1];
  int any = S->ki[0][${K} - 1] < 0;
  #pragma omp simd reduction(|:any)
  for (int64_t jj = 0; jj < njv; jj++) {
    const int64_t j = j0 + jj;
${ij_code}
    buf0[jj] = ${value};
    any |= (jj < nj) & !KT_LT(thr, ${value});
  }
  if (any) {
${fold}
  }
}
