"""Tree ensembles of ai.onnx.ml: TreeEnsembleRegressor, TreeEnsembleClassifier
(v1 and v3) and TreeEnsemble (v5).

Every variant is converted once, at build time, into one flat node table
(feature, threshold, mode, children, missing-value track) plus a dense
``[nodes, targets]`` table of leaf weights. Traversal moves all samples
through all trees together, one tree level per numpy step; aggregation
loops over trees, vectorised over samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, check_terminate

from . import registry
from ._ml_common import ML, as_2d, class_labels, float_attr, post_transform, transform_name
from ._versions import per_schema_version

# Node modes, numbered as TreeEnsemble v5 numbers them; LEAF marks leaves.
_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3,
          "BRANCH_EQ": 4, "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": -1}  # fmt: skip
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


@dataclass
class Forest:
    """A tree ensemble as flat arrays over all nodes of all trees."""

    feature: np.ndarray  # int64 [nodes]
    threshold: np.ndarray  # float64 [nodes]
    mode: np.ndarray  # int8 [nodes], -1 for leaves
    true_child: np.ndarray  # int64 [nodes]
    false_child: np.ndarray  # int64 [nodes]
    missing_true: np.ndarray  # bool [nodes]
    roots: np.ndarray  # int64 [trees]
    weights: np.ndarray  # float64 [nodes, targets], summed per leaf and target
    has_weight: np.ndarray  # bool [nodes, targets]
    wmin: np.ndarray  # float64 [nodes, targets], +inf where absent
    wmax: np.ndarray  # float64 [nodes, targets], -inf where absent
    members: dict[int, np.ndarray] = field(default_factory=dict)

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """Return the leaf reached by each sample in each tree, ``[N, trees]``."""
        n = x.shape[0]
        idx = np.broadcast_to(self.roots, (n, self.roots.size)).copy()
        rows = np.arange(n)[:, None]
        thresholds = self.threshold.astype(x.dtype if x.dtype == np.float64 else np.float32)
        modes_present = set(np.unique(self.mode).tolist()) - {-1}
        while True:  # one level of every tree per pass: as many passes as the deepest path
            check_terminate()
            active = self.mode[idx] >= 0
            if not active.any():
                return idx
            cur = idx[active]
            v = x[np.broadcast_to(rows, idx.shape)[active], self.feature[cur]]
            th = thresholds[cur]
            mode = self.mode[cur]
            cond = np.zeros(cur.shape, bool)
            with np.errstate(invalid="ignore"):
                for m in modes_present:
                    sel = mode == m
                    cond[sel] = _compare(m, v[sel], th[sel])
            for node, values in self.members.items():
                sel = cur == node
                if sel.any():
                    cond[sel] = np.isin(v[sel], values)
            cond |= self.missing_true[cur] & np.isnan(v)
            idx[active] = np.where(cond, self.true_child[cur], self.false_child[cur])

    def aggregate(self, x: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
        """Combine the leaf weights of all trees per sample and target, ``[N, targets]``;
        also return where any leaf reached had a weight for the target."""
        leaves = self.leaves(x)
        n, k = x.shape[0], self.weights.shape[1]
        seen = np.zeros((n, k), bool)
        for t in range(leaves.shape[1]):
            seen |= self.has_weight[leaves[:, t]]
        if how in ("SUM", "AVERAGE"):
            out = np.zeros((n, k))
            for t in range(leaves.shape[1]):
                out += self.weights[leaves[:, t]]
            return (out / max(self.roots.size, 1) if how == "AVERAGE" else out), seen
        table, pick = (self.wmin, np.minimum) if how == "MIN" else (self.wmax, np.maximum)
        out = np.full((n, k), np.inf if how == "MIN" else -np.inf)
        for t in range(leaves.shape[1]):
            out = pick(out, table[leaves[:, t]])
        return np.where(seen, out, 0.0), seen


def _compare(mode: int, v: np.ndarray, th: np.ndarray) -> np.ndarray:
    if mode == 0:
        return v <= th
    if mode == 1:
        return v < th
    if mode == 2:
        return v >= th
    if mode == 3:
        return v > th
    if mode == 4:
        return v == th
    if mode == 5:
        return v != th
    return np.zeros(v.shape, bool)  # membership is tested separately


def _weight_tables(
    n_nodes: int, n_targets: int, nodes: np.ndarray, targets: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        raise ValueError(f"target/class id out of range [0, {n_targets})")
    total = np.zeros((n_nodes, n_targets))
    np.add.at(total, (nodes, targets), w)
    has = np.zeros((n_nodes, n_targets), bool)
    has[nodes, targets] = True
    lo = np.full((n_nodes, n_targets), np.inf)
    np.minimum.at(lo, (nodes, targets), w)
    hi = np.full((n_nodes, n_targets), -np.inf)
    np.maximum.at(hi, (nodes, targets), w)
    return total, has, lo, hi


def forest_v1(info: NodeInfo, prefix: str, n_targets: int) -> Forest:
    """Build a :class:`Forest` from TreeEnsembleRegressor/Classifier attributes
    (``prefix`` is ``target`` or ``class``)."""
    a = info.attrs
    tree_ids = [int(t) for t in a["nodes_treeids"]]
    node_ids = [int(t) for t in a["nodes_nodeids"]]
    where = {key: i for i, key in enumerate(zip(tree_ids, node_ids, strict=True))}
    if len(where) != len(tree_ids):
        raise ValueError(f"{info.describe()}: duplicate (tree id, node id) pairs")
    n = len(tree_ids)
    modes = np.array([_MODES[str(m)] for m in a["nodes_modes"]], dtype=np.int8)

    def child(ids: Any) -> np.ndarray:
        out = np.zeros(n, np.int64)
        for i, (tree, nid) in enumerate(zip(tree_ids, ids, strict=True)):
            if modes[i] >= 0:
                out[i] = where[(tree, int(nid))]
        return out

    roots: dict[int, int] = {}
    for i, tree in enumerate(tree_ids):
        roots.setdefault(tree, i)
    missing = a.get("nodes_missing_value_tracks_true")
    missing_arr = np.zeros(n, bool) if not missing else np.asarray(missing, bool)
    leaf_nodes = np.array(
        [where[(int(t), int(nid))] for t, nid in zip(a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"], strict=True)],
        dtype=np.int64,
    )  # fmt: skip
    weights = float_attr(info, f"{prefix}_weights")
    tables = _weight_tables(
        n, n_targets, leaf_nodes, np.asarray(a[f"{prefix}_ids"], np.int64),
        weights if weights is not None else np.zeros(0),
    )  # fmt: skip
    values = float_attr(info, "nodes_values")
    return Forest(
        feature=np.asarray(a["nodes_featureids"], np.int64),
        threshold=values if values is not None else np.zeros(n),
        mode=modes,
        true_child=child(a["nodes_truenodeids"]),
        false_child=child(a["nodes_falsenodeids"]),
        missing_true=missing_arr,
        roots=np.array([roots[t] for t in sorted(roots)], dtype=np.int64),
        weights=tables[0], has_weight=tables[1], wmin=tables[2], wmax=tables[3],
    )  # fmt: skip


def _features(x: np.ndarray) -> np.ndarray:
    x2 = as_2d(x)
    return x2 if x2.dtype in (np.float32, np.float64) else x2.astype(np.float32)


def _base(info: NodeInfo) -> np.ndarray | None:
    return float_attr(info, "base_values")


@per_schema_version("TreeEnsembleRegressor", domain=ML, until=4)
def tree_ensemble_regressor(info: NodeInfo) -> Compute:
    """Regression forest: aggregate leaf weights per target, add base values,
    apply the post-transform; output float32 ``[N, n_targets]``."""
    n_targets = int(info.attrs.get("n_targets", 1))
    forest = forest_v1(info, "target", n_targets)
    how = str(info.attrs.get("aggregate_function", "SUM"))
    if how not in _AGGREGATES:
        raise ValueError(f"{info.describe()}: unknown aggregate_function {how!r}")
    base = _base(info)
    transform = transform_name(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        scores, seen = forest.aggregate(_features(x), how)
        if base is not None and base.size:
            # as onnxruntime: a target no leaf reached stays 0, base value or not
            scores = np.where(seen, scores + base, 0.0)
        return (post_transform(scores, transform).astype(np.float32),)

    return compute


@per_schema_version("TreeEnsembleClassifier", domain=ML, until=4)
def tree_ensemble_classifier(info: NodeInfo) -> Compute:
    """Classification forest: per-class sums of leaf weights (+ base values),
    a binary forest's single score expanded to two classes, the post-transform,
    and the arg-max label."""
    labels, _ = class_labels(info, "classlabels_int64s", "classlabels_strings")
    n_classes = len(labels)
    class_ids = np.asarray(info.attrs["class_ids"], np.int64)
    forest = forest_v1(info, "class", max(n_classes, 1))
    base = _base(info)
    transform = transform_name(info)
    binary = len(set(class_ids.tolist())) == 1 and n_classes <= 2

    def compute(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores = forest.aggregate(_features(x), "SUM")[0]
        if base is not None and base.size:
            scores = (
                scores + base.reshape(1, -1) if base.size == scores.shape[1] else scores + base[0]
            )
        if binary:
            score = scores[:, class_ids[0] if class_ids.size else 0]
            if n_classes == 1:
                scores = np.zeros((scores.shape[0], 2))
            scores[:, 1] = score
            scores[:, 0] = 1 - score if transform in ("NONE", "PROBIT") else -score
        scores = post_transform(scores, transform)
        best = np.argmax(scores, axis=1) if scores.shape[0] else np.zeros(0, np.int64)
        if n_classes == 1:
            label = (
                np.where(best == 1, labels[0], 0) if labels.dtype != object else labels[best * 0]
            )
        else:
            label = labels[best]
        return label, scores.astype(np.float32)

    return compute


@registry.kernel("TreeEnsemble", since=5, domain=ML)
def tree_ensemble(info: NodeInfo) -> Compute:
    """TreeEnsemble v5: separate node and leaf tables, set-membership splits;
    the output has the input's float type."""
    a = info.attrs
    n_targets = int(a["n_targets"])
    modes = np.asarray(a["nodes_modes"]).astype(np.int8).reshape(-1)
    n_nodes = modes.size
    true_leaf = np.asarray(a["nodes_trueleafs"], bool)
    false_leaf = np.asarray(a["nodes_falseleafs"], bool)
    true_ids = np.asarray(a["nodes_truenodeids"], np.int64)
    false_ids = np.asarray(a["nodes_falsenodeids"], np.int64)
    leaf_targets = np.asarray(a["leaf_targetids"], np.int64)
    n_leaves = leaf_targets.size
    total = n_nodes + n_leaves
    roots = []
    for r in np.asarray(a["tree_roots"], np.int64).tolist():
        single_leaf = true_leaf[r] and false_leaf[r] and true_ids[r] == false_ids[r]
        roots.append(n_nodes + int(true_ids[r]) if single_leaf else r)
    members: dict[int, np.ndarray] = {}
    member_values = a.get("membership_values")
    if member_values is not None:
        flat = np.asarray(member_values, np.float64).reshape(-1)
        groups = np.split(flat, np.flatnonzero(np.isnan(flat)) + 1)
        member_nodes = np.flatnonzero(modes == 6).tolist()
        for node, group in zip(member_nodes, groups, strict=False):
            members[node] = group[~np.isnan(group)]
    missing = a.get("nodes_missing_value_tracks_true")
    missing_arr = np.zeros(total, bool)
    if missing is not None and len(np.asarray(missing)):
        missing_arr[:n_nodes] = np.asarray(missing, bool).reshape(-1)
    leaf_nodes = n_nodes + np.arange(n_leaves)
    weights = np.asarray(a["leaf_weights"], np.float64).reshape(-1)
    tables = _weight_tables(total, n_targets, leaf_nodes, leaf_targets, weights)
    forest = Forest(
        feature=np.concatenate([np.asarray(a["nodes_featureids"], np.int64), np.zeros(n_leaves, np.int64)]),
        threshold=np.concatenate([np.asarray(a["nodes_splits"], np.float64).reshape(-1), np.zeros(n_leaves)]),
        mode=np.concatenate([modes, np.full(n_leaves, -1, np.int8)]),
        true_child=np.concatenate([np.where(true_leaf, n_nodes + true_ids, true_ids), leaf_nodes]),
        false_child=np.concatenate([np.where(false_leaf, n_nodes + false_ids, false_ids), leaf_nodes]),
        missing_true=missing_arr,
        roots=np.asarray(roots, np.int64),
        weights=tables[0], has_weight=tables[1], wmin=tables[2], wmax=tables[3],
        members=members,
    )  # fmt: skip
    how = _AGGREGATES[int(a.get("aggregate_function", 1))]
    transform = transform_name(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        scores = forest.aggregate(as_2d(x), how)[0]
        return (post_transform(scores, transform).astype(x.dtype),)

    return compute
