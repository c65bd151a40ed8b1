"""The quantized ops of onnxruntime's contrib domain ``com.microsoft`` that its
quantization tool writes (QOperator format, dynamic quantization, QAttention
for BERT) and MatMulNBits for language-model weights, built on the integer
products of :mod:`.._qgemm`:

- :mod:`.matmul`: DynamicQuantizeMatMul, MatMulIntegerToFloat, QGemm;
- :mod:`.nbits`: MatMulNBits (2/4/8-bit block-quantized weights);
- :mod:`.elementwise`: QLinearAdd, QLinearMul, QLinearSigmoid,
  QLinearLeakyRelu, QLinearSoftmax, QLinearWhere, QLinearConcat, and the
  domain's QuantizeLinear/DequantizeLinear;
- :mod:`.pool`: QLinearGlobalAveragePool, QLinearAveragePool;
- :mod:`.attention`: QAttention.

onnx has no schemas for this domain: types are constrained per input index
and attributes default as onnxruntime's contrib schemas say.
"""

from . import attention, elementwise, matmul, nbits, pool

__all__ = ["attention", "elementwise", "matmul", "nbits", "pool"]
