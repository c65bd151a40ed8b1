"""Small randomly initialized torch networks, exported to ONNX, against onnxruntime.

Each model is a miniature of a real architecture family (BERT, GPT-2, ViT,
MobileNetV3), written here in plain torch so no model hub is needed. Every
model is exported twice: with the ``torch.export``-based exporter
(``dynamo=True``, which needs onnxscript) and with the legacy TorchScript
exporter (``dynamo=False``). Skipped where torch or onnxscript is missing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 50, 32, 4, 2, 12, 2


# -- building blocks ---------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention written out (as BERT and GPT-2 do)."""

    def __init__(self, hidden: int, heads: int, *, sdpa: bool) -> None:
        super().__init__()
        self.heads, self.head_dim, self.sdpa = heads, hidden // heads, sdpa
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: Any, bias: Any) -> Any:
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:  # fused attention, as transformers uses by default
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
            ctx = scores.softmax(dim=-1) @ v
        return self.out(ctx.transpose(1, 2).reshape(b, s, h))


class Block(nn.Module):
    """A transformer layer; post-norm (BERT) or pre-norm causal (GPT-2)."""

    def __init__(self, hidden: int, heads: int, *, pre_norm: bool, gelu: str) -> None:
        super().__init__()
        self.attn = SelfAttention(hidden, heads, sdpa=pre_norm)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.pre_norm, self.gelu = pre_norm, gelu

    def mlp(self, x: Any) -> Any:
        return self.fc2(F.gelu(self.fc1(x), approximate=self.gelu))

    def forward(self, x: Any, bias: Any) -> Any:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), bias)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, bias))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    """BERT-style encoder: three embeddings, padding mask, post-norm layers, pooler."""

    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(64, HIDDEN)
        self.typ = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(
            Block(HIDDEN, HEADS, pre_norm=False, gelu="none") for _ in range(LAYERS)
        )
        self.pool = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos) + self.typ(token_type_ids))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class Gpt2(nn.Module):
    """GPT-2-style decoder: causal SDPA, pre-norm, tanh GELU, tied LM head."""

    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(64, HIDDEN)
        self.layers = nn.ModuleList(
            Block(HIDDEN, HEADS, pre_norm=True, gelu="tanh") for _ in range(LAYERS)
        )
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids: Any) -> Any:
        s = input_ids.shape[1]
        x = self.tok(input_ids) + self.pos(torch.arange(s).unsqueeze(0))
        for layer in self.layers:
            x = layer(x, None)
        return self.ln_f(x) @ self.tok.weight.t()


class Vit(nn.Module):
    """ViT-style classifier: conv patch embedding, class token, torch's encoder layers."""

    def __init__(self, patch: int = 8) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, HIDDEN, patch, stride=patch)
        n = (32 // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, HIDDEN) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, HIDDEN) * 0.02)
        layer = nn.TransformerEncoderLayer(
            HIDDEN, HEADS, 2 * HIDDEN, dropout=0.0, activation="gelu",
            batch_first=True, norm_first=True,
        )  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.ln, self.head = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 10)

    def forward(self, pixels: Any) -> Any:
        x = self.patch(pixels).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.ln(self.encoder(x))
        return self.head(x[:, 0])


class SqueezeExcite(nn.Module):
    """MobileNetV3's squeeze-and-excitation gate."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(ch, ch // 4, 1), nn.Conv2d(ch // 4, ch, 1)

    def forward(self, x: Any) -> Any:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> Any:
    """Conv (no bias) followed by BatchNorm, as mobile CNNs stack them."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)
    )


class InvertedResidual(nn.Module):
    """Expand 1x1, depthwise 3x3, optional SE, project 1x1, residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, act: Any, se: bool) -> None:
        super().__init__()
        mid = cin * 4
        self.body = nn.Sequential(
            conv_bn(cin, mid, 1), act(),
            conv_bn(mid, mid, 3, stride, groups=mid), act(),
            SqueezeExcite(mid) if se else nn.Identity(),
            conv_bn(mid, cout, 1),
        )  # fmt: skip
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Any) -> Any:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    """MobileNetV3-style CNN: HardSwish stem, ReLU6/HardSwish blocks, SE, pooled head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, nn.ReLU6, se=False),
            InvertedResidual(16, 24, 2, nn.ReLU6, se=True),
            InvertedResidual(24, 24, 1, nn.Hardswish, se=True),
        )
        self.head = nn.Sequential(
            nn.Conv2d(24, 64, 1), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(64, 10),
        )  # fmt: skip

    def forward(self, x: Any) -> Any:
        return self.head(self.blocks(self.stem(x)))


# -- cases -------------------------------------------------------------------


def _randomize(model: Any) -> Any:
    """Give norm layers non-trivial parameters and statistics; switch to eval mode."""
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
            m.weight.data = 1 + 0.2 * torch.randn(m.weight.shape, generator=gen)
            m.bias.data = 0.2 * torch.randn(m.bias.shape, generator=gen)
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean = 0.2 * torch.randn(m.num_features, generator=gen)
            m.running_var = 0.5 + torch.rand(m.num_features, generator=gen)
    return model.eval()


def _bert(batch: int, seq: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[1, seq - 4 :] = 0  # the second sentence is padded
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _gpt2(batch: int, seq: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(3)
    return {"input_ids": torch.randint(0, VOCAB, (batch, seq), generator=gen)}


def _image(batch: int, seq: int) -> dict[str, Any]:
    del seq
    gen = torch.Generator().manual_seed(4)
    return {"pixels": torch.randn(batch, 3, 32, 32, generator=gen)}


Case = tuple[Callable[[], Any], Callable[[int, int], dict[str, Any]], dict[int, str]]

# name: (model, inputs(batch, seq), the dynamic axes of every input)
MODELS: dict[str, Case] = {
    "bert": (Bert, _bert, {0: "batch", 1: "seq"}),
    "gpt2": (Gpt2, _gpt2, {0: "batch", 1: "seq"}),
    "vit": (Vit, _image, {0: "batch"}),
    "mobilenet": (MobileNet, _image, {0: "batch"}),
}

# exporter variant: (dynamo?, dynamic shapes?, opset; None for the exporter's default)
VARIANTS: dict[str, tuple[bool, bool, int | None]] = {
    "dynamo": (True, False, None),
    "dynamo-dynamic": (True, True, None),
    "dynamo-opset23": (True, False, 23),
    "legacy-dynamic": (False, True, 17),
}


def _export(
    model: Any, inputs: dict[str, Any], variant: str, axes: dict[int, str], path: Path
) -> bytes:
    """Export ``model`` to ``path`` as ``variant`` says; return the bytes."""
    dynamo, dynamic, opset = VARIANTS[variant]
    args, names = tuple(inputs.values()), list(inputs)
    kwargs: dict[str, Any] = {"input_names": names}
    if dynamo:
        pytest.importorskip("onnxscript")
        if dynamic:
            dims = {a: torch.export.Dim.DYNAMIC for a in axes}
            kwargs["dynamic_shapes"] = tuple(dims for _ in names)
        kwargs.update(dynamo=True, external_data=False, opset_version=opset)
    else:
        if dynamic:
            kwargs["dynamic_axes"] = {n: axes for n in names}
        kwargs.update(dynamo=False, opset_version=opset)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # The fused fast path of nn.TransformerEncoderLayer has no ONNX export.
        fastpath = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            torch.onnx.export(model, args, str(path), **kwargs)
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)
    return path.read_bytes()


# Opset 23 changes only the attention models' graphs (SDPA becomes Attention).
CASES = [
    (name, variant)
    for name in MODELS
    for variant in VARIANTS
    if variant != "dynamo-opset23" or name in ("gpt2", "vit")
]


@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_torch_model(name: str, variant: str, tmp_path: Path, assert_matches_ort: Any) -> None:
    make_model, make_inputs, axes = MODELS[name]
    torch.manual_seed(0)
    model = _randomize(make_model())
    model_bytes = _export(model, make_inputs(BATCH, SEQ), variant, axes, tmp_path / "m.onnx")
    # A dynamic model runs at other sizes than the ones it was traced with.
    inputs = make_inputs(BATCH + 1, SEQ - 3) if VARIANTS[variant][1] else make_inputs(BATCH, SEQ)
    feeds = {k: v.numpy() for k, v in inputs.items()}
    assert_matches_ort(model_bytes, feeds)
    # The exported graph itself is right: onnxruntime matches eager torch.
    import onnxruntime

    with torch.no_grad():
        eager = model(*inputs.values())
    eager = eager if isinstance(eager, tuple) else (eager,)
    sess = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    for got, want in zip(sess.run(None, feeds), eager, strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-3, atol=1e-4)
