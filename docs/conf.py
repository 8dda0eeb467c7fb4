"""Sphinx configuration of kerneltools' documentation.

Build (from the repository root, after ``pip install -e ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

(or ``make -C docs html``). The gallery runs the scripts of ``examples/`` at
their ``--quick`` sizes; ``KERNELTOOLS_DOCS_FULL=1`` runs them at full size,
and ``KERNELTOOLS_DOCS_GALLERY=0`` skips running them (pages without figures,
for a fast check of the rest). The API pages (``docs/api/``) and the
benchmarks page (``docs/benchmarks.rst``'s tables) are generated at the start
of each build from the public modules and ``asv_bench/*_results.md``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS))  # _apigen, _benchgen

import kerneltools  # noqa: E402

import _apigen  # noqa: E402
import _benchgen  # noqa: E402

project = "kerneltools"
author = "the kerneltools developers"
copyright = "2026, the kerneltools developers"  # noqa: A001
release = kerneltools.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.extlinks",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "**/*.examples"]
templates_path = ["_templates"]
myst_heading_anchors = 3
# The benchmarks pages are the results files of asv_bench/ as they are: notes
# whose headings skip levels (# then ###). That is their style, not an error.
suppress_warnings = ["myst.header"]
# Roles of scikit-learn's docstrings, which some of ours extend (HDBSCAN).
extlinks = {
    "doi": ("https://doi.org/%s", "doi:%s"),
    "arxiv": ("https://arxiv.org/abs/%s", "arXiv:%s"),
}

# The API pages are written here, from the public modules' __all__.
_apigen.write(DOCS / "api")
_benchgen.write(ROOT / "asv_bench", DOCS / "benchmarks")

autosummary_generate = True
autodoc_default_options = {"member-order": "groupwise"}
autodoc_typehints = "none"  # the numpydoc sections say the types
autodoc_inherit_docstrings = True

# numpydoc: scikit-learn's settings. The class pages list methods through
# autodoc (the template), not numpydoc's autosummary tables.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Types are text: with xref on and every word ignored, numpydoc escapes them
# (``ndarray of shape (n_features_in_,)`` is no reference to a target).
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
# numpydoc's default aliases point into Python's and NumPy's inventories
# (``bool`` -> python:bltin-boolean-values, ``array_like`` -> a NumPy glossary
# term), which this offline build does not have: the words stay words.
from numpydoc.xref import DEFAULT_LINKS  # noqa: E402

numpydoc_xref_aliases = {word: word for word in DEFAULT_LINKS}
# Validation: the checks every documented docstring passes, methods and
# constants included (a failure is a build warning, an error under -W).
# GL01/GL05/GL09/GL10: the docstring's layout (where the text starts,
# tabs, deprecation, code fences); GL03: no double blank lines; GL06: a
# section name numpydoc does not know; GL07: sections out of order;
# PR05/PR06/PR09/PR10: the Parameters entries' form (no defaults in the
# type, int / bool / str for the types, a description ends with a period,
# "x : int" with its spaces); RT05: a Returns description ends with a
# period; SA02-SA04: See Also entries; SS01/SS04: a summary, not
# indented. PR01 (every parameter documented), RT01 (a Returns section)
# and EX01 (an Examples section) hold for every documented class and
# function: tests/docs/test_docstrings.py fails, naming the object, where
# one does not (`python tools/docstring_report.py` counts them); not here,
# because methods do not pass them yet (~700 of fit/predict/LazyTensor's
# methods lack Examples or Returns). Not yet at all (the test keeps the
# counts from rising): SA01, ES01; SS03 (builtins' add_note, errno) and
# GL08 (a few undocumented methods) fail on objects we do not write.
numpydoc_validation_checks = {
    "GL01", "GL03", "GL05", "GL06", "GL07", "GL09", "GL10", "PR05", "PR06",
    "PR09", "PR10", "RT05", "SA02", "SA03", "SA04", "SS01", "SS04",
}
# Objects whose docstrings are exempt, each with its reason (none now).
numpydoc_validation_exclude: set[str] = set()

# No intersphinx: the build runs without a network (CI, this machine), so
# references to NumPy, SciPy and scikit-learn are literal text, not roles.

nitpicky = False

html_theme = "pydata_sphinx_theme"
html_title = f"kerneltools {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "logo": {"text": "kerneltools"},
}
html_sidebars = {"index": [], "benchmarks/index": []}
html_show_sourcelink = False
html_favicon = "_static/favicon.svg"
# A first visit has no stored light/dark choice: say which, else the theme
# logs a console error ("Got invalid theme mode").
html_context = {"default_mode": "auto"}


sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"\.py$",  # run every example
    "plot_gallery": os.environ.get("KERNELTOOLS_DOCS_GALLERY", "1") != "0",
    # Each example's command line (_gallery.py): --quick unless
    # KERNELTOOLS_DOCS_FULL=1; its own PNG goes to a temporary folder (the
    # gallery keeps the figures it scrapes from matplotlib).
    "reset_argv": "_gallery.reset_argv",
    "abort_on_example_error": False,  # every failure listed, then the build fails
    "only_warn_on_example_error": False,
    "doc_module": ("kerneltools",),
    "backreferences_dir": str(DOCS / "api" / "generated"),
    "reference_url": {"kerneltools": None},
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "within_subsection_order": "FileNameSortKey",
}


def _escape_shape_names(app, what, name, obj, options, lines):
    """``(n_features_in_,)`` in a type: text, not a reference to a target.

    scikit-learn's docstrings (and ours, which follow them) write shapes with
    fitted attributes' names, whose trailing underscore reStructuredText reads
    as a reference. Runs before numpydoc (priority 400 < its 500).
    """
    for k, line in enumerate(lines):
        if "shape" in line and ("_," in line or "_)" in line):
            lines[k] = _SHAPE_NAME.sub(r"\1\\_\2", line)


_SHAPE_NAME = __import__("re").compile(r"(\b[a-z][a-z0-9_]*[a-z0-9])_([,)])")


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Class pages list the members kerneltools defines, not those inherited.

    ``:inherited-members:`` brings our estimators' ``fit``/``predict`` from
    their private base classes; members defined by scikit-learn's mixins
    (``get_params``, ``score``, ``set_output``, the ``set_*_request``
    methods) or by ``torch.nn.Module`` (``SamplesLoss``) are documented by
    those libraries, with references to their own pages.
    """
    if what != "class" or skip:
        return None
    owner = getattr(obj, "fget", obj)
    module = getattr(owner, "__module__", None) or ""
    if module and not module.startswith("kerneltools"):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _escape_shape_names, priority=400)
    app.connect("autodoc-skip-member", _skip_foreign_members)
