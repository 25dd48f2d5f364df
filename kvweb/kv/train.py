"""Training the mini model: numpy forward and hand-written backward for exactly its architecture.

The shipped weights (`kvweb/kv/mini.npz`) come from `train()` on `corpus.txt`, a frozen copy of
the project's own docs, so the model's text reads like "the block table of the request" and the
run is reproducible from the package alone (`kvweb train-mini`). Training is float32 (the
inference stays float64) on windows at positions 0..context-1: with rotary positions a score
depends only on distances, so the windows stand for any place in a longer sequence (distances
up to the context: past it the loss climbs, so the context is long).
"""

from __future__ import annotations

import io
import math
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from kvweb.kv.model import VOCAB, ModelConfig, encode, param_shapes, rotary, rotate

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 3000
    batch: int = 4
    context: int = 512  # characters per window: rotary positions do not reach past the distances trained
    lr: float = 1e-2  # Adam's step, decayed linearly to a tenth over the run
    seed: int = 0
    corpus_chars: int = 0  # train on the corpus's first N characters only (0: all of it)


def corpus() -> str:
    """The training text shipped in the package."""
    return resources.files("kvweb.kv").joinpath("corpus.txt").read_text(encoding="ascii")


def init_params(model: ModelConfig, rng: np.random.Generator) -> Params:
    """Fan-in scaled normal weights; the residual outputs start small, so the blocks start near identity."""
    params = {}
    for name, shape in param_shapes(model).items():
        scale = 1.0 if name == "embed" else 1 / math.sqrt(shape[0])
        if name.startswith(("out", "down")):
            scale /= math.sqrt(2 * model.layers)
        params[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return params


def _norm(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rms = np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))
    return x / rms, rms


def _norm_back(dy: np.ndarray, y: np.ndarray, rms: np.ndarray) -> np.ndarray:
    return (dy - y * (dy * y).mean(axis=-1, keepdims=True)) / rms


def loss_and_grads(
    params: Params, model: ModelConfig, ids: np.ndarray, targets: np.ndarray, positions: np.ndarray
) -> tuple[float, Params]:
    """Mean cross-entropy (nats per character) of predicting `targets` [B, T] from `ids` [B, T]
    at absolute `positions` [B, T], and its gradient for every parameter."""
    B, T = ids.shape
    H, Dh, d = model.heads, model.head_dim, model.d_model
    cos, sin = (t[positions.reshape(-1)].astype(params["embed"].dtype) for t in rotary(model.max_positions, Dh))

    def turn(a: np.ndarray, sign: int) -> np.ndarray:  # [B, T, H, Dh] by the positions' angles, or back
        return rotate(a.reshape(B * T, H, Dh), cos, sign * sin).reshape(B, T, H, Dh).transpose(0, 2, 1, 3)

    x = params["embed"][ids]
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    saved = []
    for layer in range(model.layers):
        n1, r1 = _norm(x)
        qkv = n1 @ params[f"qkv{layer}"]
        q, k = (turn(qkv[..., i * d : (i + 1) * d], 1) for i in range(2))
        v = qkv[..., 2 * d :].reshape(B, T, H, Dh).transpose(0, 2, 1, 3)
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(Dh))
        scores[..., future] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        att = np.exp(scores)
        att /= att.sum(axis=-1, keepdims=True)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
        x = x + o @ params[f"out{layer}"]
        n2, r2 = _norm(x)
        h = n2 @ params[f"up{layer}"]
        relu = np.maximum(h, 0)
        x = x + relu @ params[f"down{layer}"]
        saved.append((n1, r1, q, k, v, att, o, n2, r2, h, relu))
    nf, rf = _norm(x)
    logits = nf @ params["head"]
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    picked = np.take_along_axis(p, targets[..., None], axis=-1)[..., 0]
    loss = float(-np.log(picked.astype(np.float64)).mean())

    grads: Params = {}
    dlogits = p
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(p, targets[..., None], -1) - 1, -1)
    dlogits /= np.float32(B * T)
    grads["head"] = nf.reshape(-1, d).T @ dlogits.reshape(-1, len(VOCAB))
    dx = _norm_back(dlogits @ params["head"].T, nf, rf)
    for layer in reversed(range(model.layers)):
        n1, r1, q, k, v, att, o, n2, r2, h, relu = saved[layer]
        grads[f"down{layer}"] = relu.reshape(-1, model.d_ff).T @ dx.reshape(-1, d)
        dh = (dx @ params[f"down{layer}"].T) * (h > 0)
        grads[f"up{layer}"] = n2.reshape(-1, d).T @ dh.reshape(-1, model.d_ff)
        dx = dx + _norm_back(dh @ params[f"up{layer}"].T, n2, r2)
        grads[f"out{layer}"] = o.reshape(-1, d).T @ dx.reshape(-1, d)
        do = (dx @ params[f"out{layer}"].T).reshape(B, T, H, Dh).transpose(0, 2, 1, 3)
        datt = do @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ do
        dscores = att * (datt - (datt * att).sum(axis=-1, keepdims=True)) / np.float32(math.sqrt(Dh))
        dq = turn((dscores @ k).transpose(0, 2, 1, 3), -1)
        dk = turn((dscores.transpose(0, 1, 3, 2) @ q).transpose(0, 2, 1, 3), -1)
        dqkv = np.concatenate([g.transpose(0, 2, 1, 3).reshape(B, T, d) for g in (dq, dk, dv)], axis=-1)
        grads[f"qkv{layer}"] = n1.reshape(-1, d).T @ dqkv.reshape(-1, 3 * d)
        dx = dx + _norm_back(dqkv @ params[f"qkv{layer}"].T, n1, r1)
    grads["embed"] = np.zeros_like(params["embed"])
    np.add.at(grads["embed"], ids.reshape(-1), dx.reshape(-1, d))
    return loss, grads


def train(
    cfg: TrainConfig = TrainConfig(),
    model: ModelConfig = ModelConfig(),
    text: str | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Params, list[float]]:
    """Adam on random windows of the corpus; the parameters (float32) and the loss of every step.

    Everything random comes from one generator seeded with `cfg.seed`: the same seed and text give
    the same weights, bit for bit.
    """
    data = np.asarray(encode(text if text is not None else corpus()), dtype=np.int64)
    if cfg.corpus_chars:
        data = data[: cfg.corpus_chars]
    if len(data) <= cfg.context + 1:
        raise ValueError(f"the text has {len(data)} characters; training needs more than context+1 = {cfg.context + 1}")
    if cfg.context > model.max_positions:
        raise ValueError(f"context {cfg.context} is longer than the model's {model.max_positions} positions")
    rng = np.random.default_rng(cfg.seed)
    params = init_params(model, rng)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    s = {k: np.zeros_like(v) for k, v in params.items()}
    b1, b2, eps = 0.9, 0.99, 1e-8
    losses = []
    window = np.arange(cfg.context + 1)
    positions = np.broadcast_to(window[:-1], (cfg.batch, cfg.context))
    for step in range(1, cfg.steps + 1):
        starts = rng.integers(0, len(data) - cfg.context - 1, cfg.batch)
        chunk = data[starts[:, None] + window]
        loss, grads = loss_and_grads(params, model, chunk[:, :-1], chunk[:, 1:], positions)
        losses.append(loss)
        lr = cfg.lr * (1 - 0.9 * (step - 1) / max(cfg.steps - 1, 1))
        for k, g in grads.items():
            m[k] = b1 * m[k] + (1 - b1) * g
            s[k] = b2 * s[k] + (1 - b2) * g * g
            update = (m[k] / (1 - b1**step)) / (np.sqrt(s[k] / (1 - b2**step)) + eps)
            params[k] = (params[k] - lr * update).astype(np.float32)
        if progress is not None:
            progress(step, loss)
    return params, losses


def weights_bytes(params: Params, model: ModelConfig) -> bytes:
    """The weights as an .npz of float16 (half the download of float32 for the static site; the
    loss moves by under 0.001 nats/char), byte for byte the same for the same weights (fixed zip
    timestamps)."""
    arrays = {
        **{k: v.astype(np.float16) for k, v in params.items()},
        "shape": np.asarray([model.layers, model.d_model, model.heads, model.d_ff]),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(arrays):
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, npy.getvalue())
    return buf.getvalue()


def shipped_weights() -> bytes:
    """The bytes of the weights file in the package."""
    return resources.files("kvweb.kv").joinpath("mini.npz").read_bytes()


def train_mini(out: Path, cfg: TrainConfig = TrainConfig(), log: Callable[[str], None] = print) -> list[float]:
    """`kvweb train-mini`: train on the shipped corpus and write the weights to `out`."""
    model = ModelConfig()
    began = time.perf_counter()

    def report(step: int, loss: float) -> None:
        if step % 100 == 0 or step == cfg.steps:
            log(f"step {step}/{cfg.steps}  loss {loss:.3f} nats/char  {time.perf_counter() - began:.0f} s")

    params, losses = train(cfg, model, progress=report)
    out.write_bytes(weights_bytes(params, model))
    log(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return losses
