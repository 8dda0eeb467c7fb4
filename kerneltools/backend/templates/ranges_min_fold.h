for (int e = 0; e < $E; e++) {
  const real_t *b = buf0 + e * TJ;
  for (int64_t jj = 0; jj < nj; jj++) {
    const real_t v = b[jj];
    const real_t w = S->mv[e];
    /* NaN wins (first index among NaNs), as numpy.argmin */
    const int better = v $CMP w || (v != v && w == w);
    const int equal = v == w || (v != v && w != w);
    if (S->mi[e] < 0 || better || (equal && jmap[j0 + jj] < S->mi[e])) {
      S->mv[e] = v; S->mi[e] = jmap[j0 + jj];
    }
  }
}
