"""String kernels against onnx.reference (StringNormalizer: spelled-out results,
as onnxruntime needs system locales and the reference splits words)."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node


def strings(*values: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.array(list(values), dtype=object)
    return out.reshape(shape) if shape is not None else out


@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
@pytest.mark.parametrize("sensitive", [0, 1])
@pytest.mark.parametrize("shape", [(4,), (1, 4)])
def test_string_normalizer(action: str, sensitive: int, shape: tuple[int, ...]) -> None:
    x = strings("Monday", "tuesday", "MONDAY", "wed", shape=shape)
    attrs = {"case_change_action": action, "is_case_sensitive": sensitive,
             "stopwords": ["monday"]}  # fmt: skip
    kept = [w for w in x.reshape(-1) if (w if sensitive else w.lower()) != "monday"]
    kept = [w.lower() if action == "LOWER" else w.upper() if action == "UPPER" else w for w in kept]
    want = strings(*kept, shape=(len(kept),) if len(shape) == 1 else (1, len(kept)))
    check_node("StringNormalizer", [x], attrs, opset=10, expected=[want])


def test_string_normalizer_all_removed() -> None:
    got = run_node("StringNormalizer", [strings("a", "A")], {"stopwords": ["a"]}, opset=10)[0]
    assert got.tolist() == [""]


def test_string_concat_broadcast() -> None:
    x = strings("a", "bé", "", shape=(3, 1))
    y = strings("x", "yz")
    check_node("StringConcat", [x, y], opset=20)
    check_node("StringConcat", [strings("q", shape=()), y], opset=20)


@pytest.mark.parametrize("delimiter", [None, "", "-", "--"])
@pytest.mark.parametrize("maxsplit", [None, 1])
def test_string_split(delimiter: str | None, maxsplit: int | None) -> None:
    x = strings("a-b--c", "  d  e ", "", "f", shape=(2, 2))
    attrs = {k: v for k, v in (("delimiter", delimiter), ("maxsplit", maxsplit)) if v is not None}
    check_node("StringSplit", [x], attrs, opset=20, num_outputs=2)


def test_string_split_empty() -> None:
    y, z = run_node("StringSplit", [strings(shape=(0, 3))], opset=20, num_outputs=2)
    assert y.shape == (0, 3, 0) and z.shape == (0, 3) and z.dtype == np.int64


def test_regex_full_match() -> None:
    x = strings("www.google.com", "google.com", "www.x.org", "", shape=(2, 2))
    check_node("RegexFullMatch", [x], {"pattern": r"www\.[\w.-]+\.\bcom\b"}, opset=20)
    check_node("RegexFullMatch", [strings(shape=(0,))], {"pattern": "a"}, opset=20)


TFIDF = {
    "ngram_counts": [0, 4],
    "ngram_indexes": [0, 1, 2, 3, 4, 5, 6],
    "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
}


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("grams", [(1, 1), (2, 2), (1, 2)])
@pytest.mark.parametrize("skip", [0, 2, 5])
@pytest.mark.parametrize("weights", [False, True])
def test_tfidf_ints(mode: str, grams: tuple[int, int], skip: int, weights: bool) -> None:
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
    attrs = dict(TFIDF, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1],
                 max_skip_count=skip)  # fmt: skip
    if weights:
        attrs["weights"] = [0.5, 1, 2, 3, 4, 5, 6]
    check_node("TfIdfVectorizer", [x], attrs, opset=9, oracle="onnxruntime")
    check_node("TfIdfVectorizer", [x[1].astype(np.int64)], attrs, opset=9, oracle="onnxruntime")


def test_tfidf_strings() -> None:
    attrs = {"mode": "TF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1,
             "ngram_counts": [0, 3], "ngram_indexes": [2, 0, 1, 4, 3],
             "pool_strings": ["a", "b", "c", "a", "b", "b", "c"]}  # fmt: skip
    x = strings("a", "b", "c", "a", "x", "b", shape=(2, 3))
    check_node("TfIdfVectorizer", [x], attrs, opset=9, oracle="onnxruntime")
    check_node("TfIdfVectorizer", [strings(shape=(0,))], attrs, opset=9, oracle="onnxruntime")
