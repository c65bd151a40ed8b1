"""onnxruntime's example models: ``get_example("sigmoid.onnx")`` and friends.

onnxruntime ships three small models with its Python package, used by its
documentation and by many programs written against it. ortcore builds
equivalent models (same graph, names, shapes, weights and metadata) with
``onnx.helper`` the first time one is asked for, and writes them to a cache
folder (``$XDG_CACHE_HOME/ortcore/datasets``, else
``~/.cache/ortcore/datasets``, else a temporary folder), so no binary model
is shipped in the package. A file found there with other content is
rewritten.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from ep_sdk.files import write_atomically

__all__ = ["examples", "get_example"]

_lock = threading.Lock()
_folder: Path | None = None


def _sigmoid() -> onnx.ModelProto:
    shape = [3, 4, 5]
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])],
        "test_sigmoid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    opset = onnx.OperatorSetIdProto()
    opset.version = 9  # no domain field at all, as in onnxruntime's file
    model = helper.make_model(graph, producer_name="backend-test", opset_imports=[opset])
    model.ir_version = 3
    return model


def _mul_1() -> onnx.ModelProto:
    # IR version 3 with an initializer that is not a graph input, as shipped.
    w = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "W"], ["Y"], name="mul_1")],
        "mul test",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 2])],
        initializer=[w],
    )
    model = helper.make_model(
        graph, producer_name="chenta", opset_imports=[helper.make_opsetid("", 7)]
    )
    model.ir_version = 3
    return model


_IRIS_COEFFICIENTS = [
    0.385741144, 1.38054061, -2.13145, -0.992804825,
    0.642774522, -1.7489388, 0.515096605, -1.40534759,
    -1.72411919, -1.15951371, 2.24788475, 2.42839146,
]  # fmt: skip
_IRIS_INTERCEPTS = [0.2496292, 0.582027793, -0.941616654]


def _logreg_iris() -> onnx.ModelProto:
    ml = "ai.onnx.ml"
    nodes = [
        helper.make_node(
            "LinearClassifier",
            ["float_input"],
            ["label", "probability_tensor"],
            name="LinearClassifier",
            domain=ml,
            classlabels_ints=[0, 1, 2],
            coefficients=_IRIS_COEFFICIENTS,
            intercepts=_IRIS_INTERCEPTS,
            multi_class=0,
            post_transform="LOGISTIC",
        ),
        helper.make_node(
            "Normalizer",
            ["probability_tensor"],
            ["probability_tensor_normalized"],
            name="Normalizer",
            domain=ml,
            norm="L1",
        ),
        helper.make_node(
            "ZipMap",
            ["probability_tensor_normalized"],
            ["probabilities"],
            name="ZipMap",
            domain=ml,
            classlabels_int64s=[0, 1, 2],
        ),
    ]
    probabilities = helper.make_value_info(
        "probabilities",
        helper.make_sequence_type_proto(
            helper.make_map_type_proto(
                TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None)
            )
        ),
    )
    graph = helper.make_graph(
        nodes,
        "3c59201b940f410fa29dc71ea9d5767d",
        [helper.make_tensor_value_info("float_input", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [3]), probabilities],
    )
    model = helper.make_model(
        graph,
        producer_name="OnnxMLTools",
        producer_version="1.2.0.0116",
        domain="onnxml",
        opset_imports=[helper.make_opsetid(ml, 1)],
    )
    model.ir_version = 3
    model.model_version = 0  # written explicitly in onnxruntime's file
    model.doc_string = ""
    return model


_BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "logreg_iris.onnx": _logreg_iris,
    "mul_1.onnx": _mul_1,
    "sigmoid.onnx": _sigmoid,
}


def examples() -> list[str]:
    """The names :func:`get_example` knows."""
    return sorted(_BUILDERS)


def _cache_folder() -> Path:
    """The folder example models are written to, created on first use."""
    global _folder
    if _folder is not None:
        return _folder
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidate = Path(xdg) / "ortcore" / "datasets"
    try:
        candidate.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=candidate, delete=True)
        probe.close()
        _folder = candidate
    except OSError:
        _folder = Path(tempfile.mkdtemp(prefix="ortcore-datasets-"))
    return _folder


def get_example(name: str) -> str:
    """The absolute path of example model ``name`` (``"sigmoid.onnx"``,
    ``"mul_1.onnx"``, ``"logreg_iris.onnx"``), built on first use.

    Raises:
        FileNotFoundError: ``name`` is not one of them (as onnxruntime raises).
    """
    build = _BUILDERS.get(os.path.basename(str(name)))
    if build is None or os.path.basename(str(name)) != str(name):
        raise FileNotFoundError(
            f"Unable to find example '{name}' (ortcore provides: {', '.join(examples())})"
        )
    data = build().SerializeToString()
    with _lock:
        path = _cache_folder() / str(name)
        try:
            if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
                return str(path)
        except OSError:
            pass
        write_atomically(path, data, prefix=f".{name}.")
    return str(path)
