"""Chapter 7: the claims the chapter states, from the grid of issue 31 (``realtext.json``).

The chapter reads the grid through ``posenc.book.realtext_report``; these tests read the same
file the same way and assert what the prose says. A claim that needs a unit the results do
not hold yet is skipped with the unit's name (``needs("main:t5-8")``), so it runs as soon as
the grid has written that unit. The last tests check that the executed notebook shows what
the file says (its glued numbers and labels).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc.book import realtext as rt
from posenc.book import realtext_report as rr
from posenc.book import results

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07_realtext.ipynb"


@pytest.fixture(scope="module")
def grid():
    return results.read_results("realtext.json")


def needs(grid, *units: str) -> None:
    """Skip unless every one of ``units`` (``"main:rope"``, ``"ext:0"``, ...) is in the results."""
    have = {u["key"] for u in grid.get("units", [])}
    gone = [u for u in units if u not in have]
    if gone:
        pytest.skip(f"not in the results yet: unit {', '.join(gone)}")


def _bpc(grid, variant, n, mode="sliding"):
    (row,) = [r for r in rr.bpc_table(grid, variants=[variant], lens=[n], modes=[mode])]
    return row


def _seed_rise(grid, variant, n, mode="sliding"):
    a, b = _bpc(grid, variant, 8, mode), _bpc(grid, variant, n, mode)
    assert a["seed_ids"] == b["seed_ids"]
    return np.array(b["seeds"]) - np.array(a["seeds"])


def _label(grid, a, b, n, mode="sliding"):
    (row,) = rr.orderings(grid, [(a, b, n, mode)])
    return row


# --------------------------------------------------------------------------- the protocol


def test_protocol_is_the_one_the_chapter_describes(grid):
    cfg = grid["protocol"]["config"]
    assert (cfg["train_len"], cfg["n_layers"], cfg["d_model"], cfg["n_heads"]) == (8, 2, 64, 8)
    assert grid["protocol"]["eval"]["lens"] == [8, 16, 32, 64, 128]
    assert grid["protocol"]["seeds"] == [0, 1, 2]
    assert grid["corpus"]["sha256"] == rt.CORPUS_SHA256


def test_count_models_improve_to_4_characters_then_worsen(grid):
    needs(grid, "baselines")
    ng = {r["context"]: r["bpc"] for r in rr.baseline_table(grid)}
    assert ng[0] > ng[1] > ng[2] > ng[3] > ng[4] < ng[5]
    assert round(ng[3], 3) == 2.706 and round(ng[4], 3) == 2.588
    assert {r["eval_chars"] for r in grid["baselines"] if r["eval_set"] == "all"} == {55296}


def test_predicted_breaks(grid):
    pair, half = rt.rope_break(8, 8)
    assert pair == 1 and round(half, 1) == 31.4 and 24 < half < 32  # just below 4L
    from posenc.rope.scaling import extension

    ntk = [round(rt.rope_break(8, 8, scaling=extension("ntk", s, 8))[1], 1) for s in (2, 4, 8, 16)]
    assert ntk == [39.6, 49.9, 62.8, 79.2]
    assert rt.t5_first_untrained(8, 128) == 8 and rt.t5_first_untrained(8, 8) is None
    assert [round(rt.rope_break(n, 128)[1] - n) for n in (512, 1024)] == [47, 123]


# --------------------------------------------------------------------------- the floors


def test_rope_meets_both_floors_in_every_seed(grid):
    needs(grid, "main:rope")
    f = rr.floors(grid)
    rows = [r for r in f["rows"] if r["variant"] == "rope"]
    assert len(rows) == 3 and all(r["floor_a"] and r["floor_b3"] for r in rows)
    assert min(r["fall"] for r in rows) >= 0.02


def test_alibi_misses_floor_a_in_every_seed_and_meets_b(grid):
    needs(grid, "main:alibi")
    rows = [r for r in rr.floors(grid)["rows"] if r["variant"] == "alibi"]
    assert len(rows) == 3
    assert not any(r["floor_a"] for r in rows)  # "misses floor (a) in 3/3"
    assert all(r["floor_b3"] for r in rows)
    # "flat from k = 4 to 8": within 0.02 bits either way in every seed
    assert all(abs(r["fall"]) < 0.02 for r in rows)


def test_best_variant_is_within_margin_of_the_4_character_model(grid):
    needs(grid, "main:rope", "main:alibi")
    best = rr.floors(grid)["best"]
    assert best["within4"] and best["gap4"] <= 0.05


def test_floors_not_all_met(grid):
    needs(grid, "main:alibi")
    assert rr.floors(grid)["met"] is False  # "Whether every variant meets both floors: no"


def test_context_use_at_1_and_2_characters_is_worse_than_counting(grid):
    needs(grid, "main:rope", "main:alibi")
    every = {r["context"]: r["bpc_every"] for r in rr.baseline_table(grid)}
    cu = {(r["variant"], r["context"]): r["mean"] for r in rr.context_use_table(grid, variants=["rope", "alibi"])}
    for v in ("rope", "alibi"):
        assert cu[(v, 1)] > every[1] and cu[(v, 2)] > every[2]
    # at k = 4, RoPE below the 4-character count model and ALiBi not
    assert cu[("rope", 4)] < every[4] < cu[("alibi", 4)]


# --------------------------------------------------------------------------- bits per character


def test_no_curve_falls_beyond_L_under_sliding(grid):
    needs(grid, "main:rope", "main:alibi")
    for v in ("rope", "alibi"):
        for n in (16, 32, 64, 128):
            assert (_seed_rise(grid, v, n) > 0).all(), (v, n)


def test_alibi_rises_non_overlapping_to_16L(grid):
    needs(grid, "main:alibi")
    assert _seed_rise(grid, "alibi", 128, "nonoverlapping").mean() > 0


@pytest.mark.parametrize(
    "a, b, n, label",
    [
        ("rope", "alibi", 8, rr.INDISTINGUISHABLE),
        ("rope", "alibi", 16, rr.INDISTINGUISHABLE),
        ("alibi", "rope", 32, rr.INDISTINGUISHABLE),
        ("alibi", "rope", 64, rr.HOLDS),
        ("alibi", "rope", 128, rr.HOLDS),
        ("rope", "ngram-3", 8, rr.HOLDS),
        ("alibi", "ngram-3", 8, rr.HOLDS),
        ("rope", "ngram-4", 8, rr.INDISTINGUISHABLE),
        ("alibi", "ngram-4", 8, rr.INDISTINGUISHABLE),
    ],
)
def test_orderings_the_prose_states(grid, a, b, n, label):
    needs(grid, "main:rope", "main:alibi")
    assert _label(grid, a, b, n)["label"] == label


# --------------------------------------------------------------------------- the predictions


def test_prediction_1_common_rise_at_2L_rope_alibi(grid):
    needs(grid, "main:rope", "main:alibi")
    for v in ("rope", "alibi"):
        assert 0.07 <= _seed_rise(grid, v, 16).mean() <= 0.18


def test_prediction_1_refuted_by_t5_at_maximum_distance_L(grid):
    needs(grid, "main:t5-8")
    r = {n: _seed_rise(grid, "t5-8", n).mean() for n in (16, 64, 128)}
    assert abs(r[16]) < 0.05  # "+0.01 at 2L, not 0.10-0.15"
    assert 0 < r[128] < _seed_rise(grid, "alibi", 128).mean()
    # the flattest variant, L to 16L (sliding)
    rises = {v: _seed_rise(grid, v, 128).mean() for v in ("rope", "alibi", "t5-8")}
    assert min(rises, key=rises.get) == "t5-8"
    # non-overlapping it falls by 8L: the early token curse diluted
    assert _seed_rise(grid, "t5-8", 64, "nonoverlapping").mean() < -0.1


def test_t5_at_maximum_distance_L_meets_both_floors(grid):
    needs(grid, "main:t5-8")
    rows = [r for r in rr.floors(grid)["rows"] if r["variant"] == "t5-8"]
    assert len(rows) == 3 and all(r["floor_a"] and r["floor_b3"] for r in rows)


@pytest.mark.parametrize("n, label", [(8, rr.INDISTINGUISHABLE), (64, rr.HOLDS)])
def test_t5_at_maximum_distance_L_against_alibi(grid, n, label):
    needs(grid, "main:t5-8", "main:alibi")
    assert _label(grid, "t5-8", "alibi", n)["label"] == label


def test_prediction_1_t5_128(grid):
    needs(grid, "main:t5-128")
    assert _seed_rise(grid, "t5-128", 16).mean() > 0.07


def test_prediction_2_rope_half_turn(grid):
    needs(grid, "main:rope", "main:alibi")
    runs = {v: rr.loss_by_position(grid, v)["bpc"] for v in ("rope", "alibi")}
    rope = runs["rope"]
    # 2a: the largest step enters the half-turn's bin (30-31) or the next: into 32-33, +0.56 bits
    jump = rr.largest_step(grid, "rope", late=1)
    assert round(jump["predicted"], 1) == 31.4 and jump["expected"] == (30, 33)
    assert jump["into"] == (32, 33) and round(jump["step"], 2) == 0.56
    assert jump["holds"] and jump["verdict"] == "holds"
    assert _seed_rise(grid, "rope", 16).mean() <= _seed_rise(grid, "alibi", 16).mean()  # 2b
    # 2c refuted: RoPE has pulled away by 4L (+0.55 against ALiBi's +0.27)
    r4, a4 = _seed_rise(grid, "rope", 32).mean(), _seed_rise(grid, "alibi", 32).mean()
    assert r4 > a4 + 0.1 and r4 > 0.5
    # the loss follows ALiBi's well past L and departs a few positions before 31.4
    apart = rr.first_gap(grid, "rope", "alibi", gap=0.1)
    assert 16 <= apart["into"][0] < 31.4 and apart["difference"] > 0.1
    i = apart["into"][0] // apart["bin"]   # and no earlier bin from L on is 0.1 above ALiBi
    assert all(rope[j] - runs["alibi"][j] <= 0.1 for j in range(4, i))


def test_prediction_4_t5_buckets(grid):
    needs(grid, "main:t5-8", "main:t5-128")
    for n in (16, 128):
        assert _label(grid, "t5-8", "t5-128", n)["label"] == rr.HOLDS


def test_prediction_5a_sinusoidal_breaks_at_L(grid):
    needs(grid, "main:sinusoidal", "main:alibi")
    assert (_seed_rise(grid, "sinusoidal", 16) > _seed_rise(grid, "alibi", 16)).all()


def test_prediction_5b_randomized_refuted(grid):
    needs(grid, "main:randomized", "main:none")
    # "refuted": it rises by more than 0.2 in every seed, ending near NoPE at 16L
    assert (_seed_rise(grid, "randomized", 128) > 0.2).all()
    b = {r["variant"]: r["mean"] for r in rr.bpc_table(grid) if r["eval_len"] == 128 and r["mode"] == "sliding"}
    assert abs(b["randomized"] - b["none"]) < 0.2


def test_randomized_spacing_reading(grid):
    """The reading after prediction 5b: n sorted positions drawn from 0 .. M - 1 sit (M + 1) / (n + 1) apart,
    about 14 in training (n = L = 8, M = 128) and 1 at 16L, where a window takes every position."""
    from posenc.book.synthetic import randomized_spacing

    L, M = grid["protocol"]["config"]["train_len"], grid["protocol"]["config"]["randomized_max_len"]
    assert (L, M) == (8, 128) and M == 16 * L       # training draws from every position up to 16L
    gap = randomized_spacing([L, 16 * L], M)
    assert gap == pytest.approx([129 / 9, 1.0]) and round(float(gap[0])) == 14
    # the formula against the positions the grid's randomized model draws (windows of L, 20,000 of them)
    from posenc.book.models import random_positions

    drawn = random_positions(20000, L, M, generator=torch.Generator().manual_seed(0))
    assert drawn.diff(dim=1).double().mean().item() == pytest.approx(float(gap[0]), rel=0.02)
    assert random_positions(4, 16 * L, M).diff(dim=1).eq(1).all()      # at 16L: every position, 1 apart
    g = _glued()
    assert g["rand-gap-L"] == "14" and g["rand-gap-16L"] == "1" and g["rand-max-1"] == str(M - 1)


def test_prediction_6_alibi_not_flat(grid):
    needs(grid, "main:alibi")
    assert _seed_rise(grid, "alibi", 128).mean() > 0.05  # "refuted": +0.35 from L to 16L


def test_break_grows_for_rope_and_shrinks_for_alibi(grid):
    needs(grid, "main:rope", "main:alibi")
    gap = {r["variant"]: [h[2]["val_8L"] - h[1] for h in r["history"]] for r in grid["runs"] if r["seed"] == 0 and r["variant"] != "learned"}
    assert gap["rope"][-1] > gap["rope"][0] + 0.5
    assert gap["alibi"][-1] < gap["alibi"][0]
    if "t5-8" in gap:
        assert gap["t5-8"][-1] < 0 < gap["t5-8"][0]


# --------------------------------------------------------------------------- the copy probe


def test_copy_probe_main_models(grid):
    needs(grid, "main:rope", "main:alibi")
    t = {(r["variant"], r["distance"]): r for r in rr.copy_probe_table(grid, condition="text")}
    assert t[("rope", 3)]["gain"] < 0 and t[("alibi", 3)]["gain"] < 0  # "fails at distance 3"
    assert t[("alibi", 3)]["label"] == "worse with the first copy"
    far = [r for (v, d), r in t.items() if d > 8 and r["gain"] is not None]  # the learned table cannot run there
    assert -0.15 < min(r["gain"] for r in far) and max(r["gain"] for r in far) < 0.1
    # "intervals above zero: alibi at 11, t5-8 at 59"
    assert sorted((r["variant"], r["distance"]) for r in far if r["label"] == "copies") == [("alibi", 11), ("t5-8", 59)]


def test_positive_control_copies_within_L(grid):
    needs(grid, "copy:rope", "copy:alibi")
    t = rr.copy_probe_table(grid, condition="positive_control")
    assert all(r["gain"] > 0 and r["label"] == "copies" for r in t if r["distance"] == 3)


COPY_UNITS = tuple(f"copy:{v}" for v in ("rope", "alibi", "t5-8", "t5-128", "sinusoidal", "none", "randomized"))


def test_positive_control_copying_survives_beyond_L(grid):
    """The prose: copying survives the training length in every scheme that can run there (7 of 7 at 59);
    T5-128 keeps the most; every gain shrinks with distance but RoPE's; RoPE fails only at 27."""
    needs(grid, *COPY_UNITS)
    t = {(r["variant"], r["distance"]): r for r in rr.copy_probe_table(grid, condition="positive_control")
         if r["gain"] is not None}
    far = {v: r for (v, d), r in t.items() if d == 59}
    assert len(far) == 7 and all(r["label"] == "copies" for r in far.values())
    assert max(far, key=lambda v: far[v]["gain"]) == "t5-128"
    for v in ("alibi", "t5-8", "sinusoidal", "none", "randomized"):
        gains = [t[(v, d)]["gain"] for d in (3, 11, 27, 59)]
        assert gains == sorted(gains, reverse=True), v
    fails = [(v, d) for (v, d), r in t.items() if r["label"] != "copies"]
    assert fails == [("rope", 27)]
    assert t[("rope", 59)]["label"] == "copies"


def test_rope_pair_1_cosine_negative_only_where_the_copy_fails(grid):
    omega1 = float(posenc.rotary_frequencies(8)[1])
    cos = {d: np.cos(omega1 * d) for d in grid["protocol"]["probe"]["distances"]}
    assert [d for d, c in cos.items() if c < 0] == [27]


def test_rope_copy_reading_pair_1_cosine(grid):
    """The reading after the positive controls: pair 1 (the fastest pair not past half a turn within L) scales the
    match by cos(omega_1 d): -0.90 at 27, the one distance where RoPE's control does not copy, positive elsewhere."""
    needs(grid, *COPY_UNITS)
    cfg = grid["protocol"]["config"]
    head = cfg["d_model"] // cfg["n_heads"]
    pair, half = rt.rope_break(cfg["train_len"], head)
    omega = posenc.rotary_frequencies(head)
    assert pair == 1 and float(omega[1]) == pytest.approx(0.1)       # 10000 ** (-1 / 4)
    dists = grid["protocol"]["probe"]["distances"]
    cos = {d: float(np.cos(omega[pair] * d)) for d in dists}
    assert {d: round(c, 2) for d, c in cos.items()} == {3: 0.96, 11: 0.45, 27: -0.90, 59: 0.93}
    assert 27 < half < 59 and abs(27 - half) < abs(59 - half)        # 27 is the distance nearest the half-turn
    # the rotation the model applies (interleaved pairs): a query and a key along pair 1's first axis, d apart,
    # score cos(omega_1 d)
    x = torch.zeros(1, 1, max(dists) + 1, head)
    x[..., 2 * pair] = 1.0
    rot = posenc.apply_rotary(x, torch.arange(max(dists) + 1), layout="interleaved")[0, 0]
    assert {d: float(rot[d] @ rot[0]) for d in dists} == pytest.approx(cos, abs=1e-5)
    # where the copy fails: RoPE's positive control at 27 only
    fails = [r["distance"] for r in rr.copy_probe_table(grid, condition="positive_control")
             if r["variant"] == "rope" and r["label"] != "copies"]
    assert fails == [d for d, c in cos.items() if c < 0] == [27]
    g = _glued()
    assert [g[f"cos-{d}"] for d in dists] == [f"{c:+.2f}" for c in cos.values()] == ["+0.96", "+0.45", "-0.90", "+0.93"]


# --------------------------------------------------------------------------- the extensions


EXT = ("ext:0", "ext:1", "ext:2")


def test_every_fine_tuned_extension_beats_more_training_at_L(grid):
    needs(grid, *EXT)
    for m in ("ft:yarn", "ft:pi", "ft:ntk"):
        assert _label(grid, m, "ft:control_at_L", 32)["label"] == rr.HOLDS


def test_plain_rope_fine_tuned_at_4L_does_as_well(grid):
    """The prose: at the fine-tuning length the longer windows do the work, not the rescaling."""
    needs(grid, *EXT)
    assert _label(grid, "ft:yarn", "ft:none", 32)["label"] == rr.INDISTINGUISHABLE
    assert _label(grid, "ft:pi", "ft:none", 32)["label"] == rr.REVERSED


def test_beyond_the_fine_tuning_length(grid):
    """At 8L: plain RoPE fine-tuned at 4L breaks, NTK-aware half breaks, PI and YaRN (s = 4) hold;
    YaRN with s = 8 is no better (reversed seed by seed)."""
    needs(grid, *EXT)
    m = {r["name"]: r["mean"] for r in rr.extension_table(grid) if r["eval_len"] == 64 and r["mode"] == "sliding"}
    assert m["ft:none"] > 5.5 and 3.5 < m["ft:ntk"] < 5 and m["ft:pi"] < 2.7 and m["ft:yarn"] < 2.6
    assert _label(grid, "ft:yarn_s8", "ft:yarn", 64)["label"] == rr.REVERSED


def test_zero_shot_extensions(grid):
    needs(grid, *EXT)
    for n in (16, 32):
        assert _label(grid, "zs:ntk", "zs:pi", n)["label"] == rr.HOLDS
    # YaRN's temperature does not help here (reversed seed by seed at 4L)
    assert _label(grid, "zs:yarn", "zs:yarn_no_temperature", 32)["label"] == rr.REVERSED
    # NTK-aware (s = 8), judged by RoPE's rule (2a: the half-turn's bin or the next, clipped to the
    # window): largest step by position at 8L into 58-59, two bins before 62-63
    ntk = rr.largest_step(grid, "zs:ntk", late=1)
    assert round(ntk["predicted"], 1) == 62.8 and ntk["expected"] == (62, 63)
    assert ntk["into"] == (58, 59) and ntk["bins_off"] == -2
    assert ntk["verdict"] == "refuted: 2 bins early"
    # and under the stricter rule (the bin of 62.8 alone)
    assert rr.largest_step(grid, "zs:ntk", late=0)["verdict"] == "refuted: 2 bins early"


# --------------------------------------------------------------------------- the floors, every variant


def test_floors_per_variant(grid):
    needs(grid, *(f"main:{v}" for v in ("rope", "alibi", "t5-8", "t5-128", "sinusoidal", "learned")))
    per = {r["variant"]: r for r in rr.floors(grid)["variants"]}
    for v in ("rope", "t5-8", "t5-128", "sinusoidal", "learned"):
        assert per[v]["floor_a"] == "3/3" and per[v]["floor_b3"] == "3/3", v
    assert per["alibi"]["floor_a"] == "0/3" and per["alibi"]["floor_b3"] == "3/3"
    best = min(per[v]["mean_bpc_L"] for v in per if v != "none")
    assert best <= rr.floors(grid)["ngram4"] + 0.05  # within 0.05 of the 4-character model, or below


# --------------------------------------------------------------------------- the notebook shows the file


def _glued() -> dict[str, str]:
    nb = json.loads(NOTEBOOK.read_text())
    out = {}
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and "application/papermill.record/text/plain" in o.get("data", {}):
                out[name] = o["data"]["application/papermill.record/text/plain"].strip("'\"")
    return out


def test_notebook_glues_what_the_file_says(grid):
    needs(grid, "main:rope", "main:alibi")
    g = _glued()
    f = rr.floors(grid)
    per = {r["variant"]: r for r in f["variants"]}
    assert g["fa-rope"] == per["rope"]["floor_a"] and g["fa-alibi"] == per["alibi"]["floor_a"]
    assert g["fb-alibi"] == per["alibi"]["floor_b3"]
    assert g["ng3"] == f"{f['ngram3']:.3f}" and g["ng4"] == f"{f['ngram4']:.3f}"
    assert g["rise-rope-4"] == f"{_seed_rise(grid, 'rope', 32).mean():+.2f}"
    assert g["rise-alibi-16"] == f"{_seed_rise(grid, 'alibi', 128).mean():+.2f}"
    assert g["ord-rope-alibi-8"] == _label(grid, "rope", "alibi", 8)["label"]
    assert g["lbp-jump-bin"] == "32-33" and g["rope-half"] == "31.4"
