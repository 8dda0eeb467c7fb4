"""The gallery's command line for each example (sphinx-gallery's ``reset_argv``).

A module of its own so that ``conf.py`` names it by a string: Sphinx caches
the configuration between builds, and a function in it cannot be pickled.
"""

from __future__ import annotations

import os
import tempfile


def reset_argv(gallery_conf, script_vars):
    """``--quick`` unless ``KERNELTOOLS_DOCS_FULL=1``, and a scratch ``--out``."""
    out = tempfile.mkdtemp(prefix="kerneltools-gallery-")
    if os.environ.get("KERNELTOOLS_DOCS_FULL") == "1":
        return ["--out", out]
    return ["--quick", "--out", out]
