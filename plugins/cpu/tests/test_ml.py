"""ai.onnx.ml kernels: hand-built scikit-learn-style models run through
``ortcore.InferenceSession`` and compared with onnxruntime; ZipMap and
DictVectorizer (map types, which onnx-ir cannot load) at kernel level."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import ortcore
import pytest
from ep_sdk.testing import KernelKit
from onnx import TensorProto, helper

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)

RNG = np.random.default_rng(5)
ML = "ai.onnx.ml"


def ml_model(op: str, x: np.ndarray, attrs: dict[str, Any], n_out: int = 1,
             ml_opset: int = 3) -> onnx.ModelProto:  # fmt: skip
    """A model of one ai.onnx.ml node."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype) if x.dtype != object else TensorProto.STRING
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, ["x"], outs, domain=ML, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, list(x.shape))], []
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
        ir_version=9,
    )  # fmt: skip
    model.graph.output.extend(
        helper.make_tensor_value_info(o, t, [None] * rank)
        for o, t, rank in zip(outs, _out_types(op, elem, attrs), _out_ranks(op, x), strict=False)
    )
    return model


def _out_ranks(op: str, x: np.ndarray) -> list[int]:
    if op.endswith("Classifier"):
        return [1, 2]
    if op in ("Binarizer", "Imputer", "CategoryMapper", "LabelEncoder"):
        return [x.ndim]
    return [x.ndim + 1] if op == "OneHotEncoder" else [2]


def _out_types(op: str, elem: int, attrs: dict[str, Any]) -> list[int]:
    """The element types of an ml node's outputs (onnx infers few of them)."""
    f, i, s = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING
    if op.endswith("Classifier"):
        strings = "classlabels_strings" in attrs
        return [s if strings else i, f]
    if op in ("Binarizer", "Imputer", "TreeEnsemble"):
        return [elem]
    if op == "CategoryMapper":
        return [i if elem == s else s]
    if op == "LabelEncoder":
        if "classes_strings" in attrs:
            return [i if elem == s else s]
        kind = next(k for k in attrs if k.startswith("values_"))
        return [{"values_int64s": i, "values_strings": s}.get(kind, f)]
    return [f]


def compare(model: onnx.ModelProto, x: np.ndarray, rtol: float = 1e-4) -> list[np.ndarray]:
    import onnxruntime as ort

    data = model.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, w)
    return got


# -- trees -----------------------------------------------------------------

# Two trees over 3 features: tree 0 has a root split and two leaves, tree 1 a
# deeper left branch; node ids are per tree.
TREES = {
    "nodes_treeids": [0, 0, 0, 1, 1, 1, 1, 1],
    "nodes_nodeids": [0, 1, 2, 0, 1, 2, 3, 4],
    "nodes_featureids": [0, 0, 0, 1, 2, 0, 0, 0],
    "nodes_values": [0.1, 0, 0, -0.2, 0.5, 0, 0, 0],
    "nodes_truenodeids": [1, 0, 0, 1, 3, 0, 0, 0],
    "nodes_falsenodeids": [2, 0, 0, 2, 4, 0, 0, 0],
    "nodes_missing_value_tracks_true": [1, 0, 0, 0, 1, 0, 0, 0],
}
LEAVES = [(0, 1), (0, 2), (1, 2), (1, 3), (1, 4)]  # (tree, node)


def tree_attrs(mode: str, prefix: str, n_targets: int) -> dict[str, Any]:
    a = dict(TREES)
    a["nodes_modes"] = [mode if m != "LEAF" else "LEAF"
                        for m in ["X", "LEAF", "LEAF", "X", "X", "LEAF", "LEAF", "LEAF"]]  # fmt: skip
    ids, tids, nids, ws = [], [], [], []
    for k, (t, n) in enumerate(LEAVES):
        for target in range(n_targets):
            if (k + target) % 3 == 2 and n_targets > 1:
                continue  # leaves need not cover every target
            tids.append(t), nids.append(n), ids.append(target), ws.append(float(k - target * 0.7))
    a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"] = tids, nids
    a[f"{prefix}_ids"], a[f"{prefix}_weights"] = ids, ws
    return a


def features(n: int = 50, nan: bool = True) -> np.ndarray:
    x = RNG.standard_normal((n, 3)).astype(np.float32)
    x[::5, 0] = 0.1  # exactly on a threshold
    if nan:
        x[::4, 2] = np.nan
        x[::6, 0] = np.nan
    return x


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                  "BRANCH_EQ", "BRANCH_NEQ"])  # fmt: skip
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_tree_regressor(mode: str, aggregate: str, n_targets: int) -> None:
    attrs = tree_attrs(mode, "target", n_targets)
    attrs.update(n_targets=n_targets, aggregate_function=aggregate, base_values=[0.5] * n_targets)
    compare(ml_model("TreeEnsembleRegressor", features(), attrs, ml_opset=1), features())


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", ["ints", "strings"])
def test_tree_classifier_multiclass(post: str, labels: str) -> None:
    attrs = tree_attrs("BRANCH_LEQ", "class", 3)
    attrs["post_transform"] = post
    if labels == "ints":
        attrs["classlabels_int64s"] = [10, 20, 30]
    else:
        attrs["classlabels_strings"] = ["a", "b", "c"]
    x = features()
    compare(ml_model("TreeEnsembleClassifier", x, attrs, n_out=2, ml_opset=1), x)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_tree_classifier_binary(post: str) -> None:
    attrs = tree_attrs("BRANCH_LEQ", "class", 1)
    attrs["class_weights"] = [0.3, -0.2, 0.9, 0.1, -0.6] if post == "LOGISTIC" else [
        0.3, 0.2, 0.9, 0.1, 0.6]  # fmt: skip
    attrs.update(post_transform=post, classlabels_int64s=[0, 1], class_ids=[0] * 5)
    x = features(nan=False)
    compare(ml_model("TreeEnsembleClassifier", x, attrs, n_out=2, ml_opset=1), x)


def test_tree_v3_tensor_attributes_double() -> None:
    attrs = tree_attrs("BRANCH_LEQ", "target", 1)
    values = attrs.pop("nodes_values")
    weights = attrs.pop("target_weights")
    attrs["nodes_values_as_tensor"] = helper.make_tensor("v", TensorProto.DOUBLE, [8], values)
    attrs["target_weights_as_tensor"] = helper.make_tensor("w", TensorProto.DOUBLE, [5], weights)
    attrs["n_targets"] = 1
    x = features().astype(np.float64)
    compare(ml_model("TreeEnsembleRegressor", x, attrs), x)


def test_tree_ensemble_v5_matches_v3() -> None:
    """The same forest written as TreeEnsemble v5 and as the v3 regressor."""
    # tree 0: node0 (x0 <= 0.1) -> leaf0 / leaf1; tree 1: node1 (x1 in {1, 2}) -> node2 / leaf2,
    # node2 (x2 <= 0.5) -> leaf3 / leaf4
    v5 = {
        "nodes_featureids": [0, 1, 2], "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [3], [0, 6, 0]),
        "nodes_splits": helper.make_tensor("s", TensorProto.FLOAT, [3], [0.1, np.nan, 0.5]),
        "nodes_truenodeids": [0, 2, 3], "nodes_trueleafs": [1, 0, 1],
        "nodes_falsenodeids": [1, 2, 4], "nodes_falseleafs": [1, 1, 1],
        "nodes_missing_value_tracks_true": [1, 0, 0],
        "membership_values": helper.make_tensor("mv", TensorProto.FLOAT, [3], [1, 2, np.nan]),
        "leaf_targetids": [0, 1, 0, 1, 0],
        "leaf_weights": helper.make_tensor("w", TensorProto.FLOAT, [5], [1, 2, 3, 4, 5]),
        "tree_roots": [0, 1], "n_targets": 2, "aggregate_function": 1,
    }  # fmt: skip
    x = RNG.integers(0, 4, (30, 3)).astype(np.float32)
    x[::3, 0] = np.nan
    model = ml_model("TreeEnsemble", x, v5, ml_opset=5)
    got = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(
        None, {"x": x})[0]  # fmt: skip
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == np.float32


# -- linear and SVM --------------------------------------------------------


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_linear_classifier(post: str, n_classes: int) -> None:
    rows = 1 if n_classes == 2 else n_classes
    attrs = {"coefficients": RNG.standard_normal(rows * 4).tolist(),
             "intercepts": RNG.standard_normal(rows).tolist(),
             "classlabels_ints": list(range(n_classes)), "post_transform": post}  # fmt: skip
    x = RNG.standard_normal((20, 4)).astype(np.float32)
    compare(ml_model("LinearClassifier", x, attrs, n_out=2, ml_opset=1), x)


def test_linear_regressor_and_scaler() -> None:
    x = RNG.standard_normal((10, 4)).astype(np.float32)
    attrs = {"coefficients": RNG.standard_normal(8).tolist(), "intercepts": [0.5, -1.0],
             "targets": 2}  # fmt: skip
    compare(ml_model("LinearRegressor", x, attrs, ml_opset=1), x)
    compare(ml_model("Scaler", x, {"offset": [0.1, 0.2, 0.3, 0.4], "scale": [2, 1, 3, 1.0]},
                     ml_opset=1), x)  # fmt: skip
    xd = x.astype(np.float64)
    compare(ml_model("Scaler", xd, {"offset": [0.5], "scale": [2.0]}, ml_opset=1), xd)


SV = RNG.standard_normal((6, 3)).round(2)


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("proba", [False, True])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_svm_classifier(kernel: str, proba: bool, n_classes: int) -> None:
    per_class = [2, 4] if n_classes == 2 else [2, 2, 2]
    pairs = n_classes * (n_classes - 1) // 2
    attrs: dict[str, Any] = {
        "kernel_type": kernel, "kernel_params": [0.3, 0.1, 2.0],
        "support_vectors": SV.reshape(-1).tolist(), "vectors_per_class": per_class,
        "coefficients": RNG.standard_normal((n_classes - 1) * 6).tolist(),
        "rho": RNG.standard_normal(pairs).tolist(),
        "classlabels_ints": list(range(n_classes)),
    }  # fmt: skip
    if proba:
        attrs["prob_a"] = (-RNG.random(pairs) - 0.5).tolist()
        attrs["prob_b"] = (RNG.standard_normal(pairs) * 0.1).tolist()
    x = RNG.standard_normal((15, 3)).astype(np.float32)
    compare(ml_model("SVMClassifier", x, attrs, n_out=2, ml_opset=1), x, rtol=1e-3)


@pytest.mark.parametrize("kernel", ["LINEAR", "RBF"])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel: str, one_class: int) -> None:
    attrs = {"kernel_type": kernel, "kernel_params": [0.3, 0.1, 2.0], "n_supports": 6,
             "support_vectors": SV.reshape(-1).tolist(), "one_class": one_class,
             "coefficients": RNG.standard_normal(6).tolist(), "rho": [0.2]}  # fmt: skip
    x = RNG.standard_normal((15, 3)).astype(np.float32)
    compare(ml_model("SVMRegressor", x, attrs, ml_opset=1), x)
    linear = {"coefficients": [0.5, -1.0, 2.0], "rho": [0.3], "n_supports": 0,
              "kernel_params": [0.3, 0.1, 2.0]}  # fmt: skip
    compare(ml_model("SVMRegressor", x, linear, ml_opset=1), x)


# -- preprocessing ---------------------------------------------------------


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(norm: str) -> None:
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    x[0] = 0
    compare(ml_model("Normalizer", x, {"norm": norm}, ml_opset=1), x)


def test_binarizer_imputer_feature_extractor() -> None:
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    compare(ml_model("Binarizer", x, {"threshold": 0.2}, ml_opset=1), x)
    xn = x.copy()
    xn[::2, 1] = np.nan
    compare(ml_model("Imputer", xn, {"imputed_value_floats": [1.0, 2.0, 3.0],
                                     "replaced_value_float": np.nan}, ml_opset=1), xn)  # fmt: skip
    xi = RNG.integers(0, 5, (6, 3)).astype(np.int64)
    compare(ml_model("Imputer", xi, {"imputed_value_int64s": [9],
                                     "replaced_value_int64": 0}, ml_opset=1), xi)  # fmt: skip


def test_array_feature_extractor() -> None:
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((3, 5)).astype(np.float32)
    idx = np.array([4, 0, 2], np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [None] * 2),
        helper.make_tensor_value_info("i", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 1)], ir_version=9)  # fmt: skip
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    for data in (x, x[1:2]):
        got = sess.run(None, {"x": data, "i": idx})[0]
        want = ReferenceEvaluator(model).run(None, {"x": data, "i": idx})[0]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["ints", "strings"])
def test_one_hot_and_category_mapper(kind: str) -> None:
    if kind == "ints":
        x = np.array([[1, 5], [3, 7]], np.int64)
        attrs = {"cats_int64s": [1, 3, 5]}
    else:
        x = np.array([["a", "z"], ["c", "b"]], dtype=object)
        attrs = {"cats_strings": ["a", "b", "c"]}
    compare(ml_model("OneHotEncoder", x, dict(attrs, zeros=1), ml_opset=1), x)
    cm = {"cats_strings": ["a", "b", "c"], "cats_int64s": [1, 3, 5], "default_int64": 42}
    compare(ml_model("CategoryMapper", x, cm, ml_opset=1), x)


@pytest.mark.parametrize(
    "keys,values,opset",
    [
        ({"keys_strings": ["a", "b"]}, {"values_int64s": [1, 2], "default_int64": 7}, 2),
        ({"keys_int64s": [3, 1]}, {"values_strings": ["x", "y"]}, 2),
        ({"keys_floats": [0.5, 1.5]}, {"values_floats": [-1.0, -2.0]}, 2),
        ({"keys_int64s": [3, 1]}, {"values_floats": [0.25, 0.75], "default_float": 9.0}, 4),
    ],
)
def test_label_encoder(keys: dict, values: dict, opset: int) -> None:
    sample = {"keys_strings": np.array(["a", "q", "b"], dtype=object),
              "keys_int64s": np.array([1, 2, 3, 3], np.int64),
              "keys_floats": np.array([0.5, 1.0, 1.5], np.float32)}  # fmt: skip
    x = sample[next(iter(keys))]
    compare(ml_model("LabelEncoder", x, {**keys, **values}, ml_opset=opset), x)


def test_label_encoder_v1() -> None:
    attrs = {"classes_strings": ["a", "b", "c"], "default_int64": -5}
    x = np.array(["c", "a", "x"], dtype=object)
    compare(ml_model("LabelEncoder", x, attrs, ml_opset=1), x)


def test_feature_vectorizer() -> None:
    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain=ML,
                            inputdimensions=[2, 3])  # fmt: skip
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [None, None]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [None, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 1)], ir_version=9)  # fmt: skip
    import onnxruntime as ort

    feeds = {"a": RNG.standard_normal((4, 3)).astype(np.float32),
             "b": np.arange(8, dtype=np.float32).reshape(4, 2)}  # fmt: skip
    got = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds)  # fmt: skip
    np.testing.assert_array_equal(got[0], want[0])


def _kernel(op: str, attrs: dict[str, Any], out_type: ir.DataType | None = None) -> Any:
    node = ir.Node(ML, op, [ir.Value(name="x")], attributes=[
        ir.convenience.convert_attribute(k, v) for k, v in attrs.items()])  # fmt: skip
    if out_type is not None:
        node.outputs[0].dtype = out_type
    return kit.build_kernel(node, {ML: 1})


def test_zipmap_and_dict_vectorizer() -> None:
    zm = _kernel("ZipMap", {"classlabels_int64s": [10, 20]})
    (rows,) = zm(np.array([[0.25, 0.75], [1.0, 0.0]], np.float32))
    assert rows == [{10: 0.25, 20: 0.75}, {10: 1.0, 20: 0.0}]
    zs = _kernel("ZipMap", {"classlabels_strings": ["a", "b"]})
    assert zs(np.array([[0.5, 0.5]], np.float32))[0] == [{"a": 0.5, "b": 0.5}]
    dv = _kernel("DictVectorizer", {"string_vocabulary": ["x", "y", "z"]}, ir.DataType.FLOAT)
    (out,) = dv({"z": 2.0, "x": 1.0, "unknown": 5.0})
    np.testing.assert_array_equal(out, np.array([[1.0, 0.0, 2.0]], np.float32))
    assert out.dtype == np.float32
