"""Chapter 7: the orderings the chapter states, seed by seed, from the saved results."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

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
    pair, half = rt.rope_break(L, 16)  # the first pair not past half a turn within L
    assert pair == 3 and 96 <= half <= 112  # reaches pi near position 99
    # the pair repeats a trained angle only from 2 pi / omega - (L - 1) = 136 on
    wavelength = 2 * math.pi / posenc.rotary_frequencies(16)[pair]
    assert round(wavelength - (L - 1)) == 136
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


def test_half_turn_rule_in_press_et_al_setting():
    """The papers table: head size 128, base 10,000, T5 with maximum distance 128."""
    pair, d = rt.rope_break(512, 128)
    assert pair == 36 and round(d - 512) == 47  # well short of their k = 200 at L = 512
    pair, d = rt.rope_break(1024, 128)
    assert pair == 41 and round(d - 1024) == 123  # close to their k = 100 at L = 1,024
    # the chapter's old rule (first pair with wavelength > L) broke before L in their setting
    omega = posenc.rotary_frequencies(128)
    old = math.pi / omega[int(np.argmax(2 * np.pi / omega > 512))]
    assert old < 512
    # at their L every T5 bucket is trained; at this chapter's L = 64 not from distance 67 on
    assert rt.t5_first_untrained(512, 128, 32) is None and rt.t5_first_untrained(1024, 128, 32) is None
    t5 = posenc.T5RelativeBias(4, bidirectional=False)
    assert (t5.num_buckets, t5.max_distance) == (32, 128)
    assert rt.t5_first_untrained(L, 128, 32) == 67


def test_ntk_break_predicted_by_the_half_turn_rule(saved):
    """NTK-aware with s = n / L: the deciding pair reaches pi beyond 2L at s = 2, inside 4L at s = 4."""
    d2 = rt.rope_break(L, 16, scaling=rt.extension_scaling("ntk", 2, L))[1]
    d4 = rt.rope_break(L, 16, scaling=rt.extension_scaling("ntk", 4, L))[1]
    assert (round(d2), round(d4)) == (134, 180)
    assert 2 * L < d2 and d4 < 4 * L
    for seed in _seeds(saved):  # and the data agree: holds at 2L, fails at 4L
        base = _v(saved, "rope", L, "sliding", seed)
        assert _v(saved, "rope", 2 * L, "sliding", seed, extension="ntk") < base + 0.3, seed
        assert _v(saved, "rope", 4 * L, "sliding", seed, extension="ntk") > base + 0.5, seed


def test_yarn_and_ntk_at_twice_the_length(saved):
    """At 2L: within 0.1 bits seed by seed; NTK-aware lower in every seed non-overlapping, YaRN in 2 of 3 sliding."""
    gaps, ntk_lower_nov, yarn_lower_sld = [], 0, 0
    for seed in _seeds(saved):
        for mode in rt.EVAL_MODES:
            y, k = (_v(saved, "rope", 2 * L, mode, seed, extension=m) for m in ("yarn", "ntk"))
            gaps.append(abs(y - k))
            ntk_lower_nov += mode == "nonoverlapping" and k < y
            yarn_lower_sld += mode == "sliding" and y < k
    assert max(gaps) < 0.1
    assert ntk_lower_nov == len(_seeds(saved)) and yarn_lower_sld == 2


def test_t5_below_alibi_at_twice_the_length_non_overlapping(saved):
    """The old "as good" understated it: T5 is lower at 2L (non-overlapping) in every seed."""
    for seed in _seeds(saved):
        t5, alibi = (_v(saved, s, 2 * L, "nonoverlapping", seed) for s in ("t5", "alibi"))
        assert t5 < alibi, seed


def test_fine_tune_is_a_tenth_of_the_training(saved):
    """fine_tune_extension keeps the characters per step: 100 steps x 2 windows of 4L = 10 %."""
    cfg, ext = saved["protocol"]["config"], saved["protocol"]["extensions"]
    factor = ext["fine_tune_factor"]
    ft = ext["fine_tune_steps"] * max(1, cfg["batch_size"] // factor) * factor * L
    assert ft == 51_200 and round(100 * ft / (cfg["steps"] * cfg["batch_size"] * L)) == 10


def test_context_counts_of_non_overlapping_windows():
    """Target k of a window is the character after input k: mean context (n + 1) / 2, share below c is (c - 1) / n."""
    seen = []

    class NextChar(torch.nn.Module):
        """Puts all probability on "previous input + 1": right only if target t follows input t."""

        scheme = "none"

        def forward(self, x):
            seen.append(x.shape)
            return 50.0 * torch.nn.functional.one_hot((x + 1) % 65, 65).float()

    n = 8
    ids = torch.arange(2 * n + 1) % 65
    assert rt.evaluate_bpc(NextChar(), ids, n) < 1e-6
    assert seen and all(shape[-1] == n for shape in seen)  # n inputs score n targets
    contexts = np.arange(1, n + 1)  # so target k is predicted from inputs 1..k
    assert contexts.mean() == (n + 1) / 2 and (contexts < 4).mean() == (4 - 1) / n


# ----------------------------------------------------------------------------- the live run (issue 31, item 8)


def _stored_glue(notebook: str = "07_realtext") -> dict[str, str]:
    """Every value the stored notebook glued, by name (nbval checks that a fresh run stores the same)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / f"{notebook}.ipynb").read_text())
    return {o["metadata"]["scrapbook"]["name"]: o["data"]["application/papermill.record/text/plain"].strip("'\"")
            for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
            if "application/papermill.record/text/plain" in o.get("data", {})}


def test_live_run_is_the_grid_model_and_breaks_at_L_only_with_sinusoidal():
    """The live run is GridConfig's model (only its steps shortened), and the prose's prediction holds:
    past L the sinusoidal model's loss rises by far more than ALiBi's, and within L the two are alike."""
    g = _stored_glue()
    grid = rt.GridConfig()
    assert (int(g["live-L"]), int(g["live-layers"]), int(g["live-width"]), int(g["live-heads"]), int(g["live-batch"])) == (
        grid.train_len, grid.n_layers, grid.d_model, grid.n_heads, grid.batch_size)
    assert int(g["live-n"]) == 8 * grid.train_len and 200 <= int(g["live-steps"]) <= 400
    assert float(g["live-lr"]) in grid.lrs
    rise = {s: float(g[f"live-rise-{s}"]) for s in ("sinusoidal", "alibi")}
    for s in rise:  # the glued rise is out minus in (rounding aside)
        assert rise[s] == pytest.approx(float(g[f"live-out-{s}"]) - float(g[f"live-in-{s}"]), abs=0.011)
    assert rise["sinusoidal"] > 0.8, rise            # measured 1.34: a break
    assert rise["alibi"] < 0.4, rise                 # measured 0.20: a drift
    assert rise["sinusoidal"] > 3 * rise["alibi"], rise
    assert abs(float(g["live-in-sinusoidal"]) - float(g["live-in-alibi"])) < 0.15  # "alike" within L
    at = {k: float(g[f"live-sin-{k}"]) for k in ("L1", "L", "L2")}    # sinusoidal at L - 1, L, L + 2
    assert at["L"] - at["L1"] < 0.3 and at["L2"] - at["L1"] > 0.5, at  # measured 3.01, 3.18, 3.94
