"""RegexFullMatch runs RE2: linear time on patterns that make a backtracking
engine explode, RE2 syntax and semantics, and a clear error at session
creation for patterns RE2 refuses."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

# (pattern, input, full match?) that take Python's ``re`` minutes to hours
CATASTROPHIC = [
    (r"(a+)+b", "a" * 36, False),
    (r"(a|aa)+b", "a" * 60, False),
    (r"(a*)*b", "a" * 40, False),
    (r"(x+x+)+y", "x" * 40, False),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "a" * 40 + "!", False),
    (r"(\w+\s?)*", "word " * 2000 + "!", False),
    (r"(a+)+b", "a" * 100_000 + "b", True),
]


def regex_model(pattern: str, name: str = "rx") -> bytes:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name=name, pattern=pattern)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return model.SerializeToString()


def full_match(pattern: str, *texts: str) -> list[bool]:
    sess = ortcore.InferenceSession(regex_model(pattern), providers=["cpu"])
    (y,) = sess.run(None, {"x": np.array(list(texts), dtype=object)})
    return [bool(v) for v in y]


def test_catastrophic_patterns_run_in_linear_time() -> None:
    """In a subprocess with a timeout, so that a backtracking engine fails
    the test instead of hanging the suite."""
    script = textwrap.dedent(
        f"""
        import json, sys, time
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from test_regex_linear import CATASTROPHIC, full_match
        out = []
        for pattern, text, _ in CATASTROPHIC:
            t0 = time.perf_counter()
            (hit,) = full_match(pattern, text)
            out.append([hit, time.perf_counter() - t0])
        print(json.dumps(out))
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        pytest.fail("RegexFullMatch backtracks: catastrophic patterns took over 20 s")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for (pattern, _, want), (hit, seconds) in zip(CATASTROPHIC, results, strict=True):
        assert hit is want, pattern
        assert seconds < 5, (pattern, seconds)


def test_re2_semantics() -> None:
    # one code point per '.', as RE2 in UTF-8 mode
    assert full_match(r".", "é", "ab", "") == [True, False, False]
    # \d and \w are ASCII in RE2 (Python's re would say True for both)
    assert full_match(r"\d", "\u0663") == [False]
    assert full_match(r"\w+", "héllo") == [False]
    assert full_match(r"\pL+", "héllo") == [True]
    # full match, not search; alternation tries every branch
    assert full_match(r"a|ab", "ab", "a", "abc") == [True, True, False]
    assert full_match(r"(?i)hello", "HeLLo") == [True]


@pytest.mark.parametrize(
    ("pattern", "re2_says"),
    [
        (r"(a)\1", "invalid escape sequence"),  # backreference
        (r"(?P<x>a)(?P=x)", "invalid perl operator"),  # named backreference
        (r"(?=a)a", "invalid perl operator"),  # lookahead
        (r"(?<!a)b", "invalid perl operator"),  # negative lookbehind
        (r"a++", "bad repetition operator"),  # possessive
        (r"[a", "missing ]"),
    ],
)
def test_patterns_re2_refuses_fail_at_session_creation(pattern: str, re2_says: str) -> None:
    with pytest.raises(ortcore.InvalidGraph) as info:
        ortcore.InferenceSession(regex_model(pattern, name="my_regex"), providers=["cpu"])
    message = str(info.value)
    assert "RegexFullMatch" in message and "'my_regex'" in message
    assert repr(pattern) in message
    assert re2_says in message
    assert "RE2 syntax" in message


def test_no_fallback_to_another_re2_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module named ``re2`` that is not Google's binding (``pyre2`` falls
    back to Python's ``re``) is refused, never used."""
    monkeypatch.setitem(sys.modules, "re2", types.ModuleType("re2"))
    monkeypatch.delitem(sys.modules, "re2._re2", raising=False)
    with pytest.raises(ortcore.InvalidGraph, match="google-re2"):
        ortcore.InferenceSession(regex_model("a+"), providers=["cpu"])
