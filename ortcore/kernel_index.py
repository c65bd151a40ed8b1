"""An op -> module index of the providers' kernels (``ortcore providers --kernels``).

For every kernel a provider registers it gives the op, its domain, the opset
range, the type constraints and the Python function that builds it (its module
and qualified name), so that the code behind an op is one lookup away.
Listing a provider's kernels imports them (``kernel_registry()``): for the CPU
provider, its Cython extensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ep_sdk import KernelDef, KernelRegistry, type_string

from .plugins import ProviderEntry

__all__ = [
    "KernelEntry",
    "ProviderKernels",
    "kernel_entries",
    "markdown_page",
    "only_ops",
    "provider_kernels",
]


@dataclass(frozen=True)
class KernelEntry:
    """One registered kernel, as the index shows it.

    Attributes:
        op_type: operator name.
        domain: operator domain (``ai.onnx`` for onnx's default domain).
        since: first opset version the kernel implements.
        until: last one (``None``: open-ended).
        types: type parameter (or input index) -> accepted element types;
            empty when the kernel takes any type.
        module: the module of the function that builds the kernel.
        function: that function's qualified name.
    """

    op_type: str
    domain: str
    since: int
    until: int | None
    types: Mapping[str, tuple[str, ...]]
    module: str
    function: str

    @property
    def opsets(self) -> str:
        """The opset range as text, e.g. ``7-12`` or ``13+``."""
        return f"{self.since}+" if self.until is None else f"{self.since}-{self.until}"

    @property
    def builder(self) -> str:
        """``module:function``, as entry points name objects."""
        return f"{self.module}:{self.function}"

    def types_text(self) -> str:
        """The type constraints in one line, e.g. ``T: double,float``."""
        if not self.types:
            return "any"
        return "; ".join(f"{k}: {','.join(v)}" for k, v in self.types.items())

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for JSON."""
        return {
            "op_type": self.op_type,
            "domain": self.domain,
            "since": self.since,
            "until": self.until,
            "types": {k: list(v) for k, v in self.types.items()},
            "module": self.module,
            "function": self.function,
        }


@dataclass(frozen=True)
class ProviderKernels:
    """The kernels of one provider, or why none are listed.

    Attributes:
        provider: the provider's name.
        kernels: its kernels, by domain, op and opset.
        note: why ``kernels`` is empty (unavailable, no kernel registry, the
            kernels failed to load); ``""`` otherwise.
    """

    provider: str
    kernels: tuple[KernelEntry, ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for JSON."""
        return {
            "provider": self.provider,
            "note": self.note,
            "kernels": [k.to_dict() for k in self.kernels],
        }


def only_ops(page: ProviderKernels, ops: Iterable[str]) -> ProviderKernels:
    """``page`` with only the kernels of ``ops`` (op names, any case)."""
    wanted = {op.lower() for op in ops}
    kept = tuple(k for k in page.kernels if k.op_type.lower() in wanted)
    return ProviderKernels(page.provider, kept, page.note)


def kernel_entries(registry: KernelRegistry) -> list[KernelEntry]:
    """The index entries of ``registry``, sorted by domain, op and opset."""
    entries = [_entry(k) for k in registry]
    return sorted(entries, key=lambda e: (e.domain, e.op_type, e.since))


def provider_kernels(entry: ProviderEntry) -> ProviderKernels:
    """The kernels of the provider ``entry`` lists, from an instance made with
    its default options; an unavailable provider, a provider without a kernel
    registry (one that compiles the groups it claims), or one whose kernels
    fail to load gets a note instead."""
    if entry.cls is None or not entry.available:
        return ProviderKernels(entry.name, (), f"unavailable: {entry.reason}")
    try:
        registry = entry.cls().registry()
    except Exception as exc:  # a broken provider is reported, never fatal
        return ProviderKernels(entry.name, (), f"its kernels failed to load: {exc!r}")
    if registry is None:
        return ProviderKernels(
            entry.name, (), "no kernel registry: it compiles the node groups it claims"
        )
    return ProviderKernels(entry.name, tuple(kernel_entries(registry)))


def _entry(kernel: KernelDef) -> KernelEntry:
    builder = kernel.builder
    types = {
        str(key): tuple(sorted(type_string(t)[len("tensor(") : -1] for t in allowed))
        for key, allowed in kernel.types.items()
    }
    return KernelEntry(
        op_type=kernel.op_type,
        domain=kernel.domain or "ai.onnx",
        since=kernel.since,
        until=kernel.until,
        types=types,
        module=getattr(builder, "__module__", None) or type(builder).__module__,
        function=getattr(builder, "__qualname__", None) or type(builder).__qualname__,
    )


def markdown_page(kernels: ProviderKernels, *, generator: str) -> str:
    """The op -> module index of one provider as a Markdown page: per domain,
    one row per op with its opset coverage, the opsets at which its
    registrations start, the types of its newest registration and the
    functions that build it (``module:function``, with their opsets when
    several do).

    ``generator`` names the command that wrote the page, for its header.
    """
    by_op: dict[tuple[str, str], list[KernelEntry]] = {}
    for k in kernels.kernels:
        by_op.setdefault((k.domain, k.op_type), []).append(k)
    ops = len(by_op)
    lines = [
        f"# {kernels.provider} kernels",
        "",
        f"<!-- Generated by `{generator}`; do not edit. -->",
        "",
        f"The {len(kernels.kernels)} kernels of {kernels.provider} for {ops} ops, "
        "as `ortcore providers --kernels` lists them (one line per registration "
        "there; one row per op here).",
        "",
        "- **Opsets**: the opsets the op is implemented for.",
        "- **Versions**: where a registration starts (onnx changed the op's schema).",
        "- **Types (newest)**: the type constraints of the newest registration; "
        "*any* when it has none.",
        "- **Built by**: the function that builds the kernel, as `module:function`.",
    ]
    domains = sorted({d for d, _ in by_op}, key=lambda d: (d != "ai.onnx", d))
    for domain in domains:
        lines += [
            "",
            f"## {domain}",
            "",
            "| Op | Opsets | Versions | Types (newest) | Built by |",
            "|---|---|---|---|---|",
        ]
        for (d, op), entries in sorted(by_op.items()):
            if d == domain:
                lines.append(_op_row(op, entries))
    return "\n".join(lines) + "\n"


def _coverage(entries: list[KernelEntry]) -> str:
    """The opsets ``entries`` cover, contiguous ranges merged: ``1+``, ``7-12, 14+``."""
    spans: list[list[int | None]] = []
    for e in sorted(entries, key=lambda e: e.since):
        last = spans[-1] if spans else None
        if last is not None and (last[1] is None or e.since <= last[1] + 1):
            if last[1] is not None:
                last[1] = None if e.until is None else max(last[1], e.until)
            continue
        spans.append([e.since, e.until])
    return ", ".join(f"{a}+" if b is None else (f"{a}" if a == b else f"{a}-{b}") for a, b in spans)


def _op_row(op: str, entries: list[KernelEntry]) -> str:
    starts = sorted({e.since for e in entries})
    newest = [e for e in entries if e.since == starts[-1]]
    types: dict[str, set[str]] = {}
    for e in newest:
        for key, allowed in e.types.items():
            types.setdefault(key, set()).update(allowed)
    types_text = "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in types.items()) or "*any*"
    builders: dict[str, list[KernelEntry]] = {}
    for e in entries:
        builders.setdefault(e.builder, []).append(e)
    if len(builders) == 1:
        built_by = f"`{next(iter(builders))}`"
    else:
        built_by = "<br>".join(
            f"`{b}` ({_coverage(es)})"
            for b, es in sorted(builders.items(), key=lambda item: min(e.since for e in item[1]))
        )
    versions = ", ".join(str(v) for v in starts)
    return f"| {op} | {_coverage(entries)} | {versions} | {types_text} | {built_by} |"
