"""libsvm's SMO with its shrinking, on a whole problem: the C source.

:func:`kerneltools.linalg.smo_block` runs it with ``shrinking=True`` (and the
linear term ``p``): libsvm's ``Solver::Solve`` (``Solver_NU`` with ``nu``) as
Chang and Lin describe it ("LIBSVM: a library for support vector machines",
2011, section 5.1): every ``min(l, 1000)`` iterations the variables at a
bound whose gradient cannot join a violating pair leave the active set
(``be_shrunk``); once the active maximal violation is within ``10 eps`` the
whole gradient is rebuilt once (from ``G_bar``, the gradient part of the
variables at their upper bound, kept over all variables, plus the free
variables' terms) and the active set reset; when the active variables meet
the stopping rule the gradient is rebuilt and the rule checked on all.
libsvm moves a shrunk variable to the end of its arrays (``swap_index``);
here a permutation does the same, so that the scans run in libsvm's order
and ties (the last index of a maximum) break as libsvm's do: the iterates
are libsvm's, up to its kernel values' last float32 bit.

The block ``K`` is the whole problem's float32 kernel (libsvm's ``Qfloat``
values), read through the permutation; ``G`` and ``alpha`` are float64 in
the caller's order on both ends.
"""

from __future__ import annotations

__all__ = ["SHRINK_SOURCE"]

SHRINK_SOURCE = r"""
/* libsvm's Solver with shrinking (see linalg/_smo_shrink.py) */
typedef struct {
    int64_t l, active; int nu;
    double *y, *G, *a, *C, *p, *Gb, *kd; char *st; int64_t *perm;
    const float *K;
} kt_sv;
enum { KT_LOW = 0, KT_UP = 1, KT_FREE = 2 };

static inline double kt_k(const kt_sv *s, int64_t i, int64_t j) {
    return (double)s->K[s->perm[i] * s->l + s->perm[j]];
}
static inline double kt_q(const kt_sv *s, int64_t i, int64_t j) {
    return s->y[i] * s->y[j] * kt_k(s, i, j);
}
static inline void kt_status(kt_sv *s, int64_t i) {
    s->st[i] = s->a[i] >= s->C[i] ? KT_UP : (s->a[i] <= 0 ? KT_LOW : KT_FREE);
}
#define KT_SWAPD(x) { double t_ = s->x[i]; s->x[i] = s->x[j]; s->x[j] = t_; }
static void kt_swap(kt_sv *s, int64_t i, int64_t j) {
    KT_SWAPD(y) KT_SWAPD(G) KT_SWAPD(a) KT_SWAPD(C) KT_SWAPD(p) KT_SWAPD(Gb)
    KT_SWAPD(kd)
    char c = s->st[i]; s->st[i] = s->st[j]; s->st[j] = c;
    int64_t q = s->perm[i]; s->perm[i] = s->perm[j]; s->perm[j] = q;
}

/* libsvm's reconstruct_gradient: each output summed over the free active
 * variables in increasing position (both of libsvm's loop orders do) */
static void kt_reconstruct(kt_sv *s) {
    if (s->active == s->l) return;
    for (int64_t j = s->active; j < s->l; j++) {
        double g = s->Gb[j] + s->p[j];
        for (int64_t i = 0; i < s->active; i++)
            if (s->st[i] == KT_FREE) g += s->a[i] * kt_q(s, j, i);
        s->G[j] = g;
    }
}

/* be_shrunk with libsvm's four maxima (Solver: m[2] = m[0], m[3] = m[1]
 * swapped per sign as its Gmax1/Gmax2) */
static int kt_be_shrunk(const kt_sv *s, int64_t i, const double *m) {
    int pos = s->y[i] > 0;
    if (s->st[i] == KT_UP) return -s->G[i] > (pos ? m[0] : m[3]);
    if (s->st[i] == KT_LOW) return s->G[i] > (pos ? m[1] : m[2]);
    return 0;
}

static void kt_do_shrinking(kt_sv *s, double eps, int *unshrink) {
    /* m: max -G over up and G over low, for y = +1 (0, 1) and y = -1 (3, 2);
     * Solver ties both signs together, with libsvm's >= */
    double m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < s->active; i++) {
        int pos = s->y[i] > 0;
        if (s->nu) {
            if (s->st[i] != KT_UP) {
                if (pos) { if (-s->G[i] > m[0]) m[0] = -s->G[i]; }
                else if (-s->G[i] > m[3]) m[3] = -s->G[i];
            }
            if (s->st[i] != KT_LOW) {
                if (pos) { if (s->G[i] > m[1]) m[1] = s->G[i]; }
                else if (s->G[i] > m[2]) m[2] = s->G[i];
            }
        } else if (pos) {
            if (s->st[i] != KT_UP && -s->G[i] >= m[0]) m[0] = -s->G[i];
            if (s->st[i] != KT_LOW && s->G[i] >= m[1]) m[1] = s->G[i];
        } else {
            if (s->st[i] != KT_UP && -s->G[i] >= m[1]) m[1] = -s->G[i];
            if (s->st[i] != KT_LOW && s->G[i] >= m[0]) m[0] = s->G[i];
        }
    }
    if (!s->nu) { m[2] = m[0]; m[3] = m[1]; }
    double gap = s->nu ? fmax(m[0] + m[1], m[2] + m[3]) : m[0] + m[1];
    if (!*unshrink && gap <= eps * 10) {
        *unshrink = 1;
        kt_reconstruct(s);
        s->active = s->l;
    }
    for (int64_t i = 0; i < s->active; i++)
        if (kt_be_shrunk(s, i, m)) {
            s->active--;
            while (s->active > i) {
                if (!kt_be_shrunk(s, s->active, m)) { kt_swap(s, i, s->active); break; }
                s->active--;
            }
        }
}

/* libsvm's select_working_set (Solver_NU's with nu): 0 and the pair, or 1
 * when the active variables meet the rule */
static int kt_select(const kt_sv *s, double eps, int64_t *oi, int64_t *oj) {
    double gmax[2] = {-INFINITY, -INFINITY}, gmax2[2] = {-INFINITY, -INFINITY};
    int64_t gi[2] = {-1, -1}, jmin = -1;
    double best = INFINITY;
    for (int64_t t = 0; t < s->active; t++) {
        int g = s->nu ? (s->y[t] > 0) : 0;
        if (s->y[t] > 0) {
            if (s->st[t] != KT_UP && -s->G[t] >= gmax[g]) { gmax[g] = -s->G[t]; gi[g] = t; }
        } else if (s->st[t] != KT_LOW && s->G[t] >= gmax[g]) { gmax[g] = s->G[t]; gi[g] = t; }
    }
    for (int64_t j = 0; j < s->active; j++) {
        int g = s->nu ? (s->y[j] > 0) : 0;
        double gd;
        if (s->y[j] > 0) {
            if (s->st[j] == KT_LOW) continue;
            gd = gmax[g] + s->G[j];
            if (s->G[j] >= gmax2[g]) gmax2[g] = s->G[j];
        } else {
            if (s->st[j] == KT_UP) continue;
            gd = gmax[g] - s->G[j];
            if (-s->G[j] >= gmax2[g]) gmax2[g] = -s->G[j];
        }
        if (gd > 0) {
            int64_t i = gi[g];
            double quad = s->kd[i] + s->kd[j] - 2.0 * kt_k(s, i, j);
            double obj = -(gd * gd) / (quad > 0 ? quad : TAU);
            if (obj <= best) { jmin = j; best = obj; }
        }
    }
    double gap = s->nu ? fmax(gmax[0] + gmax2[0], gmax[1] + gmax2[1])
                       : gmax[0] + gmax2[0];
    if (gap < eps || jmin == -1) return 1;
    *oi = gi[s->nu ? (s->y[jmin] > 0) : 0];
    *oj = jmin;
    return 0;
}

/* one pair's update (libsvm's Solve body): alpha, G over the active set,
 * status and G_bar over all */
static void kt_pair(kt_sv *s, int64_t i, int64_t j) {
    double ai = s->a[i], aj = s->a[j], oi = ai, oj = aj;
    double quad = s->kd[i] + s->kd[j] - 2 * kt_k(s, i, j);
    kt_update_pair(&ai, &aj, s->G[i], s->G[j], s->y[i], s->y[j], s->C[i],
                   s->C[j], quad);
    s->a[i] = ai; s->a[j] = aj;
    double di = ai - oi, dj = aj - oj;
    for (int64_t k = 0; k < s->active; k++)
        s->G[k] += kt_q(s, i, k) * di + kt_q(s, j, k) * dj;
    int ui = s->st[i] == KT_UP, uj = s->st[j] == KT_UP;
    kt_status(s, i); kt_status(s, j);
    int64_t ij[2] = {i, j}, u[2] = {ui, uj};
    for (int e = 0; e < 2; e++) {
        int64_t t = ij[e];
        if (u[e] == (s->st[t] == KT_UP)) continue;
        double c = s->C[t];
        if (u[e]) for (int64_t k = 0; k < s->l; k++) s->Gb[k] -= c * kt_q(s, t, k);
        else for (int64_t k = 0; k < s->l; k++) s->Gb[k] += c * kt_q(s, t, k);
    }
}

/* alpha, G (the gradient Q alpha + p, as libsvm's initial one) updated in
 * place; returns the iterations, -1 without memory */
int64_t kt_smo_shrink(int64_t l, double *alpha, double *G, const double *p,
                      const double *y, const double *C, const float *K,
                      const double *kd, double eps, int nu, int64_t max_iter) {
    kt_sv sv = {l, l, nu, 0, 0, 0, 0, 0, 0, 0, 0, 0, K};
    kt_sv *s = &sv;
    double *buf = malloc(sizeof(double) * 7 * l);
    s->st = malloc(l); s->perm = malloc(sizeof(int64_t) * l);
    if (!buf || !s->st || !s->perm) { free(buf); free(s->st); free(s->perm); return -1; }
    s->y = buf; s->G = buf + l; s->a = buf + 2 * l; s->C = buf + 3 * l;
    s->p = buf + 4 * l; s->Gb = buf + 5 * l; s->kd = buf + 6 * l;
    for (int64_t t = 0; t < l; t++) {
        s->y[t] = y[t]; s->G[t] = G[t]; s->a[t] = alpha[t]; s->C[t] = C[t];
        s->p[t] = p[t]; s->Gb[t] = 0; s->kd[t] = kd[t]; s->perm[t] = t;
        kt_status(s, t);
    }
    for (int64_t i = 0; i < l; i++)  /* libsvm's G_bar, in its order */
        if (s->st[i] == KT_UP)
            for (int64_t j = 0; j < l; j++) s->Gb[j] += s->C[i] * kt_q(s, i, j);
    int64_t its = 0, counter = (l < 1000 ? l : 1000) + 1;
    int unshrink = 0;
    while (max_iter == -1 || its < max_iter) {
        if (--counter == 0) {
            counter = l < 1000 ? l : 1000;
            kt_do_shrinking(s, eps, &unshrink);
        }
        int64_t i, j;
        if (kt_select(s, eps, &i, &j)) {
            kt_reconstruct(s);
            s->active = l;
            if (kt_select(s, eps, &i, &j)) break;
            counter = 1;
        }
        its++;
        kt_pair(s, i, j);
    }
    kt_reconstruct(s);
    for (int64_t t = 0; t < l; t++) { alpha[s->perm[t]] = s->a[t]; G[s->perm[t]] = s->G[t]; }
    free(buf); free(s->st); free(s->perm);
    return its;
}
"""
