"""kerneltools._utils._originals: scikit-learn's classes for the fallback,
recorded by kerneltools.accel below the estimators."""

import pytest
import sklearn.kernel_ridge

from kerneltools import accel
from kerneltools._utils._originals import original, originals
from kerneltools.estimators import KernelRidge
from kerneltools.estimators._shared._fallback import sklearn_class

PATH = "sklearn.kernel_ridge.KernelRidge"
THEIRS = sklearn.kernel_ridge.KernelRidge


def test_accel_writes_the_record_the_estimators_read():
    assert accel.originals is originals
    assert not accel.is_installed()
    assert original(PATH) is THEIRS
    accel.install()
    try:
        assert sklearn.kernel_ridge.KernelRidge is KernelRidge  # patched
        assert originals[PATH] is THEIRS
        assert original(PATH) is sklearn_class(PATH) is THEIRS
    finally:
        accel.uninstall()
    assert sklearn.kernel_ridge.KernelRidge is THEIRS


def test_an_unrecorded_replacement_is_an_error(monkeypatch):
    """A path patched to ours by anything but accel's install (which records
    first) is not taken for scikit-learn's class."""
    monkeypatch.delitem(originals, PATH, raising=False)
    monkeypatch.setattr(sklearn.kernel_ridge, "KernelRidge", KernelRidge)
    with pytest.raises(RuntimeError, match="not recorded"):
        original(PATH)
