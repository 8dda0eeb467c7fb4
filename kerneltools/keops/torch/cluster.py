"""``pykeops.torch.cluster`` on kerneltools: grid clustering and block-sparsity ranges
on torch tensors (computed on the CPU, returned on the inputs' device);
``grid_cluster``'s grid anchored at the points' minimum, as pykeops.torch's."""

from __future__ import annotations

import numpy as np
import torch

from .._cluster import functions


def _to_numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _wrap(a, like, kind=None):
    device = like.device if isinstance(like, torch.Tensor) else "cpu"
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(device=device, dtype=torch.int64 if kind is int else t.dtype)


globals().update(functions(_to_numpy, _wrap))

__all__ = ["grid_cluster", "sort_clusters", "cluster_ranges", "cluster_centroids",
           "cluster_ranges_centroids", "from_matrix", "swap_axes"]
