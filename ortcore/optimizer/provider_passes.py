"""Each provider's own ``graph_passes()``, run after the core's fusions.

They run after partitioning, so every node carries its
:class:`~ortcore.partition.Assignment` (see
:func:`~ortcore.partition.assignment_of`): a provider's pass should rewrite
only nodes assigned to that provider. A node a pass adds without an
assignment is offered to the providers when the planner partitions the
graph again; the rest keep theirs.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

import onnx_ir as ir

from ep_sdk import ExecutionProvider

from ._pass import OptimizerPass

__all__ = ["ProviderPasses", "run_provider_passes"]


def run_provider_passes(model: ir.Model, providers: Sequence[ExecutionProvider]) -> int:
    """Run each provider's ``graph_passes()`` (onnx-ir passes, or callables
    taking the model) over the whole model, in provider order; return how
    many ran."""
    ran = 0
    for provider in providers:
        for p in provider.graph_passes():
            p(model)
            ran += 1
    return ran


class ProviderPasses(OptimizerPass):
    """Run the providers' own passes (:func:`run_provider_passes`), held to
    the same invariants as the core's.

    Args:
        providers: the session's providers, in priority order.
    """

    rewrites_subgraphs = True

    def __init__(
        self,
        providers: Sequence[ExecutionProvider],
        overridable: Set[ir.Value] = frozenset(),
        *,
        check_invariants: bool | None = None,
    ) -> None:
        super().__init__(overridable, check_invariants=check_invariants)
        self.providers = list(providers)

    def apply(self, model: ir.Model) -> int:
        """Run the passes; the count is the number of passes run."""
        return run_provider_passes(model, self.providers)
