"""Case generators of :mod:`test_fuzz_native` for the sliding windows: Conv
(direct, Winograd, fused), ConvTranspose, MaxPool, AveragePool, the global
pools.
"""

from __future__ import annotations

from typing import Any

from fuzz_draw import (
    Case,
    Drawer,
    composite,
    float_dtype,
    ints,
    tensor,
)

# -- sliding windows: Conv, ConvTranspose, MaxPool, AveragePool ------------------------

AUTO_PADS = ("NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
BAD_AUTO_PADS = ("", "same_upper", "SAME", "BOGUS", "VALID ")


def window_attrs(
    d: Drawer, nsp: int, *, dilations: bool = True, ceil: bool = False
) -> dict[str, Any]:
    """Window attributes of ``nsp`` spatial dims, hostile about one time in three."""
    a: dict[str, Any] = {"kernel_shape": d(ints(nsp, 1, 4))}
    if d.chance(50):
        a["strides"] = d(ints(nsp, 1, 3))
    if dilations and d.chance(40):
        a["dilations"] = d(ints(nsp, 1, 3))
    auto_pad = d.pick(*AUTO_PADS)
    if auto_pad != "NOTSET" or d.chance(20):
        a["auto_pad"] = auto_pad
    if auto_pad == "NOTSET" and d.chance(50):
        a["pads"] = d(ints(2 * nsp, 0, 3))
    if ceil and d.chance(50):
        a["ceil_mode"] = 1
    if d.chance(35):
        names = ["strides", "pads", "auto_pad", "kernel_shape"]
        names += ["dilations"] if dilations else []
        name = d.pick(*names)
        if name == "auto_pad":
            d.bad.append("auto_pad")
            a["auto_pad"] = d.pick(*BAD_AUTO_PADS, "SAME_UPPER", "VALID")
            a["pads"] = d(ints(2 * nsp, 0, 3))  # pads and auto_pad together
        else:
            default = [0] * (2 * nsp) if name == "pads" else [1] * nsp
            a[name] = d.spoil(a.get(name) or default, name)
    return a


def spatial_shape(d: Drawer, nsp: int, hi: int = 6) -> list[int]:
    return list(d(ints(nsp, 0 if d.chance(15) else 1, hi)))


def pool_pads_checked(d: Drawer, a: dict[str, Any]) -> None:
    """Count pads >= kernel as invalid: onnxruntime refuses them (and the
    spec leaves windows of padding only undefined)."""
    kernel, pads = a.get("kernel_shape") or [], a.get("pads") or []
    if len(pads) == 2 * len(kernel) and any(
        p >= k for p, k in zip(pads, [*kernel, *kernel], strict=True)
    ):
        d.bad.append("pads >= kernel")


@composite
def max_pool_cases(d: Drawer) -> Case:
    opset = d.pick(8, 10, 11, 12, 22)
    nsp = d.int(1, 3)
    dtype = d.pick("float32", "float32", "float16", "int8", "uint8")
    if opset < 12 and dtype in ("int8", "uint8"):
        dtype = "float32"
    a = window_attrs(d, nsp, dilations=opset >= 10, ceil=opset >= 10)
    pool_pads_checked(d, a)
    indices = d.chance(35)
    if indices and d.chance(50):
        a["storage_order"] = 1
        if d.hostile("storage_order", 20):
            a["storage_order"] = d.pick(2, -1)
    shape = [d.int(0, 2), d.int(0, 3), *spatial_shape(d, nsp)]
    outs = [dtype, "int64"] if indices else [dtype]
    # MaxPool lets no NaN win (as onnxruntime); the oracles let it: infinities only
    x = tensor(dtype, shape, special=dtype.startswith("float") and d.chance(10) and "inf")
    return d.case("MaxPool", opset, [x], outs, a)


@composite
def average_pool_cases(d: Drawer) -> Case:
    opset = d.pick(7, 10, 11, 19, 22)
    nsp = d.int(1, 3)
    dtype = float_dtype(d)
    a = window_attrs(d, nsp, dilations=opset >= 19, ceil=opset >= 10)
    pool_pads_checked(d, a)
    if d.chance(50):
        a["count_include_pad"] = d.pick(1, 1, 0)
        if d.hostile("count_include_pad", 10):
            a["count_include_pad"] = 3
    shape = [d.int(0, 2), d.int(0, 3), *spatial_shape(d, nsp)]
    return d.case("AveragePool", opset, [tensor(dtype, shape)], [dtype], a)


@composite
def global_pool_cases(d: Drawer) -> Case:
    op = d.pick("GlobalAveragePool", "GlobalMaxPool")
    rank = d.int(2, 5) if d.chance(90) else d.pick(0, 1)
    shape = list(d(ints(rank, 0 if d.chance(20) else 1, 6)))
    dtype = float_dtype(d, "float64")
    x = tensor(dtype, shape, special=d.chance(15))
    # Below rank 3 onnx.reference returns nonsense and onnxruntime refuses:
    # only a crash or a raw exception is a failure there. onnx.reference's
    # GlobalMaxPool is right for rank 4 only: ReduceMax is the oracle.
    ref = None
    if op == "GlobalMaxPool":
        node = {"op": "ReduceMax", "inputs": ["x0"], "outputs": ["y0"],
                "attrs": {"axes": list(range(2, rank)), "keepdims": 1}}  # fmt: skip
        ref = {"nodes": [node], "opset": 13}
    return d.case(op, d.pick(1, 22), [x], [dtype], crash_only=rank < 3 or None, ref=ref)


def weight_kernel(d: Drawer, a: dict[str, Any], nsp: int) -> list[int]:
    """The spatial dims of a convolution weight for the drawn attributes:
    ``kernel_shape`` stays an attribute now and then, and always where it was
    made hostile (the weight keeps a sane shape)."""
    kernel = list(a.pop("kernel_shape"))
    sane = [k if 1 <= k <= 4 else 2 for k in kernel[:nsp]] + [2] * (nsp - len(kernel))
    if kernel != sane or d.chance(30):
        a["kernel_shape"] = kernel
    return sane


def channels(d: Drawer, c: int, a: dict[str, Any]) -> int:
    """Draw ``group`` into ``a`` (one, depthwise, a divisor of ``c``, or
    hostile); return the group count the weight is shaped for."""
    kind = d.pick("one", "one", "depthwise", "depthwise", "divisor", "bad")
    group = 1
    if kind == "depthwise":
        group = c
    elif kind == "divisor":
        group = d.pick(*[g for g in range(1, c + 1) if c % g == 0])
    elif kind == "bad":
        d.bad.append("group")
        a["group"] = d.pick(c + 1, 2 * c + 1, 0, -1, -c, 2**31, 2**63 - 1)
        return 1
    a["group"] = group
    return group


@composite
def conv_cases(d: Drawer, fused: bool = False) -> Case:
    opset = d.pick(11, 22)
    nsp = d.int(1, 3) if d.chance(90) else 4
    dtype = float_dtype(d, "float64")
    a = window_attrs(d, nsp)
    kernel = weight_kernel(d, a, nsp)
    n, c = d.int(0, 2), d.int(1, 6)
    g = channels(d, c, a)
    mg = 1 if g == c and d.chance(50) else d.int(1, 3)
    cw = c // g
    if d.hostile("weight channels", 8):
        cw = d.pick(0, cw + 1, c + 1)
    x_shape = [n, c, *spatial_shape(d, nsp)]
    inputs = [tensor(dtype, x_shape), tensor(dtype, [g * mg, cw, *kernel], const=d.chance(30))]
    if d.chance(50):
        blen = g * mg
        if d.hostile("bias length", 10):
            blen = d.pick(0, 1 if blen > 1 else 2, blen + 1)
        inputs.append(tensor(dtype, [blen], const=d.chance(30)))
    if not fused:
        return d.case("Conv", opset, inputs, [dtype], a)
    act, params = d.pick(
        ("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.5]), ("Sigmoid", []),
        ("Tanh", []), ("HardSigmoid", [0.2, 0.5]),
    )  # fmt: skip
    return conv_fused_case(d, opset, inputs, dtype, a, act, params)


def conv_fused_case(
    d: Drawer, opset: int, inputs: list[Any], dtype: str, a: dict[str, Any], act: str,
    params: list[float],
) -> Case:  # fmt: skip
    """FusedConv (com.ortcore), checked against Conv then the activation."""
    names = [f"x{i}" for i in range(len(inputs))]
    act_attrs: dict[str, Any] = {}
    act_inputs = ["t"]
    if act == "LeakyRelu":
        act_attrs = {"alpha": params[0]}
    elif act == "HardSigmoid":
        act_attrs = {"alpha": params[0], "beta": params[1]}
    ref_nodes = [{"op": "Conv", "inputs": names, "outputs": ["t"], "attrs": a}]
    ref_inputs = list(inputs)
    if act == "Clip":
        ref_inputs += [tensor(dtype, [], values=[params[0]], const=True),
                       tensor(dtype, [], values=[params[1]], const=True)]  # fmt: skip
        act_inputs += [f"x{len(inputs)}", f"x{len(inputs) + 1}"]
    ref_nodes.append({"op": act, "inputs": act_inputs, "outputs": ["y0"], "attrs": act_attrs})
    attrs = {**a, "activation": act}
    if params:
        attrs["activation_params"] = [float(p) for p in params]
    return d.case(
        "FusedConv", opset, inputs, [dtype], attrs, domain="com.ortcore",
        opsets={"com.ortcore": 1},
        ref={"nodes": ref_nodes, "inputs": ref_inputs, "opsets": {}},
    )  # fmt: skip


@composite
def winograd_cases(d: Drawer) -> Case:
    """Conv shapes that take the Winograd F(2x2, 3x3) path (16+ channels,
    3x3, stride 1, enough tiles), and near misses."""
    c, m = d.pick(16, 17, 24), d.pick(16, 20, 32)
    const = d.chance(70)
    side = d.int(4, 10) if const else d.int(14, 18)
    h, w = side, d.int(side - 2, side + 2)
    a: dict[str, Any] = {"kernel_shape": [3, 3]}
    if d.chance(50):
        a["pads"] = d(ints(4, 0, 2))
    elif d.chance(50):
        a["auto_pad"] = d.pick("SAME_UPPER", "SAME_LOWER", "VALID")
    if d.chance(25):
        a["pads"] = d.spoil(a.get("pads") or [1, 1, 1, 1], "pads")
        a.pop("auto_pad", None)
    n = d.int(1, 2)
    inputs = [tensor("float32", [n, c, h, w]), tensor("float32", [m, c, 3, 3], const=const)]
    if d.chance(50):
        inputs.append(tensor("float32", [m]))
    return d.case("Conv", d.pick(11, 22), inputs, ["float32"], a)


@composite
def conv_transpose_cases(d: Drawer) -> Case:
    opset = d.pick(11, 22)
    nsp = d.int(1, 3)
    dtype = float_dtype(d)
    a = window_attrs(d, nsp)
    kernel = weight_kernel(d, a, nsp)
    strides = a.get("strides") or [1] * nsp
    if d.chance(30):
        top = [max(1, min(int(s), 3)) - 1 for s in strides]
        a["output_padding"] = [d.int(0, t) for t in top]
        if d.chance(30):
            a["output_padding"] = d.spoil(a["output_padding"], "output_padding")
    n, c = d.int(0, 2), d.int(1, 4)
    g = channels(d, c, a)
    mg = d.int(1, 3)
    x_shape = [n, c, *spatial_shape(d, nsp, hi=5)]
    if d.chance(20):
        out = [d.int(0, 12) for _ in range(nsp)]
        a["output_shape"] = d.spoil(out, "output_shape") if d.chance(25) else out
    inputs = [tensor(dtype, x_shape), tensor(dtype, [c, mg, *kernel], const=d.chance(30))]
    if d.chance(50):
        blen = g * mg
        if d.hostile("bias length", 10):
            blen = d.pick(0, blen + 1)
        inputs.append(tensor(dtype, [blen]))
    return d.case("ConvTranspose", opset, inputs, [dtype], a)
