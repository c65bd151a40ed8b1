"""``ortcore ep new NAME``: write a provider package to start from.

The package has a ``pyproject.toml`` with the ``ortcore.providers`` entry
point and one dependency of ortcore's, the provider SDK, with the range of
releases from the installed one to the next major (``ortcore-ep-sdk>=1.1,<2``
for SDK 1.1: :func:`ortcore.sdk_compat.sdk_requirement`); a provider with one
kernel (Relu); tests that check the kernel against onnx's reference evaluator
and run a subset of the conformance suite; and a README. ``pip install`` it
and ``ortcore providers`` lists it.

With ``bridge=True`` (``ortcore ep new NAME --bridge``) the provider is a
compile-path one instead, on ``ep_sdk.BridgeExecutionProvider``: it claims
groups of the ops a stand-in engine runs, builds and runs them, and keeps
built engines in ortcore's compiled-artifact cache; its tests check the
groups against onnx's reference, the declines, a cache hit and a conformance
subset.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path

__all__ = ["new_provider", "provider_names"]

# template file -> path in the package ({package} is replaced)
_FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{package}/__init__.py",
    "plugin.py.tmpl": "{package}/plugin.py",
    "provider.py.tmpl": "{package}/provider.py",
    "test_provider.py.tmpl": "tests/test_provider.py",
}
# what a bridge provider writes instead
_BRIDGE = {
    "provider.py.tmpl": "provider_bridge.py.tmpl",
    "test_provider.py.tmpl": "test_provider_bridge.py.tmpl",
}
# the words that differ between the two kinds
_KIND = {
    False: {
        "dependencies": '"numpy"',
        "next_step": "Add kernels in `{package}/provider.py`.",
        "kind_line": "a kernel-path provider: one kernel per op, run node by node",
    },
    True: {
        "dependencies": '"numpy", "onnx"',
        "next_step": (
            "Replace the stand-in engine in `{package}/provider.py` with yours: "
            "`supports_node`/`query_model`, `build`, `run`, `serialize`/`deserialize`."
        ),
        "kind_line": (
            "a compile-path provider on `ep_sdk.BridgeExecutionProvider`: it builds "
            "fused groups of nodes with an engine and runs them"
        ),
    },
}


def provider_names(name: str) -> dict[str, str]:
    """The names a provider called ``name`` gets.

    ``my-ep`` gives alias ``my-ep``, distribution ``ortcore-my-ep``, package
    ``ortcore_my_ep`` and class ``MyEpExecutionProvider``.

    Raises:
        ValueError: ``name`` is not letters, digits, ``-`` and ``_``
            starting with a letter.
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise ValueError(
            f"provider name {name!r}: use letters, digits, '-' and '_', starting with a letter"
        )
    alias = name.lower()
    words = re.split(r"[-_]+", name)
    stem = "".join(w[:1].upper() + w[1:] for w in words if w)
    if stem.lower().endswith("executionprovider"):
        stem = stem[: -len("executionprovider")] or stem
    package = "ortcore_" + re.sub(r"[-]+", "_", alias)
    if keyword.iskeyword(package):
        raise ValueError(f"provider name {name!r} makes a Python keyword")
    return {
        "name": alias,
        "class": f"{stem}ExecutionProvider",
        "dist": "ortcore-" + alias.replace("_", "-"),
        "package": package,
    }


def new_provider(
    name: str, directory: str | Path | None = None, *, bridge: bool = False
) -> Path:
    """Write a provider package for ``name`` and return its folder.

    Args:
        name: the provider's short name (its alias), e.g. ``myep``.
        directory: where to write it (default ``./ortcore-NAME``); it must
            not exist or be empty.
        bridge: a compile-path provider on ``ep_sdk.BridgeExecutionProvider``
            (default: a kernel-path one).

    Raises:
        ValueError: a bad name.
        FileExistsError: ``directory`` exists and is not empty.
    """
    from ..sdk_compat import sdk_requirement

    names = {**provider_names(name), "sdk_requirement": sdk_requirement()}
    names.update({k: v.format(package=names["package"]) for k, v in _KIND[bridge].items()})
    root = Path(directory) if directory is not None else Path(names["dist"])
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty; choose another --dir")
    template = resources.files(__name__) / "template"
    for source, target in _FILES.items():
        text = (template / (_BRIDGE.get(source, source) if bridge else source)).read_text(
            encoding="utf-8"
        )
        for key, value in names.items():
            text = text.replace("{{" + key + "}}", value)
        path = root / target.format(package=names["package"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
