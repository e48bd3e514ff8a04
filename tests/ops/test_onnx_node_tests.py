"""onnx's backend node tests for every supported op, on the simulated device (node_cases.py
runs them; `python tests/ops/node_cases.py` prints the per-op table). Cases that fail for a
stated reason are strict xfails: if one starts passing, the list must shrink."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from node_cases import op_of, run_case, selected_cases

import cannrt
from cannrt.graph.lowering import supported_ops

TRAINING = "training-mode Dropout draws a random mask (onnx seeds numpy's generator): not reproducible"
KNOWN_FAILURES = {
    "test_training_dropout": TRAINING,
    "test_training_dropout_default": TRAINING,
    "test_training_dropout_default_mask": TRAINING,
    "test_training_dropout_mask": TRAINING,
}
CASES = {case.name: case for case in selected_cases()}
REQUIRED = [
    "Conv",
    "BatchNormalization",
    "Relu",
    "Sum",
    "Add",
    "Mul",
    "Concat",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Gemm",
    "Softmax",
    "Reshape",
    "Unsqueeze",
    "ConstantOfShape",
    "LRN",
    "Dropout",
    "Transpose",
    "MatMul",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Clip",
    "Tanh",
    "Exp",
    "Div",
    "Sub",
    "Pow",
    "Sqrt",
    "Resize",
    "Slice",
    "Shape",
    "Gather",
    "Flatten",
    "Squeeze",
    "Pad",
    "ReduceMean",
    "Identity",
    "Cast",
    "Split",
]


@pytest.fixture(scope="module", autouse=True)
def machine() -> Iterator[None]:
    """One simulated machine for all cases (a faulting case resets its device)."""
    runtime = cannrt.reset_runtime()
    yield
    runtime.close()


def _params() -> list[Any]:
    marks = {name: pytest.mark.xfail(strict=True, reason=why) for name, why in KNOWN_FAILURES.items()}
    return [pytest.param(name, marks=marks.get(name, ())) for name in sorted(CASES)]


@pytest.mark.parametrize("name", _params())
def test_node_case(name: str) -> None:
    outcome = run_case(CASES[name])
    if outcome.status == "skip":
        pytest.skip(outcome.reason)
    assert outcome.status == "pass", outcome.reason


def test_every_required_op_is_supported_and_tested() -> None:
    assert set(REQUIRED) <= supported_ops()
    tested = {op_of(case) for case in CASES.values()}
    assert set(REQUIRED) <= tested
    assert len(CASES) >= 1000
