"""The graph engine: ONNX models compiled into offline models (lowering/ maps nodes to kernels)."""
