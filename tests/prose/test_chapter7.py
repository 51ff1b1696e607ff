"""Chapter 7: the orderings the chapter states, seed by seed, from the saved results."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc
from posenc.book import results
from posenc.book import realtext as rt

RESULTS = "realtext.json"  # shipped with posenc.book
L = 64
LENS = (L, 2 * L, 4 * L, 8 * L)


@pytest.fixture(scope="module")
def saved():
    return results.read_results(RESULTS)


def _seeds(saved):
    return saved["protocol"]["seeds"]


def _v(saved, scheme, n, mode, seed, extension=None, finetune_len=None):
    (bpc,) = [
        r["bpc"]
        for r in saved["rows"]
        if (r["scheme"], r["eval_len"], r["mode"], r["seed"], r.get("extension")) == (scheme, n, mode, seed, extension)
        and (extension is None or r.get("finetune_len") == finetune_len)
        and r.get("bpc") is not None
    ]
    return bpc


def _curve(saved, scheme, seed):
    (run,) = [r for r in saved["runs"] if r["scheme"] == scheme and r["seed"] == seed]
    return np.array(run["loss_by_position"]["bpc"]), run["loss_by_position"]["bin"]


def test_results_are_complete_and_in_the_issue_format(saved):
    corpus = rt.load_corpus()
    assert saved["corpus"]["sha256"] == rt.CORPUS_SHA256 == corpus.sha256
    assert saved["corpus"]["characters"] == len(corpus.text) and saved["corpus"]["name"] == "tinyshakespeare"
    assert saved["protocol"]["config"]["train_len"] == L and saved["protocol"]["eval_lens"] == list(LENS)
    assert len(_seeds(saved)) >= 3
    main = [r for r in saved["rows"] if "extension" not in r]
    keys = {(r["scheme"], r["seed"], r["eval_len"], r["mode"]) for r in main}
    assert len(keys) == len(main) == len(rt.TEXT_SCHEMES) * len(_seeds(saved)) * len(LENS) * 2
    for r in main:
        assert set(r) >= {"scheme", "seed", "train_len", "eval_len", "mode", "bpc"}
        assert r["train_len"] == L and r["mode"] in rt.EVAL_MODES
        if r["scheme"] == "learned" and r["eval_len"] > L:
            assert r["bpc"] is None and "max_len" in r["error"]
        else:
            assert 1.0 < r["bpc"] < 8.0
    ext = [r for r in saved["rows"] if "extension" in r]
    zero = {(r["extension"], r["seed"], r["eval_len"], r["mode"]) for r in ext if r["finetune_len"] is None}
    tuned = {(r["extension"], r["seed"], r["eval_len"], r["mode"]) for r in ext if r["finetune_len"] == 4 * L}
    assert len(zero) == 4 * len(_seeds(saved)) * 3 * 2 and len(tuned) == 4 * len(_seeds(saved)) * 2 * 2
    assert saved["core_hours"] <= 2.0


def test_t5_and_rope_are_best_and_nope_worst_at_the_training_length(saved):
    for seed in _seeds(saved):
        for mode in rt.EVAL_MODES:
            v = {s: _v(saved, s, L, mode, seed) for s in rt.TEXT_SCHEMES}
            others = [v[s] for s in rt.TEXT_SCHEMES if s not in ("t5", "rope")]
            assert max(v["t5"], v["rope"]) < min(others) - 0.05, (seed, mode, v)
            assert v["none"] > max(v[s] for s in rt.TEXT_SCHEMES if s != "none") + 0.1, (seed, mode, v)


def test_sinusoidal_rope_and_t5_break_at_twice_the_training_length(saved):
    for seed in _seeds(saved):
        for s, jump in (("sinusoidal", 1.5), ("rope", 1.0), ("t5", 0.3)):
            assert _v(saved, s, 2 * L, "sliding", seed) > _v(saved, s, L, "sliding", seed) + jump, (s, seed)
        # misconceptions page: close to a bit per character lost at 2L under non-overlapping evaluation
        gap = _v(saved, "sinusoidal", 2 * L, "nonoverlapping", seed) - _v(saved, "sinusoidal", L, "nonoverlapping", seed)
        assert 0.75 < gap < 1.25, (seed, gap)
        # T5's bias extrapolates better than RoPE and sinusoidal at 2L and 4L (Press et al.'s order)
        for n in (2 * L, 4 * L):
            t5 = _v(saved, "t5", n, "sliding", seed)
            assert t5 < min(_v(saved, s, n, "sliding", seed) for s in ("rope", "sinusoidal")) - 0.3, (seed, n)
        # RoPE is the better of the two absolute-failure schemes just past L (non-overlapping)
        assert _v(saved, "rope", 2 * L, "nonoverlapping", seed) < _v(saved, "sinusoidal", 2 * L, "nonoverlapping", seed) - 0.2
        # by 8L sinusoidal is near the character frequencies alone (4.84 bits, checked below), RoPE beyond
        assert _v(saved, "sinusoidal", 8 * L, "sliding", seed) > 4.0
        assert _v(saved, "rope", 8 * L, "sliding", seed) > 4.9


def test_unigram_reference(saved):
    corpus = rt.load_corpus()
    train, test = corpus.split("train"), corpus.split("test")
    import torch

    counts = torch.bincount(train, minlength=corpus.vocab_size) + 1
    logp = torch.log2(counts / counts.sum())
    unigram = -logp[test[1 : saved["protocol"]["eval_chars"] + 1]].mean().item()
    assert 4.8 < unigram < 4.9


def test_alibi_survives_without_using_more_context(saved):
    for seed in _seeds(saved):
        nov = [_v(saved, "alibi", n, "nonoverlapping", seed) for n in LENS]
        sld = [_v(saved, "alibi", n, "sliding", seed) for n in LENS]
        assert nov[-1] < nov[0] - 0.005, (seed, nov)  # the early token curse diluted
        assert abs(sld[-1] - sld[0]) < 0.05, (seed, sld)  # flat: no longer context used
        assert max(sld) - min(sld) < 0.05
        late = [(n, "sliding") for n in LENS[1:]] + [(n, "nonoverlapping") for n in LENS[2:]]
        for n, mode in late:
            others = [_v(saved, s, n, mode, seed) for s in rt.TEXT_SCHEMES if s not in ("alibi", "learned")]
            assert _v(saved, "alibi", n, mode, seed) < min(others) - 0.05, (seed, n, mode)


def test_no_scheme_gains_from_context_beyond_L_under_sliding_evaluation(saved):
    for seed in _seeds(saved):
        for s in rt.TEXT_SCHEMES:
            if s == "learned":
                continue
            sld = [_v(saved, s, n, "sliding", seed) for n in LENS]
            assert min(sld[1:]) > sld[0] - 0.02, (s, seed, sld)


def test_nope_and_randomized_degrade_slowly(saved):
    for seed in _seeds(saved):
        for s in ("none", "randomized"):
            sld = [_v(saved, s, n, "sliding", seed) for n in LENS]
            assert sld[1] - sld[0] < 0.3 and sld[-1] > sld[0] + 0.1, (s, seed, sld)


def test_early_token_curse_explains_alibis_gain(saved):
    """Exercise 4: (7/8) x (non-overlapping - sliding at L) predicts the gain from L to 8L."""
    gains, predictions = [], []
    for seed in _seeds(saved):
        nov = [_v(saved, "alibi", n, "nonoverlapping", seed) for n in (L, 8 * L)]
        sld_l = _v(saved, "alibi", L, "sliding", seed)
        gains.append(nov[0] - nov[1])
        predictions.append(7 / 8 * (nov[0] - sld_l))
    assert abs(np.mean(gains) - np.mean(predictions)) < 0.02


def test_where_each_scheme_breaks_in_the_long_input(saved):
    omega = posenc.rotary_frequencies(16)
    pair = int(np.argmax(2 * np.pi / omega > L))
    half = math.pi / omega[pair]
    assert 96 <= half <= 112  # RoPE's slowest partly turned pair reaches pi near position 99
    for seed in _seeds(saved):
        c, b = _curve(saved, "sinusoidal", seed)
        inside, first_out = c[1 : L // b].mean(), c[L // b]
        assert first_out > inside + 1.0  # breaks in the first bin past L
        c, b = _curve(saved, "rope", seed)
        inside = c[1 : L // b].mean()
        assert c[L // b : 96 // b].mean() < inside + 0.5, seed  # holds for a while past L
        assert c[112 // b :].mean() > inside + 1.5, seed  # broken past the half-turn
        c, b = _curve(saved, "t5", seed)
        beyond = c[L // b :]
        assert beyond[-8:].mean() > beyond[:4].mean() + 0.5, seed  # climbs rather than jumps
        c, b = _curve(saved, "alibi", seed)
        assert abs(c[L // b :].mean() - c[1 : L // b].mean()) < 0.15, seed
        # randomized: worse at every position of a long input, the first L included
        c, b = _curve(saved, "randomized", seed)
        assert c[: L // b].mean() > _v(saved, "randomized", L, "nonoverlapping", seed) + 0.2, seed


def test_t5_meets_untrained_buckets_past_L():
    t5 = posenc.T5RelativeBias(4, bidirectional=False)
    trained = set(t5.buckets(L).unique().tolist())
    assert max(trained) == 26 and set(t5.buckets(2 * L).unique().tolist()) - trained == {27, 28, 29, 30, 31}


def test_rope_extensions_zero_shot(saved):
    for seed in _seeds(saved):
        z = {m: {n: _v(saved, "rope", n, "sliding", seed, extension=m) for n in LENS[1:]}
             for m in ("pi", "ntk", "dynamic_ntk", "yarn")}
        plain = {n: _v(saved, "rope", n, "sliding", seed) for n in LENS[1:]}
        # every window has the full length: the same scaling, computed per call (last-bit differences)
        assert z["dynamic_ntk"] == pytest.approx(z["ntk"], abs=1.5e-4)
        for n in LENS[1:]:
            assert z["yarn"][n] < z["pi"][n] and z["yarn"][n] < plain[n] - 0.5, (seed, n)
        for mode in rt.EVAL_MODES:  # from 4L on YaRN is the best zero-shot extension, seed by seed
            for n in (4 * L, 8 * L):
                ntk, yarn = (_v(saved, "rope", n, mode, seed, extension=m) for m in ("ntk", "yarn"))
                assert yarn < ntk - 0.2, (seed, mode, n)
        assert z["ntk"][2 * L] < z["pi"][2 * L] - 0.5  # NTK-aware holds at 2L, PI does not
        assert z["ntk"][4 * L] > _v(saved, "rope", L, "sliding", seed) + 0.5  # NTK fails from 4L on
        for n in (4 * L, 8 * L):
            assert z["pi"][n] > plain[n] - 0.3  # PI no better than nothing beyond 2L


def test_rope_extensions_after_a_short_fine_tune(saved):
    ft = 4 * L
    for seed in _seeds(saved):
        t = {m: {n: _v(saved, "rope", n, "sliding", seed, extension=m, finetune_len=ft) for n in (ft, 8 * L)}
             for m in ("none", "pi", "ntk", "yarn")}
        base = _v(saved, "rope", L, "sliding", seed)
        assert t["yarn"][ft] < min(t["pi"][ft], t["ntk"][ft], t["none"][ft]) - 0.1, seed
        assert t["yarn"][ft] < base + 0.1  # back at the model's quality at L
        assert t["yarn"][ft] > base - 0.05  # but not better: no extra context used
        assert max(t["pi"][ft], t["ntk"][ft]) < t["none"][ft] - 0.2, seed  # direct fine-tuning worst
        for m in t:
            assert t[m][8 * L] > t[m][ft] + 0.05, (seed, m)  # beyond the fine-tuned length they break again


def test_no_model_copies(saved):
    for run in saved["runs"]:
        for d, p in run["probe"].items():
            if p["second"] is None:
                assert run["scheme"] == "learned" and int(d) > L
                continue
            assert p["second"] > p["first"] + 0.05, (run["scheme"], run["seed"], d)
