"""Chapter 7's analysis layer (``posenc.book.realtext_report``) on a made-up grid with the real schema.

The fixture ``grid`` is built here with every section ``experiments/ch7_grid.py`` writes
(the keys checked against a ``--quick`` run of the script), with numbers chosen so that
each floor, label and break has a known answer. The shipped
``posenc/book/data/realtext.json`` (it grows unit by unit as the grid runs) checks that
missing sections come back as a message, not an error.
"""

from __future__ import annotations

import copy
import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from posenc.book import plotting, realtext as rt, results  # noqa: E402
from posenc.book import realtext_report as rr  # noqa: E402

L = 8
SEEDS = (0, 1, 2)
NGRAM = [4.8501, 3.6052, 3.0487, 2.7063, 2.5882, 2.6431]
OFFSETS = np.array([-0.2, -0.1, 0.0, 0.0, 0.1, 0.2])      # six blocks of text (the grid has 27)
# bits per character at n = L (sliding) of seed 1; seeds 0 and 2 are 0.01 lower and higher
LEVEL = {"rope": 2.55, "alibi": 2.60, "t5-8": 2.57, "t5-128": 2.58, "sinusoidal": 2.62, "none": 2.90,
         "randomized": 2.65, "learned": 2.63}
# how much worse each variant gets per doubling of n beyond L (RoPE, sinusoidal, T5-128 break)
BREAK = {"rope": 1.0, "alibi": 0.0, "t5-8": 0.0, "t5-128": 0.8, "sinusoidal": 1.5, "none": 0.05, "randomized": 0.02}
# context-use curves at k = 1, 2, 4, 8 for seed 1: ALiBi's rises from 4 to 8 (floor (a) fails), NoPE's is flat
CURVE = {"alibi": [3.67, 3.13, 2.70, 2.74], "none": [3.70, 3.30, 3.00, 3.00]}
DEFAULT_CURVE = [3.66, 3.12, 2.62, 2.58]


def _blocks(value: float, rng: np.random.Generator) -> list[float]:
    noise = rng.normal(0, 0.004, OFFSETS.size)
    noise -= noise.mean()
    return [round(float(v), 4) for v in value + OFFSETS + noise]


def make_grid() -> dict:
    """A complete grid at L = 8 (8 variants x 3 seeds, extensions, probes) with known answers."""
    rng = np.random.default_rng(0)
    config = rt.GridConfig().to_dict()
    names = [rt.variant_name(*v) for v in rt.GRID_VARIANTS]
    grid: dict = {
        "protocol": {"config": config, "variants": [list(v) for v in rt.GRID_VARIANTS], "seeds": list(SEEDS),
                     "eval": {"lens": [L * f for f in (1, 2, 4, 8, 16)], "contexts": [1, 2, 4, 8], "context_every": 4,
                              "loss_by_position": {"length": 8 * L, "bin": 2}},
                     "probe": {"distances": [3, 11, 27, 59], "span": 3, "prefix": 2, "n_probes": 256},
                     "extensions": {"zero_shot": ["pi", "ntk", "yarn", "yarn_no_temperature"],
                                    "fine_tune": [["control_at_L", 1], ["none", 4], ["pi", 4], ["ntk", 4], ["yarn", 4],
                                                  ["yarn_s8", 4]]}},
        "units": [{"key": "baselines", "commit": "x", "wall_seconds": 1.0, "cpu_seconds": 1.0}],
        "provenance": {"commit": "x"}, "core_hours": 0.5,
        "baselines": [{"model": "ngram", "context": k, "eval_set": es, "bpc": round(b + (0.01 if es != "all" else 0), 4),
                       "eval_chars": 55296 // (1 if es == "all" else 4), "block_bpc": _blocks(b, rng)}
                      for k, b in enumerate(NGRAM) for es in ("all", "every_4")],
        "rows": [], "context_use": [], "runs": [], "tune": [], "copy_probe": [], "copy_runs": [],
        "extension_rows": [], "extension_runs": [],
    }
    for v in names:
        scheme, md = (v.split("-")[0], int(v.split("-")[1])) if v.startswith("t5") else (v, None)
        for lr in (2e-3, 4e-3, 8e-3):
            grid["tune"].append({"variant": v, "scheme": scheme, "t5_max_distance": md, "seed": 100, "lr": lr,
                                 "train_len": L, "best_step": 2000, "best_val_bpc": 2.6 + abs(lr - 4e-3) * 10,
                                 "stop": "patience", "stop_step": 3000, "steps_run": 3000,
                                 "train_chars": 3000 * 1024, "seconds": 10.0, "history": []})
        for s in SEEDS:
            base = {"variant": v, "scheme": scheme, "t5_max_distance": md, "seed": s, "lr": 4e-3}
            shift = 0.01 * (s - 1)
            for f in (1, 2, 4, 8, 16):
                for mode in rt.EVAL_MODES:
                    row = {**base, "train_len": L, "eval_len": f * L, "mode": mode}
                    if v == "learned" and f > 1:
                        row.update(bpc=None, eval_chars=0, error="position 15 is at or beyond max_len=8")
                    else:
                        b = LEVEL[v] + shift + BREAK.get(v, 0.0) * np.log2(f) + (0.1 if mode == "nonoverlapping" else 0)
                        row.update(bpc=round(float(b), 4), eval_chars=55296, block_bpc=_blocks(b, rng))
                    grid["rows"].append(row)
            for k, c in zip((1, 2, 4, 8), CURVE.get(v, DEFAULT_CURVE)):
                b = c + shift
                grid["context_use"].append({**base, "context": k, "bpc": round(b, 4), "eval_chars": 13824,
                                            "block_bpc": _blocks(b, rng)})
            history = [[step, round(3.0 - step / 5000, 4)] + ([] if v == "learned" else [
                {"val_8L": round(3.0 - step / 5000 + BREAK[v] * 3 * step / 2000, 4)}]) for step in (250, 500, 750, 1000)]
            lbp_len = L if v == "learned" else 8 * L
            lbp = [LEVEL[v]] * 5 + [LEVEL[v] + BREAK.get(v, 0.0)] * (lbp_len // 2 - 5)
            grid["runs"].append({**base, "train_len": L, "best_step": 750, "best_val_bpc": history[2][1],
                                 "stop": "patience", "stop_step": 1000, "steps_run": 1000, "train_chars": 1000 * 1024,
                                 "seconds": 30.0, "history": history, "eval_seconds": 20.0,
                                 "loss_by_position": {"length": lbp_len, "bin": 2, "bpc": lbp[: lbp_len // 2]}})
            for m, d in zip((1, 2, 4, 8), (3, 11, 27, 59)):
                row = {**base, "trained_on": "text", "condition": "text", "distance": d}
                if v == "learned" and m > 1:
                    row.update(gain=None, error="position 14 is at or beyond max_len=8")
                else:
                    g = 0.002 * (s - 1)   # no copying: gains around 0
                    row.update(gain=g, gain_bootstrap95=[g - 0.01, g + 0.01], copy_bpc=2.6, control_bpc=2.6 + g,
                               length=m * L)
                grid["copy_probe"].append(row)
    for v in ("rope", "alibi", "t5-8"):   # the positive control, seed 0: copies within L; T5-8 keeps it beyond
        for m, d in zip((1, 2, 4, 8), (3, 11, 27, 59)):
            g = 0.4 if m == 1 or v == "t5-8" else (-0.3 if v == "rope" else 0.0)
            grid["copy_probe"].append({"variant": v, "scheme": v.split("-")[0], "seed": 0, "lr": 4e-3,
                                       "trained_on": "text_with_repeats", "condition": "positive_control",
                                       "distance": d, "gain": g, "gain_bootstrap95": [g - 0.05, g + 0.05],
                                       "copy_bpc": 2.5, "control_bpc": 2.5 + g, "length": m * L})
        grid["copy_runs"].append({"variant": v, "seed": 0, "lr": 4e-3, "best_step": 750, "best_val_bpc": 2.5,
                                  "stop": "budget", "stop_step": 8000, "steps_run": 8000, "train_chars": 8000 * 1024,
                                  "history": [], "bpc_at_L_sliding": 2.55})
    zero = {"pi": 0.6, "ntk": 0.3, "yarn": 0.2, "yarn_no_temperature": 0.25}
    tuned = {"control_at_L": (False, 2.50), "none": (False, 2.9), "pi": (False, 2.7), "ntk": (False, 2.65),
             "yarn": (True, 2.60), "yarn_s8": (True, 2.62)}
    for s in SEEDS:
        shift = 0.01 * (s - 1)
        for method, cost in zero.items():
            for f in (2, 4, 8, 16):
                for mode in rt.EVAL_MODES:
                    b = LEVEL["rope"] + shift + cost * np.log2(f)
                    grid["extension_rows"].append({"variant": "rope", "scheme": "rope", "seed": s, "extension": method,
                                                   "temperature": method == "yarn", "finetune": None, "train_len": L,
                                                   "eval_len": f * L, "mode": mode, "bpc": round(float(b), 4),
                                                   "eval_chars": 55296, "block_bpc": _blocks(b, rng)})
        for method, cost in zero.items():   # loss by position at 8L, factor 8: NTK breaks at 13.4, inside the window
            bpc = [2.55 + shift] * 7 + [2.55 + shift + (1.0 if method == "ntk" else cost / 10)] * 25
            grid["extension_runs"].append({"seed": s, "zero_shot": method, "factor": 8,
                                           "loss_by_position": {"length": 8 * L, "bin": 2, "bpc": bpc}})
        for method, (temp, level) in tuned.items():
            factor = 1 if method == "control_at_L" else 4
            for n in (L, 4 * L, 8 * L):
                for mode in rt.EVAL_MODES:
                    b = level + shift + (0.0 if n == L else 0.05 + (1.0 if method == "control_at_L" else 0.0))
                    grid["extension_rows"].append({
                        "variant": "rope", "scheme": "rope", "seed": s,
                        "extension": {"yarn_s8": "yarn", "control_at_L": "none"}.get(method, method),
                        "temperature": temp, "finetune": method, "finetune_len": factor * L,
                        "factor": 8 if method == "yarn_s8" else factor, "train_len": L, "eval_len": n, "mode": mode,
                        "bpc": round(b, 4), "eval_chars": 55296, "block_bpc": _blocks(b, rng)})
            grid["extension_runs"].append({"seed": s, "finetune": method, "best_step": 400, "best_val_bpc": level,
                                           "history": [[100, level + 0.1], [400, level]], "seconds": 20.0})
    return grid


@pytest.fixture(scope="module")
def grid() -> dict:
    return make_grid()


@pytest.fixture(scope="module")
def shipped() -> dict:
    return results.read_results("realtext.json")


@pytest.fixture
def ax():
    fig, ax = plt.subplots(figsize=(plotting.COLUMN_WIDTH_IN, 3.0))
    yield ax
    plt.close(fig)


# --------------------------------------------------------------------------- floors


def test_floors_per_variant_and_seed(grid):
    f = rr.floors(grid)
    assert f["missing"] is None and f["ngram3"] == 2.7063 and f["ngram4"] == 2.5882 and f["train_len"] == L
    by = {(r["variant"], r["seed"]): r for r in f["rows"]}
    assert len(by) == 8 * 3
    rope = by[("rope", 1)]
    assert rope["fall"] == pytest.approx(0.04) and rope["floor_a"] and rope["margin_a"] == pytest.approx(0.02)
    assert rope["bpc_L"] == 2.55 and rope["floor_b3"] and rope["margin_b3"] == pytest.approx(0.1563)
    assert rope["gap4"] == pytest.approx(-0.0382) and rope["within4"]
    alibi = by[("alibi", 0)]
    assert alibi["fall"] == pytest.approx(-0.04) and alibi["floor_a"] is False and alibi["margin_a"] == pytest.approx(-0.06)
    nope = by[("none", 2)]
    assert nope["required"] is False and nope["floor_a"] is False and nope["floor_b3"] is False
    variants = {r["variant"]: r for r in f["variants"]}
    assert variants["rope"]["floor_a"] == "3/3" and variants["rope"]["met"] is True
    assert variants["alibi"]["floor_a"] == "0/3" and variants["alibi"]["floor_b3"] == "3/3"
    assert variants["alibi"]["met"] is False
    assert f["best"]["variant"] == "rope" and f["best"]["within4"] and f["best"]["gap4"] == pytest.approx(-0.0382)
    assert f["met"] is False   # ALiBi fails floor (a)


def test_floors_met_when_every_required_variant_passes_and_nope_does_not_count(grid):
    g = copy.deepcopy(grid)
    for r in g["context_use"]:
        if r["variant"] == "alibi" and r["context"] == 8:
            r["bpc"] = 2.60 + 0.01 * (r["seed"] - 1)   # now falls 0.10 from k = 4
    f = rr.floors(g)
    assert f["met"] is True                      # NoPE fails both floors, and is not required
    assert {r["variant"]: r["met"] for r in f["variants"]}["none"] is False
    assert rr.floors(g, margin=0.0)["best"]["within4"] is True      # RoPE is below the 4-character model
    assert rr.floors(g, threshold=0.05)["met"] is False              # RoPE falls 0.04 only


def test_floors_threshold_and_margin_are_stated_numbers(grid):
    f = rr.floors(grid, threshold=0.03, margin=0.0)
    assert f["threshold"] == 0.03 and f["margin"] == 0.0
    assert {r["variant"]: r["floor_a"] for r in f["variants"]}["rope"] == "3/3"


def test_floors_of_a_grid_still_running_is_undecided_not_met(grid):
    g = copy.deepcopy(grid)
    for key in ("rows", "context_use"):
        g[key] = [r for r in g[key] if r["variant"] in ("rope", "t5-8")]
    f = rr.floors(g)
    assert [r["variant"] for r in f["variants"]] == ["rope", "t5-8"]
    assert f["met"] is None   # every variant seen so far passes, but the others are not in yet


# --------------------------------------------------------------------------- tables


def test_bpc_table_uses_the_grids_statistics(grid):
    t = rr.bpc_table(grid)
    cell = next(r for r in t if (r["variant"], r["eval_len"], r["mode"]) == ("rope", 16, "sliding"))
    rows = [r for r in grid["rows"] if (r["variant"], r["eval_len"], r["mode"]) == ("rope", 16, "sliding")]
    expected = rt.bpc_intervals(rows)
    assert cell["mean"] == pytest.approx(3.55) and cell["seeds"] == [3.54, 3.55, 3.56] and cell["seed_ids"] == [0, 1, 2]
    assert cell["t95"] == expected["t95"] and cell["bootstrap95"] == expected["bootstrap95"]
    assert cell["n_seeds"] == 3 and cell["n_blocks"] == 6
    # the learned table beyond L cannot be scored: left out, not a row of None
    assert {r["eval_len"] for r in t if r["variant"] == "learned"} == {L}
    assert len(t) == 7 * 5 * 2 + 2
    only = rr.bpc_table(grid, variants=["alibi"], lens=[L, 4 * L], modes=["sliding"])
    assert [(r["variant"], r["eval_len"]) for r in only] == [("alibi", 8), ("alibi", 32)]
    md = only.markdown(digits=2)
    assert md.splitlines()[0] == "| variant | eval_len | mode | mean | t95 | bootstrap95 | seeds |"
    assert "| alibi | 8 | sliding | 2.60 | [" in md and "| 2.59 / 2.60 / 2.61 |" in md


def test_baseline_table(grid):
    t = rr.baseline_table(grid)
    assert [r["context"] for r in t] == [0, 1, 2, 3, 4, 5]
    assert t[3]["bpc"] == 2.7063 and t[3]["bpc_every"] == 2.7163
    lo, hi = t[3]["bootstrap95"]
    assert lo < 2.7063 < hi


def test_context_use_table(grid):
    t = rr.context_use_table(grid, variants=["alibi"])
    assert [(r["context"], round(r["mean"], 2)) for r in t] == [(1, 3.67), (2, 3.13), (4, 2.7), (8, 2.74)]
    assert all(r["n_seeds"] == 3 for r in t)


def test_copy_probe_table_reads_the_positive_control(grid):
    t = rr.copy_probe_table(grid, condition="positive_control")
    got = {(r["variant"], r["window"]): (r["label"], r["interval_kind"]) for r in t}
    assert got[("rope", "L")] == ("copies", "bootstrap over windows")
    assert got[("rope", "2L")][0] == "worse with the first copy"
    assert got[("alibi", "8L")][0] == "no copying seen"
    assert got[("t5-8", "8L")][0] == "copies"
    text = rr.copy_probe_table(grid, condition="text")
    rope_L = next(r for r in text if (r["variant"], r["distance"]) == ("rope", 3))
    assert rope_L["interval_kind"] == "t95 over seeds" and rope_L["label"] == "no copying seen"
    assert rope_L["gain"] == pytest.approx(0.0) and rope_L["gains"] == [-0.002, 0.0, 0.002]
    learned_far = next(r for r in text if (r["variant"], r["distance"]) == ("learned", 59))
    assert learned_far["label"] == "cannot run" and "max_len" in learned_far["error"]
    assert learned_far["window"] == "8L"   # from the protocol's span and prefix: the row has no length
    assert len(rr.copy_probe_table(grid)) == len(t) + len(text)
    assert "| rope | positive_control | L | 3 | +0.400 |" in t.markdown(signed=["gain"])


def test_extension_table_names_zero_shot_and_fine_tunes(grid):
    t = rr.extension_table(grid)
    names = {r["name"] for r in t}
    assert names == {"zs:pi", "zs:ntk", "zs:yarn", "zs:yarn_no_temperature", "ft:control_at_L", "ft:none", "ft:pi",
                     "ft:ntk", "ft:yarn", "ft:yarn_s8"}
    yarn = next(r for r in t if (r["name"], r["eval_len"], r["mode"]) == ("zs:yarn", 16, "sliding"))
    assert yarn["temperature"] is True and yarn["finetune"] is None and yarn["mean"] == pytest.approx(2.55 + 0.2)
    s8 = next(r for r in t if r["name"] == "ft:yarn_s8")
    assert s8["factor"] == 8 and s8["finetune_len"] == 4 * L and s8["extension"] == "yarn"
    assert t.index(yarn) < t.index(s8)   # zero-shot first


def test_training_table(grid):
    t = rr.training_table(grid)
    roles = [r["role"] for r in t]
    assert roles.count("main") == 24 and roles.count("tune") == 24 and roles.count("positive_control") == 3
    chosen = [r for r in t if r["role"] == "tune" and r["chosen"]]
    assert len(chosen) == 8 and {r["lr"] for r in chosen} == {4e-3}


# --------------------------------------------------------------------------- orderings


def test_orderings_labels(grid):
    t = rr.orderings(grid, [
        ("rope", "alibi", L),                        # 0.05 lower in every seed and block
        ("alibi", "rope", L),                        # reversed
        ("rope", "ngram-3", L),                      # the count model: one number for every seed
        ("ngram-4", "rope", L),                      # the count model on the left: RoPE is lower
        ("zs:yarn", "zs:ntk", 4 * L, "nonoverlapping"),
        ("ft:yarn", "ft:control_at_L", 8 * L),
        ("t5-8", "alibi", L),                        # 0.03 lower in every seed
        ("learned", "rope", 2 * L),                  # the learned table has no row beyond L
    ])
    labels = [r["label"] for r in t]
    assert labels[:6] == [rr.HOLDS, rr.REVERSED, rr.HOLDS, rr.REVERSED, rr.HOLDS, rr.HOLDS]
    assert t[0]["diff"] == pytest.approx(-0.05) and t[0]["a_lower"] == 3 and t[0]["n_seeds"] == 3
    assert t[0]["diffs"] == pytest.approx([-0.05] * 3)
    assert t[0]["statement"] == "rope below alibi at n = 8 (sliding)"
    assert t[2]["diff"] == pytest.approx(2.55 - 2.7063)
    assert t[4]["mode"] == "nonoverlapping" and t[4]["diff"] == pytest.approx(-0.2)
    assert labels[6] == rr.HOLDS and t[6]["diff"] == pytest.approx(-0.03)
    assert labels[7] == rr.NOT_YET and "learned" in t[7]["note"]


def test_orderings_mixed_and_interval_crossing_zero(grid):
    g = copy.deepcopy(grid)
    for r in g["rows"]:
        if (r["variant"], r["eval_len"], r["mode"]) == ("sinusoidal", L, "sliding"):
            r["bpc"] = {0: 2.50, 1: 2.70, 2: 2.80}[r["seed"]]   # against randomized 2.64, 2.65, 2.66
    (row,) = rr.orderings(g, [("sinusoidal", "randomized", L)])
    assert row["a_lower"] == 1 and row["label"] == rr.INDISTINGUISHABLE
    lo, hi = row["t95"]
    assert lo < 0 < hi
    row = rr.orderings(g, [("sinusoidal", "randomized", L)], seed=3)[0]
    assert row["label"] == rr.INDISTINGUISHABLE


def test_orderings_not_seed_by_seed():
    # eight seeds: a is lower in seven by 0.1 and higher in one by 0.01; both intervals exclude 0
    grid = {"protocol": {"config": {"train_len": L}, "variants": [["rope", None], ["alibi", None]]}, "rows": []}
    for s in range(8):
        for v, b in (("rope", 2.5 + (0.11 if s == 7 else 0.0)), ("alibi", 2.6)):
            grid["rows"].append({"variant": v, "seed": s, "eval_len": L, "mode": "sliding", "bpc": b,
                                 "block_bpc": [b - 0.1, b, b + 0.1]})
    (row,) = rr.orderings(grid, [("rope", "alibi", L)])
    assert row["a_lower"] == 7 and row["n_seeds"] == 8 and row["label"] == rr.MIXED
    assert row["t95"][1] < 0 and row["blocks_bootstrap95"][1] < 0


def test_functions_leave_the_grid_unchanged(grid):
    before = copy.deepcopy(grid)
    rr.floors(grid)
    rr.bpc_table(grid)
    rr.orderings(grid, [("rope", "ngram-3", L)])
    rr.copy_probe_table(grid)
    rr.extension_table(grid)
    assert grid == before


# --------------------------------------------------------------------------- figures


def test_plot_context_use(grid, ax):
    out = rr.plot_context_use(ax, grid)
    assert out["drawn"] == [n for n in (rt.variant_name(*v) for v in rt.GRID_VARIANTS)]
    assert out["missing"] is None
    assert "the fall from k = 4 to 8" in out["alt"] and "alibi -0.040" in out["alt"] and "count models" in out["alt"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "5", "8"]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "count model" in labels
    assert not plotting.figure_problems(ax.figure)


def test_plot_loss_by_position_draws_the_predicted_breaks(grid, ax):
    out = rr.plot_loss_by_position(ax, grid)
    cfg = grid["protocol"]["config"]
    head = cfg["d_model"] // cfg["n_heads"]                        # the grid's heads: 8 of size 8
    assert out["predicted"]["rope"] == pytest.approx(rt.rope_break(L, head)[1])
    assert out["predicted"]["t5-128"] == 8.0 and out["predicted"]["t5-8"] is None
    assert "learned" in out["drawn"]
    breaks = [line for line in ax.get_lines() if line.get_label().endswith("predicted break")]
    assert sorted(line.get_label() for line in breaks) == ["rope: predicted break", "t5-128: predicted break"]
    assert "t5-8 (none: every bucket trained)" in out["alt"] and f"rope ({rt.rope_break(L, head)[1]:.1f})" in out["alt"]
    assert not plotting.figure_problems(ax.figure)


def test_plot_break_by_step(grid, ax):
    out = rr.plot_break_by_step(ax, grid, seed=1, variants=["rope", "alibi", "learned"])
    assert out["drawn"] == ["rope", "alibi"]     # the learned table has no 8L validation
    assert out["gap"]["rope"] == pytest.approx(1.125) and out["gap"]["alibi"] == 0.0
    assert "rope +1.12" in out["alt"] or "rope +1.13" in out["alt"]


def test_plot_extension_positions_draws_breaks_inside_the_window_only(grid, ax):
    out = rr.plot_extension_positions(ax, grid)
    assert out["drawn"] == ["pi", "ntk", "yarn", "yarn_no_temperature"] and out["window"] == 8 * L
    assert out["predicted"]["ntk"] == pytest.approx(62.83, abs=0.01)        # the README's prediction at s = 8 (head size 8)
    assert out["predicted"]["pi"] == pytest.approx(251.33, abs=0.01)
    assert out["predicted"]["yarn"] == pytest.approx(out["predicted"]["pi"])
    breaks = [line.get_label() for line in ax.get_lines() if line.get_label().endswith("predicted break")]
    assert breaks == ["ntk: predicted break"]
    assert "plain RoPE" in [line.get_label() for line in ax.get_lines()]
    assert "ntk at 62.8" in out["alt"] and "Predicted beyond the window: pi, yarn, yarn_no_temperature" in out["alt"]
    only = rr.plot_extension_positions(ax, grid, methods=["yarn"])
    assert only["drawn"] == ["yarn"] and not plotting.figure_problems(ax.figure)


# --------------------------------------------------------------------------- loss by position: the largest step


def test_loss_by_position_is_the_mean_over_seeds(grid):
    c = rr.loss_by_position(grid, "rope")
    assert (c["bin"], c["length"], c["n_seeds"], c["missing"]) == (2, 8 * L, 3, None)
    assert c["bpc"].shape == (4 * L,)
    assert c["bpc"][:5] == pytest.approx([LEVEL["rope"]] * 5) and c["bpc"][5:] == pytest.approx([LEVEL["rope"] + 1.0] * 27)
    learned = rr.loss_by_position(grid, "learned")             # the learned table stops at L
    assert learned["length"] == L and learned["bpc"].shape == (L // 2,)
    ntk = rr.loss_by_position(grid, "zs:ntk")                   # seeds shifted by -0.01, 0, +0.01: the mean is seed 1
    assert ntk["bpc"][:7] == pytest.approx([2.55] * 7) and ntk["bpc"][7] == pytest.approx(3.55)


def test_loss_by_position_averages_the_longest_curves_only(grid):
    g = copy.deepcopy(grid)
    g["runs"].append({"variant": "rope", "seed": 9, "loss_by_position": {"length": 4 * L, "bin": 2, "bpc": [9.0] * 16}})
    c = rr.loss_by_position(g, "rope")
    assert c["n_seeds"] == 3 and c["bpc"] == pytest.approx(rr.loss_by_position(grid, "rope")["bpc"])


def test_largest_step_against_each_prediction(grid):
    cfg = grid["protocol"]["config"]
    half = rt.rope_break(L, cfg["d_model"] // cfg["n_heads"])[1]             # 31.4: bin 30-31
    rope = rr.largest_step(grid, "rope")                                     # the made-up RoPE steps into 10-11
    assert rope["into"] == (10, 11) and rope["step"] == pytest.approx(1.0)
    assert rope["predicted"] == pytest.approx(half) and rope["expected"] == (30, 33)
    assert rope["bins_off"] == -10 and rope["holds"] is False and rope["verdict"] == "refuted: 10 bins early"
    t5 = rr.largest_step(grid, "t5-128")                                     # predicted 8 (bin 8-9); steps into 10-11
    assert t5["predicted"] == 8.0 and t5["expected"] == (8, 11) and t5["verdict"] == "holds" and t5["bins_off"] == 0
    strict = rr.largest_step(grid, "t5-128", late=0)
    assert strict["expected"] == (8, 9) and strict["bins_off"] == 1 and strict["verdict"] == "refuted: 1 bin late"
    assert rr.largest_step(grid, "t5-8")["verdict"] == "no prediction"     # every bucket trained
    alibi = rr.largest_step(grid, "alibi")
    assert alibi["predicted"] is None and alibi["holds"] is None and alibi["into"] == (2, 3)   # flat: the first tie
    ntk = rr.largest_step(grid, "zs:ntk")                                    # predicted 62.8, steps into 14-15
    assert ntk["predicted"] == pytest.approx(62.83, abs=0.01) and ntk["into"] == (14, 15)
    assert ntk["verdict"] == "refuted: 24 bins early"
    far = rr.largest_step(grid, "zs:pi", late=3)                             # 251.3: beyond the window of 64
    assert far["expected"] == (250, 257) and far["bins_off"] == -118


def test_largest_step_late_is_counted_past_the_accepted_bins(grid):
    g = copy.deepcopy(grid)
    for r in g["runs"]:
        if r["variant"] == "t5-128":
            r["loss_by_position"]["bpc"] = [2.5] * 10 + [3.5] * 22           # steps into bin 10 (20-21); predicted bin 4
    assert rr.largest_step(g, "t5-128")["verdict"] == "refuted: 5 bins late"
    assert rr.largest_step(g, "t5-128", late=6)["verdict"] == "holds"


def test_largest_step_without_a_curve_says_why(grid):
    g = copy.deepcopy(grid)
    g["extension_runs"] = []
    out = rr.largest_step(g, "zs:ntk")
    assert out["into"] is None and out["holds"] is None and "'extension_runs'" in out["missing"]
    assert out["verdict"] == out["missing"] and out["predicted"] == pytest.approx(62.83, abs=0.01)
    for r in g["runs"]:
        r["loss_by_position"] = {"length": 2, "bin": 2, "bpc": [2.6]}
    assert "one bin" in rr.largest_step(g, "rope")["missing"]


def test_largest_step_leaves_the_grid_unchanged(grid):
    before = copy.deepcopy(grid)
    rr.largest_step(grid, "rope")
    rr.largest_step(grid, "zs:ntk", late=0)
    assert grid == before


# --------------------------------------------------------------------------- the shipped file (as the grid has written it)

TABLES = [rr.bpc_table, rr.context_use_table, rr.copy_probe_table, rr.extension_table, rr.training_table]
PLOTS = [rr.plot_context_use, rr.plot_loss_by_position, rr.plot_break_by_step, rr.plot_extension_positions]


@pytest.mark.parametrize("fn", TABLES, ids=lambda f: f.__name__)
def test_missing_sections_of_the_shipped_grid_give_a_message(shipped, fn):
    if shipped.get("rows"):
        pytest.skip("the grid has rows now")
    t = fn(shipped)
    assert t == [] and t.missing.startswith("not in the results yet: the grid has no")
    assert "units run: baselines" in t.missing and t.markdown() == f"*{t.missing}*"


@pytest.mark.parametrize("fn", PLOTS, ids=lambda f: f.__name__)
def test_plots_of_the_shipped_grid_say_what_is_missing(shipped, fn, ax):
    if shipped.get("rows"):
        pytest.skip("the grid has rows now")
    out = fn(ax, shipped)
    assert out["drawn"] == [] and "not in the results yet" in out["missing"]
    assert any("not in the results yet" in t.get_text() for t in ax.texts)


def test_floors_and_orderings_of_the_shipped_grid(shipped):
    if shipped.get("rows"):
        pytest.skip("the grid has rows now")
    f = rr.floors(shipped)
    assert f["ngram3"] == pytest.approx(2.706, abs=5e-4) and f["ngram4"] == pytest.approx(2.588, abs=5e-4)
    assert f["met"] is None and f["best"] is None and "'rows'" in f["missing"]
    (row,) = rr.orderings(shipped, [("rope", "ngram-3", L)])
    assert row["label"] == rr.NOT_YET
    assert [r["context"] for r in rr.baseline_table(shipped)] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("fn", TABLES + [rr.baseline_table], ids=lambda f: f.__name__)
def test_every_table_reads_the_shipped_grid_as_it_stands(shipped, fn):
    """Whatever units the shipped file holds (it grows unit by unit), a table has rows or says what is missing."""
    t = fn(shipped)
    assert len(t) > 0 or t.missing.startswith("not in the results yet")
    assert t.markdown()


@pytest.mark.parametrize("fn", PLOTS, ids=lambda f: f.__name__)
def test_every_plot_reads_the_shipped_grid_as_it_stands(shipped, fn, ax):
    out = fn(ax, shipped)
    assert out["drawn"] or "not in the results yet" in out["missing"]
    assert out["alt"] and not plotting.figure_problems(ax.figure)


def test_floors_of_the_shipped_grid_as_it_stands(shipped):
    f = rr.floors(shipped)
    assert f["ngram3"] == pytest.approx(2.706, abs=5e-4) and f["ngram4"] == pytest.approx(2.588, abs=5e-4)
    assert f["met"] in (None, True, False)
    for v in f["variants"]:
        assert v["n_seeds"] >= 1 and v["met"] in (True, False)


# --------------------------------------------------------------------------- bad input

_G = make_grid()
_NOT_GRID = {"rows": []}


def _ax():
    return plt.subplots()[1]


CASES = [
    ("floors grid list", lambda: rr.floors([]), "grid"),
    ("floors grid without protocol", lambda: rr.floors(_NOT_GRID), "grid"),
    ("floors threshold str", lambda: rr.floors(_G, threshold="0.02"), "threshold"),
    ("floors threshold negative", lambda: rr.floors(_G, threshold=-0.1), "threshold"),
    ("floors margin nan", lambda: rr.floors(_G, margin=float("nan")), "margin"),
    ("bpc_table grid None", lambda: rr.bpc_table(None), "grid"),
    ("bpc_table variants unknown", lambda: rr.bpc_table(_G, variants=["t5"]), "variants"),
    ("bpc_table variants str", lambda: rr.bpc_table(_G, variants="rope"), "variants"),
    ("bpc_table lens str", lambda: rr.bpc_table(_G, lens="8"), "lens"),
    ("bpc_table lens 0", lambda: rr.bpc_table(_G, lens=[0]), "lens"),
    ("bpc_table modes unknown", lambda: rr.bpc_table(_G, modes=["strided"]), "modes"),
    ("bpc_table seed -1", lambda: rr.bpc_table(_G, seed=-1), "seed"),
    ("baseline_table grid str", lambda: rr.baseline_table("realtext.json"), "grid"),
    ("baseline_table seed float", lambda: rr.baseline_table(_G, seed=0.5), "seed"),
    ("context_use_table variants unknown", lambda: rr.context_use_table(_G, variants=["rope", "xl"]), "variants"),
    ("context_use_table grid int", lambda: rr.context_use_table(3), "grid"),
    ("copy_probe_table condition unknown", lambda: rr.copy_probe_table(_G, condition="copy"), "condition"),
    ("copy_probe_table grid without protocol", lambda: rr.copy_probe_table(_NOT_GRID), "grid"),
    ("extension_table seed str", lambda: rr.extension_table(_G, seed="0"), "seed"),
    ("extension_table grid list", lambda: rr.extension_table([_G]), "grid"),
    ("training_table grid None", lambda: rr.training_table(None), "grid"),
    ("orderings pairs empty", lambda: rr.orderings(_G, []), "pairs"),
    ("orderings pairs str", lambda: rr.orderings(_G, "rope<alibi"), "pairs"),
    ("orderings pairs short", lambda: rr.orderings(_G, [("rope", "alibi")]), "pairs[0]"),
    ("orderings pairs unknown name", lambda: rr.orderings(_G, [("rope", "xl", 8)]), "pairs[0]"),
    ("orderings pairs same name", lambda: rr.orderings(_G, [("rope", "rope", 8)]), "pairs[0]"),
    ("orderings pairs length 0", lambda: rr.orderings(_G, [("rope", "alibi", 0)]), "pairs[0]"),
    ("orderings pairs mode", lambda: rr.orderings(_G, [("rope", "alibi", 8, "strided")]), "pairs[0]"),
    ("orderings pairs two count models", lambda: rr.orderings(_G, [("ngram-3", "ngram-4", 8)]), "pairs[0]"),
    ("orderings mode", lambda: rr.orderings(_G, [("rope", "alibi", 8)], mode="both"), "mode"),
    ("orderings seed -1", lambda: rr.orderings(_G, [("rope", "alibi", 8)], seed=-1), "seed"),
    ("orderings grid None", lambda: rr.orderings(None, [("rope", "alibi", 8)]), "grid"),
    ("plot_context_use ax", lambda: rr.plot_context_use(None, _G), "ax"),
    ("plot_context_use variants unknown", lambda: rr.plot_context_use(_ax(), _G, variants=["xl"]), "variants"),
    ("plot_context_use grid", lambda: rr.plot_context_use(_ax(), []), "grid"),
    ("plot_loss_by_position ax", lambda: rr.plot_loss_by_position("ax", _G), "ax"),
    ("plot_loss_by_position grid", lambda: rr.plot_loss_by_position(_ax(), _NOT_GRID), "grid"),
    ("plot_loss_by_position variants str", lambda: rr.plot_loss_by_position(_ax(), _G, variants="rope"), "variants"),
    ("plot_break_by_step ax", lambda: rr.plot_break_by_step(None, _G), "ax"),
    ("plot_break_by_step seed -1", lambda: rr.plot_break_by_step(_ax(), _G, seed=-1), "seed"),
    ("plot_break_by_step variants unknown", lambda: rr.plot_break_by_step(_ax(), _G, variants=["t5-32"]), "variants"),
    ("plot_extension_positions ax", lambda: rr.plot_extension_positions([], _G), "ax"),
    ("plot_extension_positions methods unknown", lambda: rr.plot_extension_positions(_ax(), _G, methods=["rope"]),
     "methods"),
    ("plot_extension_positions methods str", lambda: rr.plot_extension_positions(_ax(), _G, methods="ntk"), "methods"),
    ("plot_extension_positions grid", lambda: rr.plot_extension_positions(_ax(), None), "grid"),
    ("loss_by_position grid", lambda: rr.loss_by_position([], "rope"), "grid"),
    ("loss_by_position name unknown", lambda: rr.loss_by_position(_G, "t5"), "name"),
    ("loss_by_position name int", lambda: rr.loss_by_position(_G, 0), "name"),
    ("loss_by_position name fine-tune", lambda: rr.loss_by_position(_G, "ft:yarn"), "name"),
    ("largest_step grid", lambda: rr.largest_step(None, "rope"), "grid"),
    ("largest_step name unknown", lambda: rr.largest_step(_G, "zs:dynamic"), "name"),
    ("largest_step name list", lambda: rr.largest_step(_G, ["rope"]), "name"),
    ("largest_step late -1", lambda: rr.largest_step(_G, "rope", late=-1), "late"),
    ("largest_step late float", lambda: rr.largest_step(_G, "rope", late=0.5), "late"),
    ("first_gap grid", lambda: rr.first_gap(None, "rope", "alibi"), "grid"),
    ("first_gap name unknown", lambda: rr.first_gap(_G, "zs:dynamic", "alibi"), "name"),
    ("first_gap other unknown", lambda: rr.first_gap(_G, "rope", "ft:yarn"), "other"),
    ("first_gap other int", lambda: rr.first_gap(_G, "rope", 3), "other"),
    ("first_gap gap negative", lambda: rr.first_gap(_G, "rope", "alibi", gap=-0.1), "gap"),
    ("first_gap gap str", lambda: rr.first_gap(_G, "rope", "alibi", gap="0.1"), "gap"),
    ("ReportRows markdown columns str", lambda: rr.bpc_table(_G).markdown("variant"), "columns"),
    ("ReportRows markdown columns unknown", lambda: rr.bpc_table(_G).markdown(["bpc"]), "columns"),
    ("ReportRows markdown digits -1", lambda: rr.bpc_table(_G).markdown(digits=-1), "digits"),
    ("ReportRows markdown signed str", lambda: rr.bpc_table(_G).markdown(signed="mean"), "signed"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_naming_the_argument(case):
    _, call, name = case
    try:
        with pytest.raises((TypeError, ValueError)) as err:
            call()
    finally:
        plt.close("all")
    assert str(err.value).startswith(name) or f"{name} " in str(err.value) or f"{name}:" in str(err.value), str(err.value)


def test_every_public_callable_has_a_bad_input_case():
    probed = {c[0].split()[0] for c in CASES}
    public = {n for n in rr.__all__ if callable(getattr(rr, n)) and inspect.isfunction(getattr(rr, n))} | {"ReportRows"}
    assert public <= probed, sorted(public - probed)


def test_first_gap_finds_the_first_bin_past_L_above_the_gap(grid):
    g = rr.first_gap(grid, "rope", "alibi", gap=0.1)
    a, b = rr.loss_by_position(grid, "rope")["bpc"], rr.loss_by_position(grid, "alibi")["bpc"]
    i = g["into"][0] // g["bin"]
    assert a[i] - b[i] == pytest.approx(g["difference"]) and g["difference"] > 0.1
    L = grid["protocol"]["config"]["train_len"]
    assert all(a[j] - b[j] <= 0.1 for j in range(L // g["bin"], i))
    assert rr.first_gap(grid, "rope", "alibi", gap=100.0)["into"] is None

