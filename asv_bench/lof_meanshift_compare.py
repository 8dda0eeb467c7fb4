#!/usr/bin/env python
"""Radius neighbours, LocalOutlierFactor and MeanShift: kerneltools against
scikit-learn, one run.

Points: 20 Gaussian blobs (standard deviation 1, centres uniform in
[-10, 10]^D), ``make_blobs(random_state=0)``. Systems, each on the whole case:

- radius: ``NearestNeighbors(radius=r).fit(X).radius_neighbors(X)``, r the
  median distance of a point to its 20th neighbour (scikit-learn picks its
  tree); the table says whether the neighbour sets agree.
- LOF: ``LocalOutlierFactor(n_neighbors=20).fit(X)`` (scikit-learn picks its
  tree, ``algorithm='auto'``); the table gives the largest difference of
  ``negative_outlier_factor_`` between the two.
- MeanShift: ``MeanShift(bandwidth=b).fit(X)`` with every point a seed
  (``bin_seeding=False``, scikit-learn's default) or ``--bin-seeding``; b
  from the case (``N:D:b``, 1.5 by default: a blob's scale in D = 3; in
  D = 32 the blobs' points lie ~8 apart, so b = 8); the table says whether
  the labels agree and the largest centre difference.

- radius predictions (``--radius-predict N:Q:D``): ``RadiusNeighborsClassifier``
  (``weights='uniform'``, blob labels) and ``RadiusNeighborsRegressor``
  (``weights='distance'``, a smooth target) fitted on N points, ``predict`` on
  Q others, r as above (about 20 neighbours per query); the table says whether
  the predictions agree. Run it with ``PYTHONPATH`` at an older checkout to
  time that one (issue 25's before/after).

scikit-learn's MeanShift moves one seed at a time; above ``--sklearn-max-n``
points it is not run (hours), and the row says so.

    python asv_bench/lof_meanshift_compare.py   # radius, LOF 1e5 (D 3, 32); MeanShift 2e4
    python asv_bench/lof_meanshift_compare.py --lof 2e4:3 --mean-shift 5e3:3
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import cases, emit, table_head  # noqa: E402


def blobs(n: int, d: int, labels: bool = False):
    """The points (and, with ``labels``, their blob numbers)."""
    from sklearn.datasets import make_blobs

    centres = np.random.default_rng(0).uniform(-10, 10, size=(20, d))
    X, y = make_blobs(n_samples=n, centers=centres, cluster_std=1.0, random_state=0)
    return (X, y) if labels else X


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def cpu_timed(fn):
    """(wall seconds, CPU seconds of this process, result): on a shared
    machine the CPU seconds say what the wall time hides."""
    c0 = time.process_time()
    wall, out = timed(fn)
    return wall, time.process_time() - c0, out


def radius_rows(n: int, d: int, sklearn_max_n: int) -> list[str]:
    from sklearn.neighbors import NearestNeighbors as SkNN

    from kerneltools.estimators import NearestNeighbors

    X = blobs(n, d)
    sample = X[np.random.default_rng(1).choice(n, 500, replace=False)]
    r = float(np.median(NearestNeighbors(n_neighbors=20).fit(X).kneighbors(sample)[0][:, -1]))
    NearestNeighbors(radius=r).fit(X[:3000]).radius_neighbors(X[:3000])  # compiles
    t_kt, c_kt, (_, ours) = cpu_timed(
        lambda: NearestNeighbors(radius=r).fit(X).radius_neighbors(X))
    mean = np.mean([len(i) for i in ours])
    if n > sklearn_max_n:
        return [f"| radius_neighbors | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | "
                f"not run | - | {mean:.0f} neighbours per point |"]
    t_sk, c_sk, (_, ref) = cpu_timed(lambda: SkNN(radius=r).fit(X).radius_neighbors(X))
    same = all(np.array_equal(np.sort(a), np.sort(b)) for a, b in zip(ours, ref))
    return [f"| radius_neighbors | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | "
            f"{t_sk:.2f} ({c_sk:.2f} CPU) | {t_sk / t_kt:.1f} | sets equal: {same}, "
            f"{mean:.0f} neighbours per point |"]


def radius_predict_rows(n: int, q: int, d: int) -> list[str]:
    from sklearn import neighbors as skn

    from kerneltools.estimators import neighbors as ktn

    X, labels = blobs(n + q, d, labels=True)
    X, Q, labels = X[:n], X[n:], labels[:n]
    target = np.sin(X).sum(axis=1)
    sample = Q[np.random.default_rng(1).choice(q, 500, replace=False)]
    r = float(np.median(ktn.NearestNeighbors(n_neighbors=20).fit(X)
                        .kneighbors(sample)[0][:, -1]))
    rows = []
    for name, kind, weights, y in (
            ("RadiusNeighborsClassifier.predict", "RadiusNeighborsClassifier",
             "uniform", labels),
            ("RadiusNeighborsRegressor.predict", "RadiusNeighborsRegressor",
             "distance", target)):
        kw = dict(radius=r, weights=weights)
        if kind == "RadiusNeighborsClassifier":
            kw["outlier_label"] = "most_frequent"
        ours = getattr(ktn, kind)(**kw).fit(X, y)
        ours.predict(Q[:2000])  # compiles
        t_kt, c_kt, got = cpu_timed(lambda: ours.predict(Q))  # noqa: B023
        ref = getattr(skn, kind)(**kw).fit(X, y)
        t_sk, c_sk, exp = cpu_timed(lambda: ref.predict(Q))  # noqa: B023
        agree = (f"labels equal: {np.array_equal(got, exp)}" if y is labels else
                 f"max difference {np.nanmax(np.abs(got - exp)):.1e}")
        rows.append(f"| {name} ({weights}) | {d} | {n:.0e} x {q:.0e} | {t_kt:.2f} "
                    f"({c_kt:.2f} CPU) | {t_sk:.2f} ({c_sk:.2f} CPU) | "
                    f"{t_sk / t_kt:.1f} | {agree} |")
    return rows


def lof_rows(n: int, d: int, sklearn_max_n: int) -> list[str]:
    from sklearn.neighbors import LocalOutlierFactor as SkLOF

    from kerneltools.estimators import LocalOutlierFactor

    X = blobs(n, d)
    LocalOutlierFactor(n_neighbors=20).fit(X[:2000])  # compiles
    t_kt, c_kt, ours = cpu_timed(lambda: LocalOutlierFactor(n_neighbors=20).fit(X))
    if n > sklearn_max_n:
        return [f"| LOF | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | not run | - "
                "| - |"]
    t_sk, c_sk, ref = cpu_timed(lambda: SkLOF(n_neighbors=20).fit(X))
    diff = np.max(np.abs(ours.negative_outlier_factor_ - ref.negative_outlier_factor_))
    return [f"| LOF | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | {t_sk:.2f} "
            f"({c_sk:.2f} CPU) | {t_sk / t_kt:.1f} | max NOF difference {diff:.1e} |"]


def mean_shift_rows(n: int, d: int, b: float, bin_seeding: bool, sklearn_max_n: int):
    from sklearn.cluster import MeanShift as SkMS

    from kerneltools.estimators import MeanShift

    X = blobs(n, d)
    MeanShift(bandwidth=b).fit(X[:500])  # compiles
    t_kt, c_kt, ours = cpu_timed(
        lambda: MeanShift(bandwidth=b, bin_seeding=bin_seeding).fit(X))
    name = f"MeanShift (b = {b:g}{', bin seeding' if bin_seeding else ''})"
    if n > sklearn_max_n:
        return [f"| {name} | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | not run | - "
                f"| {len(ours.cluster_centers_)} centres |"]
    t_sk, c_sk, ref = cpu_timed(
        lambda: SkMS(bandwidth=b, bin_seeding=bin_seeding).fit(X))
    same = ours.cluster_centers_.shape == ref.cluster_centers_.shape
    gap = (np.max(np.abs(ours.cluster_centers_ - ref.cluster_centers_))
           if same else None)
    note = (f"labels equal: {bool(np.all(ours.labels_ == ref.labels_))}, max centre "
            f"difference {gap:.1e}" if same else f"{len(ours.cluster_centers_)} vs "
            f"{len(ref.cluster_centers_)} centres")
    return [f"| {name} | {d} | {n:.0e} | {t_kt:.2f} ({c_kt:.2f} CPU) | {t_sk:.2f} "
            f"({c_sk:.2f} CPU) | {t_sk / t_kt:.1f} | {note} |"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--radius", default="1e5:3,1e5:32", help="N:D cases, comma-separated")
    p.add_argument("--radius-predict", default="1e5:1e4:3",
                   help="N:Q:D cases (training, query points, dimension)")
    p.add_argument("--lof", default="1e5:3,1e5:32", help="N:D cases")
    p.add_argument("--mean-shift", default="2e4:3",
                   help="N:D or N:D:bandwidth cases (bandwidth 1.5 by default)")
    p.add_argument("--bin-seeding", action="store_true")
    p.add_argument("--sklearn-max-n", type=float, default=1e5)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    lines = table_head("seconds of fit, ratio = scikit-learn / kerneltools",
                       ["estimator", "D", "N", "kerneltools s", "scikit-learn s",
                        "ratio", "check"])
    for n, d in cases(args.radius):
        lines += radius_rows(n, d, args.sklearn_max_n)
        print(lines[-1], file=sys.stderr, flush=True)
    for case in filter(None, args.radius_predict.split(",")):
        n, q, d = (int(float(v)) for v in case.split(":"))
        lines += radius_predict_rows(n, q, d)
        print(lines[-1], file=sys.stderr, flush=True)
    for n, d in cases(args.lof):
        lines += lof_rows(n, d, args.sklearn_max_n)
        print(lines[-1], file=sys.stderr, flush=True)
    for case in filter(None, args.mean_shift.split(",")):
        n, d, *b = case.split(":")
        lines += mean_shift_rows(int(float(n)), int(d), float(b[0]) if b else 1.5,
                                 args.bin_seeding, args.sklearn_max_n)
        print(lines[-1], file=sys.stderr, flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
