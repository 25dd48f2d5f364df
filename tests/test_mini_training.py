"""The mini model's trainer (kv/train.py) and its shipped weights: a backward that is the forward's
gradient, a training that is the same bytes every time, and weights whose text reads as words."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from kvweb.cli import main
from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.generate import generate_alone
from kvweb.kv.model import MiniModel, ModelConfig, decode, encode, rotary, rotate, trained_weights
from kvweb.kv.train import TrainConfig, corpus, init_params, loss_and_grads, shipped_weights, train, weights_bytes

SMALL = ModelConfig(max_positions=64)
SHORT = TrainConfig(steps=20, batch=4, context=32, corpus_chars=4000)


def test_the_backward_is_the_gradient_of_the_forward() -> None:
    """Central differences in float64 on a few entries of every parameter."""
    rng = np.random.default_rng(1)
    params = {k: v.astype(np.float64) for k, v in init_params(SMALL, rng).items()}
    ids, targets = rng.integers(0, 95, (2, 2, 9))
    positions = np.arange(9)[None] + np.array([[0], [20]])
    _, grads = loss_and_grads(params, SMALL, ids, targets, positions)
    for name, p in params.items():
        for _ in range(2):
            at = (ids[0, 3], rng.integers(p.shape[1])) if name == "embed" else tuple(rng.integers(s) for s in p.shape)
            old = p[at]
            p[at] = old + 1e-5
            up = loss_and_grads(params, SMALL, ids, targets, positions)[0]
            p[at] = old - 1e-5
            down = loss_and_grads(params, SMALL, ids, targets, positions)[0]
            p[at] = old
            assert grads[name][at] == pytest.approx((up - down) / 2e-5, rel=1e-5, abs=1e-9), name


def test_the_trainer_runs_the_model_the_labs_run() -> None:
    """The trainer's loss on the shipped weights (float64) equals the cross-entropy of MiniModel's
    own logits, token by token through a KV store: both are the same network."""
    model = MiniModel()
    text = encode("The block table maps logical blocks to physical ones.")
    params = {k: v for k, v in trained_weights().items() if k != "shape"}
    loss, _ = loss_and_grads(
        params, model.config, np.asarray([text[:-1]]), np.asarray([text[1:]]), np.arange(len(text) - 1)[None]
    )
    store = ContiguousStore(model.config.layers)
    store.add(0)
    nll = []
    for tok, nxt in zip(text[:-1], text[1:]):
        logits = model.forward_batch(store, [0], [[tok]])[0]
        nll.append(np.log(np.exp(logits - logits.max()).sum()) - (logits[nxt] - logits.max()))
    assert loss == pytest.approx(np.mean(nll), rel=1e-9)
    assert loss < 2.0  # nats per character; uniform over the 95 characters would be 4.55


def test_the_shipped_model_reads_512_characters() -> None:
    """Rotary positions learn only the distances trained: the weights must come from 512-character
    windows (from 128-character ones this loss was 3.2, worse than a unigram count)."""
    params = {k: v for k, v in trained_weights().items() if k != "shape"}
    text = np.asarray([encode(corpus()[:513])])
    assert loss_and_grads(params, ModelConfig(), text[:, :-1], text[:, 1:], np.arange(512)[None])[0] < 1.5


def test_training_is_deterministic_and_learns() -> None:
    params, losses = train(SHORT, SMALL)
    again, _ = train(SHORT, SMALL)
    other, _ = train(TrainConfig(**{**SHORT.__dict__, "seed": 1}), SMALL)
    assert weights_bytes(params, SMALL) == weights_bytes(again, SMALL)
    assert weights_bytes(params, SMALL) != weights_bytes(other, SMALL)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5


def test_the_shipped_weights_are_small_and_float16() -> None:
    assert len(shipped_weights()) <= 200_000
    with np.load(io.BytesIO(shipped_weights())) as npz:
        assert {npz[k].dtype for k in npz.files if k != "shape"} == {np.dtype(np.float16)}


def test_the_trained_model_writes_corpus_words() -> None:
    """Greedy text after a prompt: most of its words are words of the corpus; the random model's are not."""
    vocabulary = set(re.findall(r"[a-z]+", corpus().lower()))
    prompt = encode("The block table of a request ")

    def known_words(model: MiniModel) -> tuple[int, int]:
        words = re.findall(r"[a-z]+", decode(generate_alone(model, prompt, 80, None)).lower())
        return sum(w in vocabulary for w in words), len(words)

    known, total = known_words(MiniModel())
    assert total >= 10 and known >= 0.8 * total
    known, total = known_words(MiniModel(ModelConfig(weights="random")))
    assert known < 0.5 * total


def test_the_model_takes_sequences_up_to_max_positions() -> None:
    """Rotary positions have no table to run out of: a sequence may fill max_positions."""
    model = MiniModel(ModelConfig(max_positions=600))
    store = ContiguousStore(model.config.layers)
    store.add(0)
    logits = model.forward_batch(store, [0], [encode((corpus() * 2)[:600])])
    assert np.isfinite(logits).all()
    with pytest.raises(ValueError, match="600 positions"):
        model.forward_batch(store, [0], [[0]])


def test_rotary_scores_depend_on_the_distance_alone() -> None:
    """q at position p against k at p - 7 scores the same wherever p is (what lets short training
    windows stand for any place in a long sequence)."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 4, 16))
    cos, sin = rotary(4096, 16)

    def score(p: int) -> np.ndarray:
        at = slice(p, p + 1)
        return np.einsum("nhd,nhd->h", rotate(q, cos[at], sin[at]), rotate(k, cos[p - 7 : p - 6], sin[p - 7 : p - 6]))

    assert np.allclose(score(7), score(3000), rtol=1e-9, atol=1e-12)
    assert not np.allclose(score(7), np.einsum("nhd,nhd->h", q, k))


def test_an_unknown_weights_name_is_refused() -> None:
    with pytest.raises(ValueError, match="weights: 'big' is not allowed; allowed: trained, random"):
        MiniModel(ModelConfig(weights="big"))
    with pytest.raises(ValueError, match="trained weights are for layers=2"):
        MiniModel(ModelConfig(layers=3))


def test_train_mini_writes_weights_and_says_if_they_are_the_shipped_ones(tmp_path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["train-mini", "--out", str(tmp_path / "w.npz"), "--steps", "2"], out, err) == 0
    assert out.getvalue() == f"{tmp_path / 'w.npz'}: differs from the shipped kvweb/kv/mini.npz\n"
    assert "step 2/2" in err.getvalue()
    with np.load(tmp_path / "w.npz") as npz:
        assert npz["qkv0"].shape == (64, 192)
