"""The static pool: tensors share memory only when their lifetimes are ordered, on any stream."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cannrt
from cannrt.memory.lifetimes import Topology, TopologyError, lifetimes, vector_clocks


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_single_stream_chain_reuses_memory_of_dead_tensors() -> None:
    graph = Topology()
    ops = [graph.add_op(f"op{i}") for i in range(6)]
    for i in range(5):
        graph.add_tensor(f"t{i}", 4096, ops[i], [ops[i + 1]])
    buffers = {b.id: b for b in lifetimes(graph)}
    assert (buffers["t0"].lower, buffers["t0"].upper) == (0, 2)
    assert not _overlap((buffers["t0"].lower, buffers["t0"].upper), (buffers["t2"].lower, buffers["t2"].upper))


def test_a_tensor_read_on_another_stream_lives_until_an_event_orders_the_reuse() -> None:
    graph = Topology()
    load = graph.add_op("load", stream=0)
    use = graph.add_op("use", stream=1, waits_on=[load])
    racing = graph.add_op("racing", stream=0)  # not ordered after `use`
    later = graph.add_op("later", stream=0, waits_on=[use])  # ordered after `use` by an event
    graph.add_tensor("x", 1024, load, [use])
    graph.add_tensor("racing_out", 1024, racing, [later])
    graph.add_tensor("later_out", 1024, later, [])
    buffers = {b.id: b for b in lifetimes(graph)}
    assert buffers["x"].upper == later
    x = (buffers["x"].lower, buffers["x"].upper)
    assert _overlap(x, (buffers["racing_out"].lower, buffers["racing_out"].upper))
    assert not _overlap(x, (buffers["later_out"].lower, buffers["later_out"].upper))


def test_without_any_ordering_event_a_cross_stream_tensor_is_never_reused() -> None:
    graph = Topology()
    load = graph.add_op("load", stream=0)
    use = graph.add_op("use", stream=1, waits_on=[load])
    tail = graph.add_op("tail", stream=0)
    graph.add_tensor("x", 1024, load, [use])
    graph.add_tensor("y", 1024, tail, [])
    buffers = {b.id: b for b in lifetimes(graph)}
    assert buffers["x"].upper == len(graph.ops)


def test_bad_topologies_are_rejected_with_the_op_named() -> None:
    graph = Topology()
    graph.add_op("a")
    graph.add_op("b", waits_on=[5])
    with pytest.raises(TopologyError, match="op 1 \\(b\\) waits on op 5"):
        lifetimes(graph)
    graph = Topology()
    graph.add_op("a")
    graph.add_tensor("t", 8, 3)
    with pytest.raises(TopologyError, match="tensor t"):
        lifetimes(graph)


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    graph = Topology()
    count = draw(st.integers(2, 14))
    for index in range(count):
        waits = draw(st.lists(st.integers(0, index - 1), max_size=2)) if index else []
        graph.add_op(f"op{index}", draw(st.integers(0, 2)), waits)
    for t in range(draw(st.integers(1, 10))):
        producer = draw(st.integers(0, count - 1))
        consumers = draw(st.lists(st.integers(producer, count - 1), max_size=3))
        graph.add_tensor(f"t{t}", draw(st.integers(1, 5000)), producer, consumers)
    return graph


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_tensors_sharing_addresses_are_always_ordered(graph: Topology) -> None:
    from cannrt.memory.planner import plan

    clocks = vector_clocks(graph.ops)

    def before(a: int, b: int) -> bool:  # op a finished before op b can start
        return a < b and clocks[b].get(graph.ops[a].stream, -1) >= a

    packing = plan(lifetimes(graph), time_limit=0.2)
    placed = dict(zip((b.id for b in packing.buffers), packing.offsets, strict=True))
    sizes = {b.id: b.size for b in packing.buffers}
    uses = {t.name: (t.producer, *t.consumers) for t in graph.tensors}
    names = list(uses)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if _overlap((placed[a], placed[a] + sizes[a]), (placed[b], placed[b] + sizes[b])):
                a_then_b = all(before(u, v) for u in uses[a] for v in uses[b])
                b_then_a = all(before(v, u) for u in uses[a] for v in uses[b])
                assert a_then_b or b_then_a, f"{a} and {b} share memory without ordering"


def test_a_two_stream_graph_runs_correctly_in_a_smaller_block(device: cannrt.Device) -> None:
    n = 64
    shape, nbytes = (n, n), n * n * 4
    graph = Topology()
    s0, s1 = 0, 1
    ops = {
        "h1": graph.add_op("h1 = relu(x)", s0),
        "h2": graph.add_op("h2 = x @ w", s1),
        "h3": graph.add_op("h3 = gelu(h1)", s0),
        "h4": graph.add_op("h4 = h2 * h3", s1, waits_on=[2]),
        "h5": graph.add_op("h5 = relu(h4)", s1),
        "h6": graph.add_op("h6 = h5 + h5", s1),
    }
    graph.add_tensor("h1", nbytes, ops["h1"], [ops["h3"]])
    graph.add_tensor("h2", nbytes, ops["h2"], [ops["h4"]])
    graph.add_tensor("h3", nbytes, ops["h3"], [ops["h4"]])
    graph.add_tensor("h4", nbytes, ops["h4"], [ops["h5"]])
    graph.add_tensor("h5", nbytes, ops["h5"], [ops["h6"]])
    graph.add_tensor("h6", nbytes, ops["h6"], [])
    memory = device.static_pool(graph)
    assert memory.report.block_bytes < memory.report.no_reuse_bytes
    rng = np.random.default_rng(1)
    x_host = rng.standard_normal(shape).astype(np.float32)
    w_host = rng.standard_normal(shape).astype(np.float32)
    x, w = device.array(x_host), device.array(w_host)
    t = {name: memory.tensor(name, shape) for name in ops}
    streams = [device.stream(), device.stream()]
    streams[s0].launch("relu", x, t["h1"])
    streams[s1].launch("matmul", x, w, t["h2"], block_dim=4)
    streams[s0].launch("gelu", t["h1"], t["h3"])
    h3_done = streams[s0].record()
    streams[s1].wait(h3_done)
    streams[s1].launch("mul", t["h2"], t["h3"], t["h4"])
    streams[s1].launch("relu", t["h4"], t["h5"])
    streams[s1].launch("add", t["h5"], t["h5"], t["h6"])
    result = t["h6"].to_numpy(streams[s1])
    h1 = np.maximum(x_host, 0)
    h3 = h1 / (1 + np.exp(-1.59576912 * (h1 + 0.044715 * h1**3)))
    expected = 2 * np.maximum((x_host @ w_host) * h3, 0)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(cannrt.CannError):
        t["h6"].free()
    memory.release()
