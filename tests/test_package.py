"""The package surface: command line, layering, public names, docs."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import kerneltools as kt

ROOT = Path(kt.__file__).parent
#: The checkout the tests come from (the suite may test an installed copy).
REPO = Path(__file__).resolve().parents[1]


def test_info_command_reports_backends_compiler_and_cache(tmp_path):
    env = {"KERNELTOOLS_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "kerneltools", "info"], capture_output=True,
                         text=True, timeout=120, env={**__import__("os").environ, **env})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"kerneltools {kt.__version__}" in text
    for name in ("numpy", "cpu", "cuda"):
        assert f"  {name} " in text
    assert "C compiler:" in text
    assert str(tmp_path / "cache") in text


def test_info_without_a_compiler_prints_its_report_only(tmp_path):
    """No warning (with its source line) around the report; the missing
    compiler and its fix are said once, in the report."""
    env = {**__import__("os").environ, "CC": str(tmp_path / "no-such-cc"),
           "KERNELTOOLS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "kerneltools", "info"], capture_output=True,
                         text=True, timeout=120, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    assert "  cpu    unusable: no usable C compiler" in text
    assert "C compiler: none usable" in text and "default backend: numpy" in text
    assert text.count("To fix") == 1 and text.count("no-such-cc") == 1


def test_clear_cache_command(tmp_path):
    import os

    env = {**os.environ, "KERNELTOOLS_CACHE_DIR": str(tmp_path / "c")}
    (tmp_path / "c" / "cpu").mkdir(parents=True)
    kernel = tmp_path / "c" / "cpu" / ("ab" * 20 + ".so")
    kernel.write_bytes(b"x")
    out = subprocess.run([sys.executable, "-m", "kerneltools", "clear-cache"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert not kernel.exists()  # only kerneltools' own files go: see test_cache.py


# Layering (the engine imports nothing above it, estimators use the public API,
# no import circles) is checked from the import graph in test_layers.py.


def test_public_names_have_docstrings():
    for name in kt.__all__:
        if name == "__version__":
            continue
        obj = getattr(kt, name)
        assert obj.__doc__ and obj.__doc__.strip(), name
    for name in dir(kt.LazyTensor):
        if name.startswith("_"):
            continue
        attr = getattr(kt.LazyTensor, name)
        if callable(attr):
            assert attr.__doc__, f"LazyTensor.{name} has no docstring"


def test_import_is_light():
    """'import kerneltools' does not pull in scikit-learn (a second of import)."""
    code = "import sys, kerneltools; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def _package_files(root: Path) -> set[str]:
    """The modules and data files under ``root``, as relative paths."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
            and p.suffix not in (".pyc", ".so")}


def test_the_imported_package_holds_every_file_of_the_source():
    """Installed from a wheel (as .ci/run tests it), kerneltools holds every
    module and data file of the checkout: the C and CUDA templates, every
    subpackage. (Imported from the checkout itself, the check is trivially
    true; it matters where the package was installed.)"""
    source = REPO / "kerneltools"
    missing = _package_files(source) - _package_files(ROOT)
    assert not missing, f"{ROOT} lacks {sorted(missing)}"
    templates = {p for p in _package_files(ROOT) if p.startswith("backend/templates/")}
    assert {"backend/templates/cpu_kernel.h",
            "backend/templates/cuda_kernel.cu"} <= templates


@pytest.mark.skipif(not os.environ.get("KERNELTOOLS_TEST_INSTALLED"),
                    reason="only where .ci/run asks for it "
                    "(KERNELTOOLS_TEST_INSTALLED=1): the README's test command "
                    "installs kerneltools from a wheel")
def test_the_suite_imports_kerneltools_from_the_installed_wheel():
    """This process (an xdist worker under the README's command) and a
    subprocess started in the checkout, as the tests start theirs, import the
    kerneltools installed in site-packages, not the checkout's, and not
    through an editable install's path hook."""
    purelib = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert ROOT.resolve().parent == purelib, f"kerneltools imported from {ROOT}"
    assert REPO not in ROOT.resolve().parents
    code = "import kerneltools; print(kerneltools.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=True)
    assert Path(out.stdout.strip()).resolve().parent.parent == purelib, out.stdout
    editable = [p.name for p in purelib.glob("__editable__*kerneltools*")]
    assert not editable, f"an editable install of kerneltools is left: {editable}"
