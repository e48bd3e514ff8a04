"""onnx's own backend test suite (onnx.backend.test.BackendTest) against cannrt.onnx_backend: every
node test whose ops cannrt lowers, on the "CPU" device name the suite asks for.

The node tests not in the supported set are excluded rather than skipped; tests the backend
declares incompatible (an op outside a non-default domain) are skipped by the suite itself.
"""

from __future__ import annotations

import os
import re

import onnx
import onnx.backend.test
import pytest
from onnx.backend.test.loader import load_model_tests

import cannrt
import cannrt.onnx_backend
from cannrt.graph.lowering import supported_ops


def supported_node_tests() -> list[str]:
    """Names of the node tests whose every node has an op type cannrt lowers."""
    known = supported_ops()
    names = []
    for case in load_model_tests(kind="node"):
        if case.model_dir is not None:
            model = onnx.load(os.path.join(case.model_dir, "model.onnx"), load_external_data=False)
        elif isinstance(case.model, onnx.ModelProto):
            model = case.model
        else:
            continue
        if model.graph.node and all(n.op_type in known and n.domain in ("", "ai.onnx") for n in model.graph.node):
            names.append(case.name)
    return sorted(names)


SUPPORTED = supported_node_tests()
backend_test = onnx.backend.test.BackendTest(cannrt.onnx_backend, __name__)
backend_test.include("^(" + "|".join(re.escape(name) for name in SUPPORTED) + ")_cpu$")
globals().update(backend_test.test_cases)


@pytest.fixture(autouse=True)
def _fresh_runtime() -> None:
    """Each case on a fresh runtime: the loaded models of earlier cases do not pile up."""
    cannrt.reset_runtime()


def test_the_suite_covers_the_supported_ops() -> None:
    covered = {re.sub(r"_cpu$", "", name) for case in backend_test.test_cases.values() for name in dir(case)}
    assert len(SUPPORTED) > 100
    assert set(SUPPORTED) <= covered
