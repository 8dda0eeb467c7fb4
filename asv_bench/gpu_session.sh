#!/usr/bin/env bash
# One GPU session, run on a machine with an NVIDIA GPU from the repository root:
# the gpu-marked tests (the shared correctness suite on the CUDA backend), the
# GPU benchmark against pykeops and dense CuPy, the block-sparse benchmark
# (CUDA vs our CPU path), the launch-shape sweep, the estimators on CuPy
# arrays (asv_bench/estimators_gpu.py) and SamplesLoss on CUDA tensors
# (asv_bench/samples_loss_gpu.py).
# Results go under $OUT (default /tmp/kt-gpu). pykeops travels as wheels in .whl/.
set -u
OUT=${OUT:-/tmp/kt-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$OUT/session.log"; }
# The whole script fits a session's device time (15 minutes, the machine's
# start included): each step gets its own timeout or what is left of
# KT_SESSION_BUDGET seconds, whichever is less; a step with under 30 s left
# is skipped (and says so in session.log). The steps run in order of need.
BUDGET=${KT_SESSION_BUDGET:-660}
limit() { local left=$(( BUDGET - ($(date +%s) - start) )); [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }
room() { [ "$(limit 30)" -ge 30 ] || { stamp "skipped $1: session budget spent"; return 1; }; }
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH="$PWD:/tmp/site"
else
  export PYTHONPATH="$PWD"
fi
NV=$(python3 -c "import nvidia, os; print(list(nvidia.__path__)[0])" 2>/dev/null)
[ -n "$NV" ] && export LD_LIBRARY_PATH="$(ls -d "$NV"/*/lib 2>/dev/null | tr '\n' ':')/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
python3 -m kerneltools info > "$OUT/info.txt" 2>&1
stamp "info done"
timeout "$(limit ${KT_TEST_TIMEOUT:-180})" python3 -m pytest -q -m gpu -n 16 -p no:cacheprovider -p no:randomly \
  tests > "$OUT/gpu_tests.txt" 2>&1
stamp "gpu tests rc=$?"
room benchmark && timeout "$(limit ${KT_BENCH_TIMEOUT:-240})" python3 asv_bench/cuda_compare.py --out "$OUT/cuda_bench.json" \
  > "$OUT/bench.log" 2>&1
stamp "benchmark rc=$?"
# block-sparse (the native CUDA kernel): pruned k-NN D = 3 and the truncated
# Gaussian kernel at 10^6 points against our CPU path, the former per-block
# path once at 10^5
if [ "${KT_RANGES_TIMEOUT:-150}" != 0 ] && room ranges; then
  timeout "$(limit ${KT_RANGES_TIMEOUT:-150})" python3 asv_bench/cuda_compare.py --ranges --repeat 3 \
    --out "$OUT/cuda_ranges.json" > "$OUT/ranges.log" 2>&1
  stamp "block-sparse benchmark rc=$?"
fi
if [ "${KT_SWEEP_TIMEOUT:-90}" != 0 ] && room sweep; then
  timeout "$(limit ${KT_SWEEP_TIMEOUT:-90})" python3 asv_bench/cuda_compare.py --sweep --repeat 2 \
    --out "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
  stamp "sweep rc=$?"
fi
# tensor cores (issue 24): the opt-in 3xTF32 mma kernel vs our SIMT kernel and
# pykeops, Gaussian K @ B at N = M = 10^5, D = 64 and 256, B with 1 and 64
# columns, float32 accuracy against float64 (150 s: an estimate, not measured)
if [ "${KT_TCORE_TIMEOUT:-150}" != 0 ] && room tcore; then
  timeout "$(limit ${KT_TCORE_TIMEOUT:-150})" python3 asv_bench/tcore_compare.py \
    --out "$OUT/tcore.json" > "$OUT/tcore.log" 2>&1
  stamp "tensor-core benchmark rc=$?"
fi
# estimators on device arrays (issue 24): KernelRidge (Falkon) and Nystroem on
# CuPy arrays vs our CPU path at 10^5 and 10^6, the GP (iterative at 10^4 and
# 10^5, exact at 4,000): time, peak GPU memory, share of time in host-device
# copies (the GP rows come last; the 420 s default, up from 240 s, is an estimate
# for the added GP runs, not yet measured on a GPU)
if [ "${KT_ESTIMATORS_TIMEOUT:-420}" != 0 ] && room estimators; then
  SCIPY_ARRAY_API=1 timeout "$(limit ${KT_ESTIMATORS_TIMEOUT:-420})" python3 asv_bench/estimators_gpu.py \
    --estimators krr nystroem gp --sklearn --out "$OUT/estimators_gpu.json" > "$OUT/estimators_gpu.log" 2>&1
  stamp "estimators benchmark rc=$?"
fi
# exact k-NN on CuPy arrays at 10^6 (D = 3 pruned, D = 64 brute force) vs our
# CPU path at 10^5 (its own step: the session's other timings stay as they were)
if [ "${KT_KNN_TIMEOUT:-120}" != 0 ] && room knn; then
  timeout "$(limit ${KT_KNN_TIMEOUT:-120})" python3 asv_bench/estimators_gpu.py --estimators knn \
    --sizes 100000 1000000 --repeat 2 --out "$OUT/estimators_gpu_knn.json" \
    > "$OUT/estimators_gpu_knn.log" 2>&1
  stamp "k-NN estimators benchmark rc=$?"
fi
# the Sinkhorn divergence on CuPy arrays (issue 24): 10^5 and 10^6 points, 3-D,
# float32, blur 0.05, dense and multiscale; the multiscale CPU anchor at 10^5
if [ "${KT_SINKHORN_TIMEOUT:-300}" != 0 ] && room sinkhorn; then
  timeout "$(limit ${KT_SINKHORN_TIMEOUT:-300})" python3 asv_bench/estimators_gpu.py --estimators sinkhorn \
    --out "$OUT/sinkhorn_gpu.json" > "$OUT/sinkhorn_gpu.log" 2>&1
  stamp "sinkhorn benchmark rc=$?"
fi
# SamplesLoss on CUDA tensors (issue 27): every loss's value and gradients in
# x, y, a, b on CUDA tensors against CPU tensors at 2,000 points (float32 and
# float64) with the device-to-host copies counted, then one forward + backward
# of the Sinkhorn loss at 10^5 points against GeomLoss's online backend where
# geomloss and pykeops import (wheels in .whl/; else the row says why). 150 s:
# an estimate (GeomLoss's first call compiles with KeOps), not yet measured
if [ "${KT_SAMPLES_LOSS_TIMEOUT:-150}" != 0 ] && room samples_loss; then
  timeout "$(limit ${KT_SAMPLES_LOSS_TIMEOUT:-150})" python3 asv_bench/samples_loss_gpu.py \
    --out "$OUT/samples_loss_gpu.json" > "$OUT/samples_loss_gpu.log" 2>&1
  stamp "SamplesLoss on CUDA tensors rc=$?"
fi
# DBSCAN and HDBSCAN (issue 41), ours only, the reductions on the GPU (backend
# auto): density_compare.py's 3*10^4 x 9 and 10^5 x 9 DBSCAN, 10^5 x 2 HDBSCAN
# (scikit-learn's CPU times are in density_compare_results.md). 180 s: an
# estimate, not yet measured on a GPU
if [ "${KT_DENSITY_TIMEOUT:-180}" != 0 ] && room density; then
  timeout "$(limit ${KT_DENSITY_TIMEOUT:-180})" python3 asv_bench/density_compare.py \
    --only dbscan,dbscan100k,hdbscan --systems kerneltools > "$OUT/density_gpu.log" 2>&1
  stamp "density clustering benchmark rc=$?"
fi
# LabelSpreading / LabelPropagation (issue 42), rbf, 15 features, on the CUDA
# backend (every pair: the cell pruning is the CPU's) at 2*10^4 and 10^5, ours
# only (scikit-learn's dense graph needs 9.2 GB at 2*10^4). 180 s: an
# estimate, not yet measured on a GPU
if [ "${KT_SEMISUP_TIMEOUT:-180}" != 0 ] && room semisup; then
  timeout "$(limit ${KT_SEMISUP_TIMEOUT:-180})" python3 asv_bench/semisup_compare.py \
    --only spreading,propagation --sizes 20000,100000 --sklearn-max 0 \
    > "$OUT/semisup_gpu.log" 2>&1
  stamp "label spreading benchmark rc=$?"
fi
# binary SVC (issue 40) at 10^5, rbf: the gradient reductions on the CUDA
# backend (auto), the blocks and the inner SMO on the host; fit time, peak host
# memory, accuracy, support vectors (150 s: an estimate, not yet measured)
if [ "${KT_SVM_TIMEOUT:-150}" != 0 ] && room svm; then
  timeout "$(limit ${KT_SVM_TIMEOUT:-150})" python3 asv_bench/svm_compare.py --n 1e5 \
    --systems kerneltools > "$OUT/svm_gpu.log" 2>&1
  stamp "SVC benchmark rc=$?"
fi
# kerneltools.jax on the GPU (issue 44): where JAX sees a GPU (jax[cuda]
# wheels in .whl/), tests/jax with the GPU as JAX's default device (every
# reduction is the CUDA custom call on XLA's stream), then jax_compare.py
# --gpu (K @ b at 10^5 against the NumPy front end on CuPy arrays and dense
# jax.numpy at 2*10^4; the MMD gradient at 10^5 against the torch front end).
# 240 s: an estimate, not yet measured on a GPU
if [ "${KT_JAX_TIMEOUT:-240}" != 0 ] && room jax; then
  if python3 -c "import jax; assert jax.devices('gpu')" > "$OUT/jax_gpu.log" 2>&1; then
    timeout "$(limit $(( ${KT_JAX_TIMEOUT:-240} / 2 )))" python3 -m pytest -q -n 4 \
      -p no:cacheprovider -p no:randomly tests/jax > "$OUT/jax_gpu_tests.txt" 2>&1
    stamp "jax tests on the GPU rc=$?"
    timeout "$(limit $(( ${KT_JAX_TIMEOUT:-240} / 2 )))" python3 asv_bench/jax_compare.py --gpu \
      >> "$OUT/jax_gpu.log" 2>&1
    stamp "jax benchmark on the GPU rc=$?"
  else
    stamp "skipped jax: JAX sees no GPU (jax[cuda] wheels in .whl/?), see jax_gpu.log"
  fi
fi
tail -5 "$OUT/gpu_tests.txt"
