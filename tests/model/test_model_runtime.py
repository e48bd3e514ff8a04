"""runtime/model.py: load into one work and one weight block, replay per execute, zero copy."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from hand_models import K, M, N, copy_model, dense_model, dynamic_batch_model, reference, weights

import cannrt
from cannrt.errors import CannError
from cannrt.om.model import KernelTask, Section, TensorRef
from cannrt.runtime import memory_ops, model_codes
from cannrt.runtime.model import LoadedModel


def _io(npu, x: np.ndarray) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    out = M * N * 4
    return [(npu.upload(x), x.nbytes)], [(npu.malloc(out), out), (npu.malloc(out), out)]


@pytest.mark.parametrize("streams", [1, 2])
def test_sync_execute_matches_numpy_and_repeats(npu, streams: int) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model(streams))
    assert len(model.streams) == streams
    x = np.random.default_rng(1).standard_normal((M, K)).astype(np.float32)
    inputs, outputs = _io(npu, x)
    expected = reference(x, *weights())
    for _ in range(3):
        model.execute(inputs, outputs)
        for (va, _), want in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(npu.download(va, (M, N), np.float32), want, rtol=1e-5, atol=1e-6)
    model.unload()


def test_new_buffers_are_patched_in_zero_copy(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model())
    rng = np.random.default_rng(2)
    for _ in range(2):
        x = rng.standard_normal((M, K)).astype(np.float32)
        inputs, outputs = _io(npu, x)
        model.execute(inputs, outputs)
        got = npu.download(outputs[0][0], (M, N), np.float32)
        np.testing.assert_allclose(got, reference(x, *weights())[0], rtol=1e-5, atol=1e-6)


def test_execute_sends_one_task_per_task_and_copies_nothing(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model())
    x = np.ones((M, K), np.float32)
    inputs, outputs = _io(npu, x)
    model.execute(inputs, outputs)
    npu.trace()
    model.execute(inputs, outputs)
    records = npu.records()
    assert [r.name for r in records] == ["matmul", "relu", "add", "relu"]
    assert records[0].args[0].address == inputs[0][0]  # the user's buffer itself, no staging copy
    assert records[-1].args[1].address == outputs[0][0]


def test_async_execute_runs_on_the_callers_stream(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model(streams=2))
    stream = ctx.create_stream()
    x = np.random.default_rng(3).standard_normal((M, K)).astype(np.float32)
    inputs, outputs = _io(npu, x)
    before = stream.tail
    model.execute(inputs, outputs, stream)
    assert stream.tail > before
    stream.synchronize()
    for (va, _), want in zip(outputs, reference(x, *weights()), strict=True):
        np.testing.assert_allclose(npu.download(va, (M, N), np.float32), want, rtol=1e-5, atol=1e-6)


def test_one_model_cannot_mix_sync_and_async(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model())
    inputs, outputs = _io(npu, np.ones((M, K), np.float32))
    model.execute(inputs, outputs)
    with pytest.raises(CannError) as info:
        model.execute(inputs, outputs, ctx.create_stream())
    assert info.value.code == model_codes.GE_PARAM_INVALID


def test_user_memory_is_used_and_small_work_memory_refused(npu) -> None:
    ctx = npu.ctx()
    om = dense_model()
    work = memory_ops.malloc(ctx, om.work_size)
    weight = memory_ops.malloc(ctx, om.weight_size)
    with pytest.raises(CannError) as info:
        LoadedModel(ctx, om, (work, om.work_size - 1), (weight, om.weight_size))
    assert info.value.code == model_codes.GE_PARAM_INVALID
    assert info.value.needed == om.work_size
    with pytest.raises(CannError):
        LoadedModel(ctx, om, (work, om.work_size), (weight, om.weight_size - 512))
    model = LoadedModel(ctx, om, (work, om.work_size), (weight, om.weight_size))
    assert (model.work, model.weight) == (work, weight)
    x = np.full((M, K), 0.5, np.float32)
    inputs, outputs = _io(npu, x)
    model.execute(inputs, outputs)
    np.testing.assert_allclose(npu.download(outputs[0][0], (M, N), np.float32), reference(x, *weights())[0], rtol=1e-5)
    model.unload()
    assert work in ctx.allocations  # the caller's memory stays the caller's


def test_bad_datasets_get_model_codes(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model())
    inputs, outputs = _io(npu, np.ones((M, K), np.float32))
    with pytest.raises(CannError) as info:
        model.execute([], outputs)
    assert info.value.code == model_codes.MODEL_INPUT_NOT_MATCH
    with pytest.raises(CannError) as info:
        model.execute(inputs, outputs[:1])
    assert info.value.code == model_codes.MODEL_OUTPUT_NOT_MATCH
    with pytest.raises(CannError) as info:
        model.execute([(inputs[0][0], M * K * 4 - 4)], outputs)
    assert (info.value.code, info.value.needed) == (model_codes.MODEL_INPUT_NOT_MATCH, M * K * 4)
    with pytest.raises(CannError):
        model.execute(inputs, [outputs[0], (outputs[1][0] + 4096 * 1024, M * N * 4)])  # not device memory
    model.unload()
    with pytest.raises(CannError) as info:
        model.execute(inputs, outputs)
    assert info.value.code == model_codes.INVALID_MODEL_ID


def test_bad_models_are_refused_at_load_and_leak_nothing(npu) -> None:
    ctx = npu.ctx()
    before = dict(ctx.allocations)
    streams = len(ctx.streams)
    om = dense_model()
    gear = om.gears[0]
    unknown = dataclasses.replace(gear, tasks=(KernelTask(0, "no_such_kernel", 1, (), "X", "X"),))
    wrong = dataclasses.replace(
        gear, tasks=(KernelTask(0, "relu", 1, (TensorRef(Section.WORK, 0, 0, (4,)),), "Relu", "Relu"),)
    )
    outside = dataclasses.replace(
        gear,
        tasks=(
            KernelTask(
                0, "relu", 1, (TensorRef(Section.WORK, 0, 0, (4,)), TensorRef(Section.WORK, 1020, 0, (4,))), "R", "Relu"
            ),
        ),
    )
    missing_io = dataclasses.replace(
        gear,
        tasks=(
            KernelTask(
                0,
                "relu",
                1,
                (TensorRef(Section.INPUT, 0, 0, (4,), 3), TensorRef(Section.WORK, 0, 0, (4,))),
                "R",
                "Relu",
            ),
        ),
    )
    for bad in (unknown, wrong, outside, missing_io):
        with pytest.raises(CannError):
            LoadedModel(ctx, dataclasses.replace(om, gears=(bad,)))
    assert ctx.allocations == before and len(ctx.streams) == streams


def test_memcpy_task_copies_a_weight_to_the_output(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, copy_model())
    out = npu.malloc(64)
    model.execute([], [(out, 64)])
    np.testing.assert_array_equal(npu.download(out, 16, np.float32), np.arange(16, dtype=np.float32))


def test_dynamic_batch_runs_the_chosen_gear(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dynamic_batch_model())
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    src, out, mbatch = npu.upload(x), npu.malloc(4 * 32), npu.malloc(8)
    model.set_batch(2)
    model.execute([(src, 2 * 32), (mbatch, 8)], [(out, 2 * 32)])  # a 2-row buffer is enough for gear 2
    got = npu.download(out, (2, 8), np.float32)
    np.testing.assert_array_equal(got, np.maximum(x[:2], 0))
    with pytest.raises(CannError) as info:
        model.set_batch(3)
    assert info.value.code == model_codes.GE_DYNAMIC_BATCH_SIZE_INVALID
    model.set_batch(4)
    with pytest.raises(CannError):
        model.execute([(src, 2 * 32), (mbatch, 8)], [(out, 4 * 32)])  # too small for gear 4


def test_a_fault_inside_a_model_names_the_node(npu) -> None:
    ctx = npu.ctx()
    om = dense_model()
    work = memory_ops.malloc(ctx, om.work_size)
    model = LoadedModel(ctx, om, (work, om.work_size))
    memory_ops.free(ctx, work)  # the caller frees the work memory under the loaded model
    inputs, outputs = _io(npu, np.ones((M, K), np.float32))
    with pytest.raises(CannError) as info:
        model.execute(inputs, outputs)
    assert "node MatMul_0 (MatMul)" in str(info.value)


def test_dumps_name_each_task_by_its_node(npu, tmp_path) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model())
    inputs, outputs = _io(npu, np.ones((M, K), np.float32))
    with cannrt.dump(tmp_path, runtime=npu.rt) as result:
        model.execute(inputs, outputs)
    names = sorted(p.name.split(".")[1] for p in result.files if p.suffix != ".json")
    assert {"MatMul_0", "Add_1", "Relu_2", "Relu_3"} <= set(names), names


def test_executes_from_several_threads_do_not_interleave(npu) -> None:
    ctx = npu.ctx()
    model = LoadedModel(ctx, dense_model(streams=2))
    rng = np.random.default_rng(9)
    jobs = []
    for _ in range(4):
        x = rng.standard_normal((M, K)).astype(np.float32)
        jobs.append((x, *_io(npu, x)))
    errors: list[BaseException] = []

    def work(inputs, outputs) -> None:
        try:
            for _ in range(3):
                npu.rt.set_context(ctx)
                model.execute(inputs, outputs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, o)) for _, i, o in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    for x, _, outputs in jobs:
        np.testing.assert_allclose(
            npu.download(outputs[0][0], (M, N), np.float32), reference(x, *weights())[0], rtol=1e-5
        )


def test_a_work_tensor_past_the_work_section_is_refused_even_when_the_weights_follow_it(npu) -> None:
    """Each reference is held to its own section: one caller block holding the work section and
    right after it the weights does not let a work tensor run on into the weights."""
    ctx = npu.ctx()
    om = dense_model()
    gear = om.gears[0]
    past = om.work_size - 8  # 16 bytes: the last 8 inside the weight section
    overrun = dataclasses.replace(
        gear,
        tasks=(
            KernelTask(
                0, "relu", 1, (TensorRef(Section.WORK, 0, 0, (4,)), TensorRef(Section.WORK, past, 0, (4,))), "R", "Relu"
            ),
        ),
    )
    block = memory_ops.malloc(ctx, om.work_size + om.weight_size)
    with pytest.raises(CannError) as info:
        LoadedModel(
            ctx,
            dataclasses.replace(om, gears=(overrun,)),
            (block, om.work_size),
            (block + om.work_size, om.weight_size),
        )
    assert info.value.code == model_codes.GE_PARAM_INVALID
    assert "past the section" in str(info.value)
