"""The graph engine: ONNX -> passes -> streams -> memory -> tasks -> cannrt.om.OfflineModel (what atc does).

Pure functions from a model to an offline model; nothing here touches a device.
"""

from cannrt.graph.compiler import CompileOptions, compile_model, prepare_graph
from cannrt.graph.errors import GraphError, ModelFileError, ShapeError, UnsupportedOpError
from cannrt.graph.ir import Graph

__all__ = [
    "CompileOptions",
    "Graph",
    "GraphError",
    "ModelFileError",
    "ShapeError",
    "UnsupportedOpError",
    "compile_model",
    "prepare_graph",
]
