"""Chapter 6's ablations read beside phase A (issue 30, phase D): ``ablation_table`` on small fake rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.book import synthetic as S

L = 16


def _curve(fall_at: int, *, high: float = 1.0, low: float = 0.1) -> list[float]:
    """A 4x curve at ``high`` up to ``fall_at``, then at ``low``."""
    return [high] * fall_at + [low] * (4 * L - fall_at)


def _row(task, scheme, variant, seed, curve, *, acc=1.0, lr=3e-3, ablation=None):
    c = np.asarray(curve, dtype=float)
    row = {"task": task, "scheme": scheme, "variant": variant, "seed": seed, "lr": lr, "checkpoint": "best",
           "steps": 2000, "acc_1x": acc, "heldout_loss": 0.01, "beyond_2x": float(c[L:2 * L].mean()),
           "beyond_4x": float(c[L:].mean()), "pos_4x": list(map(float, c))}
    if ablation is not None:
        row.update(phase="D", ablation=ablation)
    return row


def _phase_a(task, scheme, variant, curves, **kw):
    return [_row(task, scheme, variant, s, c, **kw) for s, c in enumerate(curves)]


def _phase_d(ablation, task, scheme, variant, curves, **kw):
    return [_row(task, scheme, variant, s, c, ablation=ablation, **kw) for s, c in enumerate(curves)]


def _unit(table, ablation, task, scheme, variant):
    (row,) = [r for r in table if (r["ablation"], r["task"], r["scheme"], r["variant"]) == (ablation, task, scheme,
                                                                                         variant)]
    return row


@pytest.fixture(scope="module")
def fake():
    """Phase A: RoPE offset copy falls at 41 (4 seeds); NoPE plain long offset copy fits no seed.
    Phase D: base 100 falls at 22 in every seed (held); 2 heads falls at 41 in every seed (refuted);
    NoPE at depth 4 fits every seed of long offset copy (refuted) and no seed of far retrieve (held)."""
    a = (_phase_a("offset_copy", "rope", "plain", [_curve(41)] * 4)
         + _phase_a("long_offset_copy", "none", "plain", [_curve(16, high=0.4)] * 4, acc=0.4)
         + _phase_a("far_retrieve", "none", "plain", [_curve(16, high=0.3)] * 4, acc=0.3))
    d = (_phase_d("rope_base100", "offset_copy", "rope", "plain", [_curve(22)] * 5)
         + _phase_d("rope_2heads", "offset_copy", "rope", "plain", [_curve(41)] * 5)
         + _phase_d("depth4", "long_offset_copy", "none", "plain", [_curve(20)] * 5)
         + _phase_d("depth4", "far_retrieve", "none", "plain", [_curve(16, high=0.3)] * 5, acc=0.3))
    return S.ablation_table({"rows": d}, {"rows": a})


def test_every_unit_listed_in_plan_order(fake):
    assert [(r["ablation"], r["task"], r["scheme"], r["variant"]) for r in fake] == S.ablation_units()
    assert sum(r["status"] == "done" for r in fake) == 4


def test_missing_unit_is_named_and_keeps_its_prediction(fake):
    r = _unit(fake, "rope_base100", "offset_copy", "rope", "bos")
    assert r["status"] == r["outcome"] == "not in the results yet"
    assert r["predictions"] == [{"what": "horizon", "predicted": "horizon 16-22"}] and "ablated" not in r
    text = S.format_ablation_table(fake, compact=True)
    assert "|  | offset copy, BOS | — | — | not in the results yet |" in text
    assert "| RoPE, base 100 | offset copy | 4/4\u00a0→\u00a05/5 | 41\u00a0→\u00a022 | held (5/5) |" in text
    assert "| RoPE, base 100 | offset copy, with BOS | not in the results yet |" in S.format_ablation_table(fake)
    # units with no prediction leave the compact table; all 34 stay in the full one
    assert len(S.format_ablation_table(fake).splitlines()) == 2 + 34
    assert "associative recall" not in text.replace("ALiBi 8 heads", "")


def test_held_horizon_prediction(fake):
    r = _unit(fake, "rope_base100", "offset_copy", "rope", "plain")
    (p,) = r["predictions"]
    assert (p["k"], p["n"], p["outcome"], r["outcome"]) == (5, 5, "held", "held")
    assert p["interval"][0] > S.HORIZON_SHARE
    assert r["ablated"]["horizons"] == [22] * 5 and r["baseline"]["horizon"] == 41
    assert r["ablated"]["fit"] == "5/5" and r["baseline"]["fit"] == "4/4"
    # the fall at 22 is on an alias of 3 at base 100 (3 + 3 (2 pi) = 21.8), the one at 41 too at base 10,000
    assert r["alias"]["drops"] == [[22]] * 5 and r["alias"]["on_alias"] == 5
    assert r["alias_baseline"]["drops"] == [[41]] * 4 and r["alias_baseline"]["on_alias"] == 4


def test_refuted_horizon_prediction(fake):
    r = _unit(fake, "rope_2heads", "offset_copy", "rope", "plain")
    (p,) = r["predictions"]
    assert (p["k"], p["n"], p["outcome"]) == (0, 5, "refuted") and p["interval"][1] < S.HORIZON_SHARE


def test_uncertain_horizon_prediction():
    a = _phase_a("offset_copy", "rope", "bos", [_curve(41)] * 4)
    d = _phase_d("rope_base100", "offset_copy", "rope", "bos", [_curve(22)] * 3 + [_curve(41)] * 2)
    r = _unit(S.ablation_table({"rows": d}, {"rows": a}), "rope_base100", "offset_copy", "rope", "bos")
    lo, hi = r["predictions"][0]["interval"]
    assert r["outcome"] == "uncertain" and lo < S.HORIZON_SHARE < hi


def test_fit_predictions_held_and_refuted(fake):
    held = _unit(fake, "depth4", "far_retrieve", "none", "plain")
    refuted = _unit(fake, "depth4", "long_offset_copy", "none", "plain")
    assert held["predictions"][0]["outcome"] == "held" and held["ablated"]["fit"] == "0/5"
    assert refuted["predictions"][0]["outcome"] == "refuted" and refuted["predictions"][0]["observed"] == "fits 5/5"
    assert held["name"] == "NoPE, 4 layers" and held["baseline"]["label_4x"] == "not fit"
    assert held["ablated"]["n_2x"] == 0 and math.isnan(held["ablated"]["hold_2x_interval"][0])


def test_extrapolation_prediction_follows_phase_a():
    """ALiBi with 8 heads: 'holds where 4 heads hold' is predicted only where phase A holds."""
    a = (_phase_a("associative_recall", "alibi", "plain", [_curve(64)] * 4)
         + _phase_a("offset_copy", "alibi", "bos", [_curve(16, high=1.0, low=0.06)] * 4))
    d = (_phase_d("alibi_8heads", "associative_recall", "alibi", "plain", [_curve(64)] * 4 + [_curve(20)])
         + _phase_d("alibi_8heads", "offset_copy", "alibi", "bos", [_curve(16, low=0.06)] * 5))
    t = S.ablation_table({"rows": d}, {"rows": a})
    recall = _unit(t, "alibi_8heads", "associative_recall", "alibi", "plain")
    assert [p["predicted"] for p in recall["predictions"]] == ["holds at 2x", "holds at 4x"]
    assert recall["ablated"]["held_4x"] == 4 and recall["ablated"]["n_4x"] == 5
    assert recall["predictions"][1]["outcome"] in ("held", "uncertain")
    assert _unit(t, "alibi_8heads", "offset_copy", "alibi", "bos")["predictions"] == []
    assert _unit(t, "alibi_8heads", "offset_copy", "alibi", "bos")["outcome"] == "none"


def test_baseline_at_the_ablations_learning_rate():
    a = (_phase_a("offset_copy", "rope", "plain", [_curve(41)] * 4, lr=3e-3)
         + _phase_a("offset_copy", "rope", "plain", [_curve(30)] * 4, lr=1e-2))
    d = _phase_d("rope_base100", "offset_copy", "rope", "plain", [_curve(22)] * 5, lr=3e-3)
    r = _unit(S.ablation_table({"rows": d}, {"rows": a}), "rope_base100", "offset_copy", "rope", "plain")
    assert r["lr"] == 3e-3 and r["baseline"]["horizons"] == [41] * 4


@pytest.mark.parametrize("kw, err, name", [
    ({"results_d": 42}, TypeError, "results_d"),
    ({"results_a": [1, 2]}, TypeError, "results_a"),
    ({"results_d": {"units": []}}, ValueError, "results_d"),
    ({"results_d": {"rows": [{"task": "offset_copy"}]}}, ValueError, "results_d"),
    ({"results_a": {"rows": [{"phase": "D"}]}}, ValueError, "results_a"),
    ({"checkpoint": "last"}, ValueError, "checkpoint"),
])
def test_ablation_table_refuses_bad_input(kw, err, name):
    args = {"results_d": {"rows": []}, "results_a": {"rows": []}, **kw}
    with pytest.raises(err, match=name):
        S.ablation_table(**args)


def test_ablation_rows_need_their_fields():
    bad = {"rows": [{"phase": "D", "ablation": "depth4", "task": "far_retrieve"}]}
    with pytest.raises(ValueError, match="results_d rows"):
        S.ablation_table(bad, {"rows": []})


def test_format_refuses_bad_input(fake):
    with pytest.raises(TypeError, match="compact"):
        S.format_ablation_table(fake, compact="yes")
    with pytest.raises(TypeError, match="table"):
        S.format_ablation_table("table")
    with pytest.raises(ValueError, match="table"):
        S.format_ablation_table([{"task": "x"}])


def test_predictions_cover_the_readme_and_only_planned_units():
    units = set(S.ablation_units())
    assert set(S.ABLATION_PREDICTIONS) <= units
    horizon = [u for u, p in S.ABLATION_PREDICTIONS.items() if "horizon" in p]
    assert sorted(horizon) == sorted((a, "offset_copy", "rope", v) for a in ("rope_base100", "rope_2heads")
                                     for v in S.VARIANTS)
    assert S.ABLATION_PREDICTIONS[("alibi_8heads", "far_retrieve", "alibi", "bos")]["beyond_4x"] == "degrades"


def test_compact_cell_gives_labels_then_outcome():
    a = _phase_a("associative_recall", "alibi", "bos", [_curve(64)] * 4)
    d = _phase_d("alibi_8heads", "associative_recall", "alibi", "bos", [_curve(64)] * 5)
    text = S.format_ablation_table(S.ablation_table({"rows": d}, {"rows": a}), compact=True)
    assert "|  | associative recall, BOS | 4/4\u00a0→\u00a05/5 | 64\u00a0→\u00a064 | " \
           "2x holds 5/5, 4x holds 5/5: held |" in text
