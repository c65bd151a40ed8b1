"""A tutorial execution provider: Relu, Add and Mul on the host with numpy.

In a package made by ``ortcore ep new tutorial`` this is
``ortcore_tutorial/provider.py`` (the class and kernels) plus
``ortcore_tutorial/plugin.py`` (the hook); here both live in one module, so
that ``ortcore.register_plugin(module)`` and ``--plugin tutorial_provider``
work without installing anything.
"""

from __future__ import annotations

import numpy as np

import ep_sdk

# --8<-- [start:kernels]
registry = ep_sdk.KernelRegistry()


@registry.kernel("Relu", since=6, types={"T": ep_sdk.FLOAT_TYPES})
def relu(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        return (np.maximum(x, 0).astype(x.dtype, copy=False),)

    return compute


@registry.kernel("Add", since=7, types={"T": ep_sdk.FLOAT_TYPES})
@registry.kernel("Mul", since=7, types={"T": ep_sdk.FLOAT_TYPES})
def binary(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
    ufunc = np.add if info.op_type == "Add" else np.multiply

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        return (ufunc(a, b).astype(a.dtype, copy=False),)

    return compute


# --8<-- [end:kernels]
# --8<-- [start:provider]
class TutorialExecutionProvider(ep_sdk.ExecutionProvider):
    """Runs Relu, Add and Mul on float tensors; everything else falls back."""

    name = "TutorialExecutionProvider"
    aliases = ("tutorial",)
    version = "0.1.0"

    def kernel_registry(self) -> ep_sdk.KernelRegistry:
        return registry


# --8<-- [end:provider]
# --8<-- [start:hook]
@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    return [TutorialExecutionProvider]


# --8<-- [end:hook]
