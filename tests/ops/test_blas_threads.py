"""The cube kernels leave the host BLAS on one thread (kernels/nn/blas.py)."""

from __future__ import annotations

import numpy as np
from onnx_reference import on_device, reference
from threadpoolctl import threadpool_info

from cannrt.kernels.nn.blas import KERNEL_BLAS_THREADS
from cannrt.runtime.core import Runtime


def test_a_conv_sets_the_host_blas_to_the_kernel_thread_count(rt: Runtime) -> None:
    inputs = {"x": np.ones((1, 2, 4, 4), np.float32), "w": np.ones((3, 2, 1, 1), np.float32)}
    expected = reference("Conv", inputs)
    np.testing.assert_allclose(on_device("Conv", inputs, expected)[0], expected[0])
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == KERNEL_BLAS_THREADS for lib in blas)
