"""The convolution products' BLAS (kernels/nn/gemm_library.py): oneMKL's sequential layer on Intel
CPUs where installed, SciPy's OpenBLAS otherwise, or the one CANNRT_BLAS asks for; either
computes the same convolutions, and a product's bits do not depend on where its operands lie."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cannrt.kernels.nn import gemm_library
from cannrt.kernels.nn.conv import convolve_into
from cannrt.kernels.nn.window import Window

MKL_INSTALLED = gemm_library.mkl_path() is not None
DEFAULT = gemm_library.default_name(gemm_library.cpu_vendor()) if MKL_INSTALLED else "openblas"


def _conv_script() -> str:
    """A program that convolves seeded data and prints its library and result (as JSON)."""
    return textwrap.dedent(
        """
        import json, numpy as np
        from cannrt.kernels.nn import gemm_library
        from cannrt.kernels.nn.conv import convolve_into
        from cannrt.kernels.nn.window import Window
        rng = np.random.default_rng(3)
        x = rng.standard_normal((1, 24, 20, 20)).astype(np.float32)
        w = rng.standard_normal((40, 24, 3, 3)).astype(np.float32)
        y = np.empty((1, 40, 20, 20), np.float32)
        convolve_into(x, w, None, 1, Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)), y, (0, 0.0, 0.0))
        print(json.dumps({"library": gemm_library.LIBRARY.name, "y": y.ravel().tolist()}))
        """
    )


def _run(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _conv_script()], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_openblas_is_scipys_sgemm_and_dgemm() -> None:
    library = gemm_library.choose("openblas")
    assert library.name == "openblas" and library.sgemm and library.dgemm and library.sgemm != library.dgemm


def test_an_unknown_choice_warns_and_takes_the_default() -> None:
    with pytest.warns(RuntimeWarning, match="CANNRT_BLAS='atlas' is not one of mkl, openblas"):
        library = gemm_library.choose("atlas")
    assert library.name == DEFAULT


def test_onemkl_is_the_default_on_intel_cpus_only() -> None:
    """oneMKL takes its AVX2 branch on AMD's CPUs, where OpenBLAS's AVX-512 kernels were faster."""
    assert gemm_library.default_name("GenuineIntel") == "mkl"
    assert gemm_library.default_name("AuthenticAMD") == "openblas"
    assert gemm_library.default_name("") == "openblas"  # no /proc/cpuinfo: the library in every wheel
    if "CANNRT_BLAS" not in os.environ:
        assert gemm_library.LIBRARY.name == DEFAULT


def test_the_cpu_vendor_is_the_first_vendor_id_of_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\nvendor_id\t: Other\n")
    assert gemm_library.cpu_vendor(str(info)) == "AuthenticAMD"
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")  # an Arm CPU's has none
    assert gemm_library.cpu_vendor(str(info)) == ""
    assert gemm_library.cpu_vendor(str(tmp_path / "missing")) == ""


@pytest.mark.skipif(not MKL_INSTALLED, reason="the mkl wheel is a dependency on x86-64 Linux only")
def test_cannrt_blas_chooses_and_both_compute_the_same_convolution_in_other_processes() -> None:
    chosen, fallback = _run({"CANNRT_BLAS": "mkl"}), _run({"CANNRT_BLAS": "openblas"})
    assert (chosen["library"], fallback["library"]) == ("mkl", "openblas")
    a, b = np.asarray(chosen["y"]), np.asarray(fallback["y"])
    assert np.allclose(a, b, rtol=1e-5, atol=1e-4) and np.max(np.abs(a)) > 1


def test_a_convolution_gives_the_same_bits_wherever_its_operands_lie() -> None:
    """The same products over copies of x and w at every 4-byte offset of a 64-byte line."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 30, 30)).astype(np.float32)
    w = rng.standard_normal((48, 32, 3, 3)).astype(np.float32)
    window = Window((3, 3), (2, 2), (1, 1), (1, 1), (1, 1))
    results = set()
    for offset in range(16):
        xs = np.empty(x.size + 16, np.float32)[offset : offset + x.size].reshape(x.shape)
        ws = np.empty(w.size + 16, np.float32)[offset : offset + w.size].reshape(w.shape)
        ys = np.empty(48 * 15 * 15 + 16, np.float32)[offset : offset + 48 * 15 * 15].reshape(1, 48, 15, 15)
        xs[...], ws[...] = x, w
        convolve_into(xs, ws, None, 1, window, ys, (0, 0.0, 0.0))
        results.add(ys.tobytes())
    assert len(results) == 1
