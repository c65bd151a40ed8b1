"""BERT- and GPT-2-shaped models exported by torch.onnx, as TensorRT sees them.

Small widths (hidden 64, 4 heads, 2 layers) with the structure of the real
ones: token and position embeddings (Gather on int64 ids), scaled dot-product
attention written out as transformers' models write it (an additive padding
mask for BERT, a causal mask for GPT-2), LayerNorm, GELU (erf for BERT, tanh
for GPT-2). Each is partitioned by TensorRT's parser, built into a real
engine, found in the cache the second time, and run through the stand-in
runtime against the CPU provider. Skipped without torch (the ``tensorrt``
tox environment installs it).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import ortcore
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # torch.onnx's exporter

HIDDEN, HEADS, LAYERS, VOCAB, MAX_POS = 64, 4, 2, 100, 64


class _Attention(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, HIDDEN)
        self.causal = causal

    def forward(self, x: Any, mask: Any) -> Any:
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(HIDDEN, dim=-1)

        def heads(t: Any) -> Any:
            return t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS)
        if self.causal:
            keep = torch.tril(torch.ones(s, s, dtype=torch.bool, device=x.device))
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        scores = scores + mask
        ctx = torch.softmax(scores, dim=-1) @ v
        return self.out(ctx.transpose(1, 2).reshape(b, s, HIDDEN))


class _Block(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn = _Attention(causal)
        self.ln1 = torch.nn.LayerNorm(HIDDEN)
        self.ln2 = torch.nn.LayerNorm(HIDDEN)
        gelu = torch.nn.GELU(approximate="tanh" if causal else "none")
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(HIDDEN, 4 * HIDDEN), gelu, torch.nn.Linear(4 * HIDDEN, HIDDEN)
        )
        self.pre_norm = causal  # GPT-2: pre-LN; BERT: post-LN

    def forward(self, x: Any, mask: Any) -> Any:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), mask)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.ff(x))


class TinyTransformer(torch.nn.Module):  # type: ignore[misc]
    """BERT-shaped (``causal=False``) or GPT-2-shaped (``causal=True``)."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.positions = torch.nn.Embedding(MAX_POS, HIDDEN)
        self.blocks = torch.nn.ModuleList(_Block(causal) for _ in range(LAYERS))
        self.ln = torch.nn.LayerNorm(HIDDEN)

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.tokens(input_ids) + self.positions(pos)
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for block in self.blocks:
            x = block(x, mask)
        return self.ln(x)


def export(causal: bool) -> bytes:
    """The model exported by ``torch.onnx.export`` (batch and sequence dynamic)."""
    torch.manual_seed(0)
    model = TinyTransformer(causal).eval()
    ids = torch.randint(0, VOCAB, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=MAX_POS)
    shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    program = torch.onnx.export(
        model, (ids, mask), dynamo=True, dynamic_shapes=shapes, verbose=False
    )
    buffer = io.BytesIO()
    program.save(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def exported(request: pytest.FixtureRequest) -> tuple[str, bytes]:
    return request.param, export(causal=request.param == "gpt2")


def _feeds(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    mask = np.ones((batch, seq), np.int64)
    mask[0, seq // 2 :] = 0  # padding in the first row
    return {"input_ids": rng.integers(0, VOCAB, (batch, seq)), "attention_mask": mask}


def test_tensorrt_takes_the_exported_model(exported: tuple[str, bytes], manager: Any) -> None:
    from ortcore.inspection import inspect_partition

    name, model = exported
    found = inspect_partition(model, providers=["tensorrt", "cpu"], plugin_manager=manager)
    nodes = found.partition.nodes
    on_cpu = [
        (r.op_type, r.declined.get("TensorrtExecutionProvider"))
        for r in nodes
        if r.provider == "CPUExecutionProvider"
    ]
    assert not on_cpu, f"{name}: TensorRT declined {on_cpu}"
    assert len({r.group for r in nodes}) == 1


def test_engine_built_once_cached_and_run(
    exported: tuple[str, bytes], fake: Any, runnable: Any, tmp_path: Path
) -> None:
    """A real engine is built for a batch/sequence profile; the second session
    loads it; the stand-in runtime runs the plan's model (the same group) so
    that binding int64 ids and masks, and the outputs, are checked."""
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    _, model = exported
    profile = {
        "trt_profile_min_shapes": "input_ids:1x1,attention_mask:1x1",
        "trt_profile_opt_shapes": "input_ids:2x16,attention_mask:2x16",
        "trt_profile_max_shapes": "input_ids:8x64,attention_mask:8x64",
    }
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(tmp_path))
    real_build = fake.built  # the fake plan builder records profiles
    sess = ortcore.InferenceSession(
        model, so, providers=[("tensorrt", profile), "cpu"], plugin_manager=runnable
    )
    assert len(real_build) == 1
    cpu = ortcore.InferenceSession(model, providers=["cpu"])
    for batch, seq in ((2, 16), (1, 5), (8, 64)):
        feeds = _feeds(batch, seq)
        (got,) = sess.run(None, feeds)
        np.testing.assert_allclose(got, cpu.run(None, feeds)[0], rtol=1e-4, atol=1e-4)
    again = ortcore.InferenceSession(
        model, so, providers=[("tensorrt", profile), "cpu"], plugin_manager=runnable
    )
    assert len(real_build) == 1 and again._providers[0].builds == 0
    assert P is type(again._providers[0])


def test_real_builder_builds_the_exported_model(
    exported: tuple[str, bytes], runnable: Any, tmp_path: Path
) -> None:
    """TensorRT itself builds a serialized engine of the whole exported model."""
    _, model = exported
    profile = {
        "trt_profile_min_shapes": "input_ids:1x1,attention_mask:1x1",
        "trt_profile_opt_shapes": "input_ids:2x16,attention_mask:2x16",
        "trt_profile_max_shapes": "input_ids:8x64,attention_mask:8x64",
    }
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(tmp_path))
    sess = ortcore.InferenceSession(
        model, so, providers=[("tensorrt", profile), "cpu"], plugin_manager=runnable
    )
    assert sess._providers[0].builds == 1
    entries = ortcore.cache.CompiledCache(tmp_path).scan().entries
    assert len(entries) == 1 and entries[0]["size"] > 10_000
    assert "input_ids:1x1/2x16/8x64" in entries[0]["profile"]
