"""The BLAS library the kernels' numba products call (conv_gemm.py's ?gemm).

oneMKL's sequential layer on Intel CPUs where the `mkl` wheel is installed (a dependency on x86-64
Linux), else SciPy's OpenBLAS through its Cython API (the BLAS numba's np.dot calls). The
environment variable CANNRT_BLAS=openblas (or =mkl) picks one; it is read once, when this module
is imported.

Why oneMKL on Intel: on the light models' convolution products, one thread of a Sapphire Rapids
core, it reaches 160-215 GF/s where OpenBLAS 0.3.31 reaches 110-185 (64 x 576 @ 576 x 3136: 1.16
against 1.93 ms; 512 x 4608 @ 4608 x 49: 1.78 against 2.03 ms). OpenBLAS is ahead only on products
under about 1e6 multiply-adds, where its small-matrix kernels skip packing. On an AMD EPYC (Zen 4)
core oneMKL takes its AVX2 branch and OpenBLAS its AVX-512 kernels: one thread, 1000 x 512 @ 512 x
169 took 1.95-2.25 ms against 1.75, 64 x 576 @ 576 x 3136 2.8-3.1 against 2.6, and squeezenet's
executes 8.85 against 8.20 ms (resnet50 and densenet121 alike within 5 %), so OpenBLAS is the
default there.

oneMKL is set up before its first call, as its documentation requires: the sequential threading
layer (each team thread runs its own products; oneMKL's OpenMP threads would compete with them
for the cores), the LP64 interface (32-bit integers, as the argument block conv_gemm.py builds),
and conditional numerical reproducibility on the branch the CPU picks (MKL_CBWR_AUTO), so that a
product gives the same bits in every run. If another part of the process initialised oneMKL
with other layers first, they cannot change and SciPy's OpenBLAS is used instead.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from dataclasses import dataclass
from importlib import metadata

from numba.extending import get_cython_function_address

MKL_THREADING_SEQUENTIAL = 1  # MKL_Set_Threading_Layer's MKL_THREADING_SEQUENTIAL
MKL_INTERFACE_LP64 = 0  # MKL_Set_Interface_Layer's MKL_INTERFACE_LP64
MKL_CBWR_AUTO = 2  # MKL_CBWR_Set's branch chosen for the CPU, reproducible from run to run
MKL_CBWR_SUCCESS = 0
CHOICES = ("mkl", "openblas")


@dataclass(frozen=True)
class GemmLibrary:
    """A BLAS library: its name, version, and the addresses of its Fortran sgemm and dgemm."""

    name: str
    version: str
    sgemm: int
    dgemm: int


def openblas() -> GemmLibrary:
    """SciPy's OpenBLAS through scipy.linalg.cython_blas."""
    import scipy

    def address(name: str) -> int:
        return int(get_cython_function_address("scipy.linalg.cython_blas", name))

    return GemmLibrary("openblas", "scipy " + scipy.__version__, address("sgemm"), address("dgemm"))


def mkl_path() -> str | None:
    try:
        files = metadata.files("mkl") or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name.startswith("libmkl_rt.so"):
            return str(file.locate())
    return None


def mkl() -> GemmLibrary | None:
    """oneMKL's single dynamic library (libmkl_rt) set up as the module docstring says, or None
    where it is not installed or cannot be set up so."""
    path = mkl_path()
    if path is None:
        return None
    try:
        library = ctypes.CDLL(path)
    except OSError:
        return None
    for function in ("MKL_Set_Threading_Layer", "MKL_Set_Interface_Layer", "MKL_CBWR_Set"):
        getattr(library, function).restype = ctypes.c_int
        getattr(library, function).argtypes = [ctypes.c_int]
    if library.MKL_Set_Threading_Layer(MKL_THREADING_SEQUENTIAL) != MKL_THREADING_SEQUENTIAL:
        return None
    if library.MKL_Set_Interface_Layer(MKL_INTERFACE_LP64) != MKL_INTERFACE_LP64:
        return None
    library.MKL_CBWR_Set(MKL_CBWR_AUTO)  # refused once oneMKL has computed; then it stays as it was
    sgemm = ctypes.cast(library.sgemm, ctypes.c_void_p).value
    dgemm = ctypes.cast(library.dgemm, ctypes.c_void_p).value
    assert sgemm and dgemm
    return GemmLibrary("mkl", metadata.version("mkl"), sgemm, dgemm)


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's vendor_id in cpuinfo ("GenuineIntel", "AuthenticAMD"), "" where unknown."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def default_name(vendor: str) -> str:
    """The library chosen when CANNRT_BLAS does not choose: oneMKL on Intel CPUs, else OpenBLAS."""
    return "mkl" if vendor == "GenuineIntel" else "openblas"


def choose(requested: str | None) -> GemmLibrary:
    """The library for a CANNRT_BLAS value: "mkl" or "openblas", or None/"" for the CPU's default
    (default_name). Another value warns (RuntimeWarning) and takes the default; oneMKL where it
    cannot be set up is OpenBLAS, with a warning where CANNRT_BLAS asked for it."""
    requested = (requested or "").strip().lower()
    if requested and requested not in CHOICES:
        warnings.warn(f"CANNRT_BLAS={requested!r} is not one of {', '.join(CHOICES)}: ignored", RuntimeWarning, 2)
        requested = ""
    if (requested or default_name(cpu_vendor())) == "openblas":
        return openblas()
    found = mkl()
    if found is None and requested == "mkl":
        warnings.warn("CANNRT_BLAS=mkl: oneMKL is not installed or was set up otherwise: OpenBLAS", RuntimeWarning, 2)
    return found or openblas()


LIBRARY = choose(os.environ.get("CANNRT_BLAS"))
