"""String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
TfIdfVectorizer.

String tensors are numpy object arrays of ``str``. Per-string work loops in
Python (there is no vectorised string arithmetic worth the name), a chunk of
``_POLL_EVERY`` strings at a time with a ``RunOptions.terminate`` check
between chunks; the n-gram counting of TfIdfVectorizer walks a trie with
numpy over all rows at once.

RegexFullMatch runs RE2 (the ``google-re2`` binding), as onnxruntime does: RE2
matches in time linear in the input, whatever the pattern, so a model cannot
make a run backtrack for hours (``(a+)+b``), and patterns outside RE2's syntax
(backreferences, lookaround) are refused when the session is created.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from ep_sdk import Compute, NodeInfo, check_terminate

from . import registry

_T = TypeVar("_T")

_POLL_EVERY = 1024
"""Strings handled between two checks of ``RunOptions.terminate`` (a check
costs about as much as handling one short string)."""


def _chunks(n: int) -> Iterator[slice]:
    """Slices covering ``range(n)``, ``_POLL_EVERY`` long; raises
    ``RunTerminated`` before a chunk if the run was asked to stop."""
    for start in range(0, n, _POLL_EVERY):
        check_terminate()
        yield slice(start, start + _POLL_EVERY)


def _map(fn: Callable[[Any], _T], items: Sequence[Any]) -> list[_T]:
    """``[fn(v) for v in items]``, polling ``RunOptions.terminate`` per chunk."""
    out: list[_T] = []
    for part in _chunks(len(items)):
        out += [fn(v) for v in items[part]]
    return out


def _strings(x: np.ndarray) -> list[str]:
    return _map(str, x.reshape(-1).tolist())


def _object(values: Sequence[Any], shape: Sequence[int]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out.reshape(shape)


@registry.kernel("StringNormalizer", since=10)
def string_normalizer(info: NodeInfo) -> Compute:
    """Drop stopword elements, then lower- or upper-case what is left
    (input ``[C]`` or ``[1, C]``; an all-dropped result is one empty string)."""
    action = info.attrs.get("case_change_action", "NONE") or "NONE"
    if action not in ("NONE", "LOWER", "UPPER"):
        raise ValueError(f"{info.describe()}: unknown case_change_action {action!r}")
    sensitive = bool(info.attrs.get("is_case_sensitive", 0))
    stop_list = list(info.attrs.get("stopwords") or [])
    stops = set(stop_list) if sensitive else {w.lower() for w in stop_list}

    def change(s: str) -> str:
        return s.lower() if action == "LOWER" else s.upper() if action == "UPPER" else s

    def keep(w: str) -> str | None:
        """``w`` case-changed, or ``None`` for a stopword."""
        return None if (w if sensitive else w.lower()) in stops else change(w)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
            raise ValueError(f"{info.describe()}: input must be [C] or [1, C], got {x.shape}")
        kept = [w for w in _map(keep, _strings(x)) if w is not None]
        if not kept:
            kept = [""]
        shape = [len(kept)] if x.ndim == 1 else [1, len(kept)]
        return (_object(kept, shape),)

    return compute


@registry.kernel("StringConcat", since=20)
def string_concat(info: NodeInfo) -> Compute:
    """Elementwise concatenation of two broadcast string tensors."""

    def compute(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        a, b = np.broadcast_arrays(x, y)
        left, right = _strings(a), _strings(b)
        joined: list[str] = []
        for part in _chunks(len(left)):
            joined += [p + q for p, q in zip(left[part], right[part], strict=True)]
        return (_object(joined, a.shape),)

    return compute


@registry.kernel("StringSplit", since=20)
def string_split(info: NodeInfo) -> Compute:
    """Split every string by ``delimiter`` (runs of whitespace when empty),
    padding to the longest split with empty strings; also return the counts."""
    delimiter = info.attrs.get("delimiter") or None
    maxsplit_attr = info.attrs.get("maxsplit")
    maxsplit = -1 if maxsplit_attr is None else int(maxsplit_attr)

    def compute(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = _map(lambda s: s.split(delimiter, maxsplit), _strings(x))
        counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
        width = max((len(p) for p in parts), default=0)
        padded: list[str] = []
        for part in _chunks(len(parts)):
            padded += [q for p in parts[part] for q in p + [""] * (width - len(p))]
        return _object(padded, (*x.shape, width)), counts

    return compute


def _re2_engine() -> Any:
    """Google's RE2 binding (``re2._re2``, from the ``google-re2`` package).

    The C++ ``RE2`` class is used directly, never a wrapper that might hand an
    unsupported pattern to Python's backtracking ``re``. (``google-re2``'s own
    ``re2`` module does not fall back either; other packages that install a
    module named ``re2``, such as ``pyre2``, do, and lack ``_re2``.)

    Raises:
        ImportError: ``google-re2`` is not installed (or another ``re2``
            module shadows it).
    """
    try:
        from re2 import _re2
    except ImportError as exc:
        raise ImportError(
            "RegexFullMatch needs Google's RE2 binding: pip install 'google-re2>=1.1' "
            "(a module named 're2' from another package does not provide it)"
        ) from exc
    return _re2


@registry.kernel("RegexFullMatch", since=20)
def regex_full_match(info: NodeInfo) -> Compute:
    """Whether each string matches ``pattern`` as a whole, with RE2 (RE2
    syntax and semantics, linear time; the pattern is compiled when the
    session is created and a pattern RE2 refuses is an error then)."""
    pattern = str(info.attrs.get("pattern", ""))
    engine = _re2_engine()
    options = engine.RE2.Options()
    options.log_errors = False  # the error goes into our message, not stderr
    options.never_capture = True  # only match/no match is wanted: a faster program
    regex = engine.RE2(pattern.encode("utf-8"), options)
    if not regex.ok():
        message = regex.error()
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise ValueError(
            f"{info.describe()}: invalid pattern {pattern!r}: {message}. The pattern must "
            "be RE2 syntax (https://github.com/google/re2/wiki/Syntax), which has no "
            "backreferences or lookaround."
        )
    match = regex.Match
    both = engine.RE2.Anchor.ANCHOR_BOTH
    no_match = (-1, -1)

    def full_match(s: str) -> bool:
        data = s.encode("utf-8")
        return bool(match(both, data, 0, len(data))[0] != no_match)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        hits = _map(full_match, _strings(x))
        return (np.array(hits, dtype=bool).reshape(x.shape),)

    return compute


class _NgramTrie:
    """The pool's n-grams as a trie over token ids, stored as sorted arrays.

    Node 0 is the root; ``child(node, token)`` gives the next node or -1;
    ``column[node]`` is the output column of the n-gram ending there, or -1.
    """

    def __init__(
        self,
        pool: Sequence[Any],
        counts: Sequence[int],
        indexes: Sequence[int],
        min_n: int,
        max_n: int,
    ) -> None:
        self.vocab: dict[Any, int] = {}
        edges: dict[tuple[int, int], int] = {}
        column = [-1]
        gram_id = 0
        for size, start in enumerate(counts, start=1):
            end = counts[size] if size < len(counts) else len(pool)
            for first in range(start, end - size + 1, size):
                gram = pool[first : first + size]
                if min_n <= size <= max_n:
                    node = 0
                    for tok in gram:
                        tid = self.vocab.setdefault(tok, len(self.vocab))
                        nxt = edges.get((node, tid))
                        if nxt is None:
                            nxt = edges[(node, tid)] = len(column)
                            column.append(-1)
                        node = nxt
                    column[node] = int(indexes[gram_id])
                gram_id += 1
        self.n_vocab = max(len(self.vocab), 1)
        keys = np.array([n * self.n_vocab + t for n, t in edges], dtype=np.int64)
        order = np.argsort(keys)
        self.keys = keys[order]
        self.children = np.array(list(edges.values()), dtype=np.int64)[order]
        self.column = np.array(column, dtype=np.int64)
        self.int_vocab = np.array(sorted(k for k in self.vocab if isinstance(k, int)), np.int64)

    def token_ids(self, x: np.ndarray) -> np.ndarray:
        """Map tokens to vocabulary ids (-1 for tokens outside the pool)."""
        if x.dtype == object:
            ids = _map(lambda s: self.vocab.get(s, -1), x.reshape(-1).tolist())
            return np.array(ids, dtype=np.int64).reshape(x.shape)
        flat = x.astype(np.int64)
        if self.int_vocab.size == 0:
            return np.full(x.shape, -1, np.int64)
        pos = np.clip(np.searchsorted(self.int_vocab, flat), 0, self.int_vocab.size - 1)
        found = self.int_vocab[pos] == flat
        lookup = np.array([self.vocab[int(v)] for v in self.int_vocab], dtype=np.int64)
        return np.where(found, lookup[pos], -1)

    def child(self, node: np.ndarray, tok: np.ndarray) -> np.ndarray:
        """Follow the edge labelled ``tok`` from each ``node`` (-1 stays -1)."""
        key = node * self.n_vocab + tok
        if self.keys.size == 0:
            return np.full(node.shape, -1, np.int64)
        pos = np.clip(np.searchsorted(self.keys, key), 0, self.keys.size - 1)
        ok = (self.keys[pos] == key) & (node >= 0) & (tok >= 0)
        return np.where(ok, self.children[pos], -1)


@registry.kernel("TfIdfVectorizer", since=9)
def tfidf_vectorizer(info: NodeInfo) -> Compute:
    """Count the pool's n-grams (with skips) in each row of ``[C]`` or ``[B, C]``
    and weight the counts (TF, IDF or TFIDF)."""
    a = info.attrs
    mode = a.get("mode", "TF")
    min_n, max_n = int(a["min_gram_length"]), int(a["max_gram_length"])
    max_skip = int(a["max_skip_count"])
    indexes = [int(i) for i in a["ngram_indexes"]]
    pool_ints = a.get("pool_int64s")
    pool: list[Any] = (
        [int(v) for v in pool_ints]
        if pool_ints is not None and len(pool_ints)
        else [str(s) for s in (a.get("pool_strings") or [])]
    )
    trie = _NgramTrie(pool, [int(c) for c in a["ngram_counts"]], indexes, min_n, max_n)
    width = max(indexes) + 1 if indexes else 0
    weights = np.asarray(a.get("weights") if a.get("weights") is not None else [], np.float32)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim > 2:
            raise ValueError(f"{info.describe()}: input must be [C] or [B, C], got {x.shape}")
        rows = x.reshape(1 if x.ndim < 2 else x.shape[0], -1)
        ids = trie.token_ids(rows)
        n_rows, length = ids.shape
        freq = np.zeros((n_rows, width), np.int64)
        row_of = np.broadcast_to(np.arange(n_rows)[:, None], ids.shape)
        for skip in range(max_skip + 1 if length and trie.keys.size else 0):
            check_terminate()
            step = skip + 1
            node = np.zeros(ids.shape, np.int64)
            for depth in range(max_n):
                pos = np.arange(length) + depth * step
                inside = pos < length
                tok = np.where(inside, ids[:, np.minimum(pos, length - 1)], -1)
                node = trie.child(node, tok)
                size = depth + 1
                if size >= min_n and (size > 1 or skip == 0):
                    col = np.where(node >= 0, trie.column[np.maximum(node, 0)], -1)
                    hit = col >= 0
                    np.add.at(freq, (row_of[hit], col[hit]), 1)
                if not (node >= 0).any():
                    break
        out = freq.astype(np.float32)
        if mode == "IDF":
            out = np.where(freq > 0, weights if weights.size else np.float32(1), 0)
        elif mode == "TFIDF" and weights.size:
            out = out * weights
        elif mode not in ("TF", "IDF", "TFIDF"):
            raise ValueError(f"{info.describe()}: unknown mode {mode!r}")
        out = out.astype(np.float32)
        return (out.reshape(width) if x.ndim < 2 else out,)

    return compute
