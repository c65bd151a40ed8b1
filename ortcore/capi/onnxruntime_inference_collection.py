"""onnxruntime's Python-layer module ``onnxruntime.capi.onnxruntime_inference_collection``.

The session, binding and value classes under the names onnxruntime's
``onnxruntime_inference_collection`` gives them (ortcore's own classes), and
its helpers ``check_and_normalize_provider_args``, ``get_ort_device_type``
and ``copy_tensors``.
"""

from __future__ import annotations

import collections.abc
import warnings
from collections.abc import Sequence
from typing import Any

from ..devices import OrtDevice, OrtDeviceVendorId, get_ort_device_type
from ..errors import InvalidArgumentRuntimeError
from ..iobinding import IOBinding
from ..lora import AdapterFormat
from ..ortvalue import OrtValue
from ..session import InferenceSession
from ..sparse_tensor import SparseTensor

Session = InferenceSession  # onnxruntime's base class of InferenceSession

__all__ = [
    "AdapterFormat",
    "IOBinding",
    "InferenceSession",
    "OrtDevice",
    "OrtDeviceVendorId",
    "OrtValue",
    "Session",
    "SparseTensor",
    "check_and_normalize_provider_args",
    "copy_tensors",
    "get_ort_device_type",
]


def check_and_normalize_provider_args(
    providers: Sequence[str | tuple[str, dict[Any, Any]]] | None,
    provider_options: Sequence[dict[Any, Any]] | None,
    available_provider_names: Sequence[str],
) -> tuple[list[str], list[dict[str, str]]]:
    """Validate ``providers``/``provider_options`` as onnxruntime does and return
    ``(names, options)``: one string-to-string options dict per name; names
    not in ``available_provider_names`` and duplicates give a warning.

    Raises:
        ValueError: malformed arguments (onnxruntime's messages).
    """
    if providers is None:
        return [], []
    chosen: dict[str, dict[str, str]] = {}

    def add(name: str, options: dict[Any, Any]) -> None:
        if name not in available_provider_names:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(available_provider_names)}'",
                stacklevel=3,
            )
        if name in chosen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=3)
            return
        chosen[name] = {str(k): str(v) for k, v in options.items()}

    if not isinstance(providers, collections.abc.Sequence):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError(
                "'providers' and 'provider_options' should be the same length if both are given."
            )
        if not all(isinstance(p, str) for p in providers):
            raise ValueError(
                "Only string values for 'providers' are supported if 'provider_options' is given."
            )
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        for name, options in zip(providers, provider_options):
            add(str(name), options)
    else:
        for p in providers:
            if isinstance(p, str):
                add(p, {})
            elif (
                isinstance(p, tuple)
                and len(p) == 2
                and isinstance(p[0], str)
                and isinstance(p[1], dict)
            ):
                add(p[0], p[1])
            else:
                raise ValueError(
                    "'providers' values must be either strings or (string, dict) tuples."
                )
    return list(chosen), list(chosen.values())


def copy_tensors(src: Sequence[OrtValue], dst: Sequence[OrtValue], stream: Any = None) -> None:
    """Copy each tensor of ``src`` into the one at the same place in ``dst``.

    Raises:
        InvalidArgumentRuntimeError: the lists differ in length, or a pair in size.
    """
    if len(src) != len(dst):
        raise InvalidArgumentRuntimeError(
            f"copy_tensors: {len(src)} sources but {len(dst)} destinations"
        )
    for s, d in zip(src, dst):
        d.update_inplace(s)
