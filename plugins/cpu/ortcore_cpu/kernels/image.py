"""ImageDecoder: decode an encoded image (JPEG, PNG, BMP, TIFF, WebP, ...)
into a ``[H, W, C]`` uint8 tensor.

Decoding uses Pillow, imported when a node is built; without it, building
fails with a message naming the package. Pillow is not a dependency.
"""

from __future__ import annotations

import io

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from . import registry

_MODES = {"RGB": "RGB", "BGR": "RGB", "Grayscale": "L"}


@registry.kernel("ImageDecoder", since=20)
def image_decoder(info: NodeInfo) -> Compute:
    """Decode to RGB, BGR (``[H, W, 3]``) or Grayscale (``[H, W, 1]``)."""
    pixel_format = str(info.attrs.get("pixel_format", "RGB"))
    if pixel_format not in _MODES:
        raise ValueError(f"{info.describe()}: unknown pixel_format {pixel_format!r}")
    try:
        from PIL import Image
    except ImportError as exc:
        raise NotImplementedError(
            f"{info.describe()}: ImageDecoder needs the 'Pillow' package; "
            "install it with 'pip install Pillow'"
        ) from exc

    def compute(encoded: np.ndarray) -> tuple[np.ndarray]:
        with Image.open(io.BytesIO(np.ascontiguousarray(encoded, np.uint8).tobytes())) as img:
            # The header gives the size: a small file may declare a huge image.
            width, height = img.size
            channels = 1 if pixel_format == "Grayscale" else 3
            check_tensor_size((height, width, channels), np.uint8, info.describe())
            pixels = np.asarray(img.convert(_MODES[pixel_format]), dtype=np.uint8)
        if pixel_format == "Grayscale":
            return (np.ascontiguousarray(pixels[..., None]),)
        if pixel_format == "BGR":
            pixels = pixels[..., ::-1]
        return (np.ascontiguousarray(pixels),)

    return compute
