"""Chapter 6's mechanism checks (issue 30, item 4): each against synthetic inputs and against the saved grid rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.book import synthetic as S
from posenc.book.resources import resource_path


@pytest.fixture(scope="module")
def grid():
    return S.load_grid()


def _rows(curves, *, task="offset_copy", scheme="rope", variant="plain", acc=1.0):
    """Saved-row look-alikes: one best checkpoint per curve (seed i, one rate)."""
    return {"rows": [{"task": task, "scheme": scheme, "variant": variant, "seed": i, "lr": 1e-3, "checkpoint": "best",
                      "phase": "A", "acc_1x": acc, "heldout_loss": 0.1, "beyond_2x": float(np.mean(c[16:32])),
                      "beyond_4x": float(np.mean(c[16:])), "pos_4x": list(c)} for i, c in enumerate(curves)]}


# --------------------------------------------------------------------------- the protocol of a results file


def test_grid_protocol_reads_the_stored_config(grid):
    p = S.grid_protocol(grid)
    assert p == S.GridProtocol() and p.d_model // p.n_heads == 8
    assert S.grid_protocol({"rows": []}) == S.GridProtocol()
    with pytest.raises(ValueError, match="config"):
        S.grid_protocol({"rows": [], "config": {"heads": 4}})
    with pytest.raises(ValueError, match="config"):
        S.grid_protocol({"rows": [], "config": {"d_model": -3}})
    with pytest.raises(TypeError, match="config"):
        S.grid_protocol({"rows": [], "config": [16]})
    with pytest.raises(TypeError, match="source"):
        S.grid_protocol(42)


@pytest.mark.parametrize("name, steps", [("alternatives_v2_B.json", 5000), ("alternatives_v2_C.json", 2000),
                                         ("alternatives_v2_D.json", 2000)])
def test_grid_protocol_reads_every_phase_file(name, steps):
    # each phase stores its own rule (and C/D their extra seeds) beside the settings
    p = S.grid_protocol(resource_path(name))
    assert p.steps == steps and p.d_model == S.GridProtocol().d_model and p.lrs == S.GridProtocol().lrs


# --------------------------------------------------------------------------- RoPE's aliases


def test_alias_table_follows_the_model():
    w = S.rope_omegas()
    assert np.allclose(w, [1, 0.1, 0.01, 0.001])
    assert np.allclose(S.rope_omegas(S.GridProtocol(n_heads=2)), 10000.0 ** (-np.arange(8) / 8))
    fast = [a for a in S.rope_alias_table(3) if a["pair"] == 0]
    assert [a["position"] for a in fast] == [9, 16, 22, 28, 34, 41, 47, 53, 60]
    assert all(abs(a["gaps"][0]) < 0.5 for a in fast)  # the nearest integer distance
    # with BOS the distance 16 (to the BOS token's position) occurs in training
    assert [a["trained"] for a in S.rope_alias_table(3, bos=True) if a["pair"] == 0][:2] == [True, True]
    # base 100 adds the pair 0.316 (period 19.9): its first alias of 3 is at 23
    extra = [a["position"] for a in S.rope_alias_table(3, base=100.0) if a["pair"] == 1]
    assert extra == [23, 43, 63]


@pytest.mark.parametrize("bad, err", [({"offset": -1}, ValueError), ({"offset": 2.5}, TypeError),
                                      ({"base": 1.0}, ValueError), ({"bos": 1}, TypeError),
                                      ({"protocol": {"d_model": 32}}, TypeError)])
def test_alias_table_refuses_bad_input(bad, err):
    kw = {"offset": 3, **bad}
    with pytest.raises(err, match=next(iter(bad))):
        S.rope_alias_table(kw.pop("offset"), **kw)


def test_rope_omegas_refuses_odd_head_width():
    with pytest.raises(ValueError, match="even"):
        S.rope_omegas(S.GridProtocol(d_model=36, n_heads=4))


def test_curve_drops_finds_cliffs_not_slopes_or_noise():
    rng = np.random.default_rng(0)
    cliff = np.r_[np.ones(41), np.full(6, 0.3), np.full(17, 0.07)] + rng.normal(0, 0.02, 64)
    assert S.curve_drops(cliff, 16) == [41, 47]
    assert S.curve_drops(np.linspace(1, 0, 64), 16) == []
    assert S.curve_drops(1 + rng.normal(0, 0.02, 64), 16) == []
    with_gaps = [None, None, None] + [1.0] * 13 + [0.06] * 48
    assert S.curve_drops(with_gaps, 16) == [16]


@pytest.mark.parametrize("bad, err, name", [(np.ones((2, 64)), ValueError, "curve"), ("abc", ValueError, "curve")])
def test_curve_drops_refuses_bad_curves(bad, err, name):
    with pytest.raises((ValueError, TypeError)):
        S.curve_drops(bad, 16)


def test_curve_drops_refuses_bad_settings():
    with pytest.raises(ValueError, match="drop"):
        S.curve_drops([1.0] * 20, 16, drop=0)
    with pytest.raises(ValueError, match="start"):
        S.curve_drops([1.0] * 20, 0)


def test_alias_check_on_synthetic_trials():
    at_alias = np.r_[np.ones(41), np.full(6, 0.3), np.full(17, 0.07)]
    elsewhere = np.r_[np.ones(38), np.full(26, 0.1)]
    c = S.rope_alias_check(_rows([at_alias, at_alias, elsewhere]))
    assert c["drops"] == [[41, 47], [41, 47], [38]]
    assert c["matched"] == [True, True, False] and (c["k"], c["n"]) == (2, 3)
    assert c["counts"] == {38: 1, 41: 2, 47: 2}
    assert c["silent"] == [16, 22, 28, 34, 53, 60]
    assert math.isclose(c["chance"], 8 / 48)
    assert S.rope_alias_check(_rows([elsewhere]), tolerance=4)["k"] == 1


def test_alias_check_refuses_tasks_without_a_fixed_distance():
    with pytest.raises(ValueError, match="task"):
        S.rope_alias_check({"rows": []}, "far_retrieve")
    with pytest.raises(ValueError, match="variant"):
        S.rope_alias_check({"rows": []}, "offset_copy", "both")


def test_saved_rope_cliffs_fall_on_aliases(grid):
    plain = S.rope_alias_check(grid, "offset_copy", "plain")
    assert plain["n"] >= 10 and plain["counts"].get(41, 0) >= plain["n"] - 1
    assert all(plain["counts"].get(p, 0) == 0 for p in (16, 22, 28))  # the earlier untrained aliases stay silent
    bos = S.rope_alias_check(grid, "offset_copy", "bos")
    assert bos["counts"].get(41, 0) + bos["counts"].get(47, 0) >= bos["n"]
    for variant in ("plain", "bos"):
        long = S.rope_alias_check(grid, "long_offset_copy", variant)
        assert long["n"] >= 10 and long["counts"] == {16: long["n"]} and long["k"] == long["n"]


# --------------------------------------------------------------------------- horizons


def test_group_horizons_on_synthetic_trials():
    curves = [np.r_[np.ones(41), np.full(23, 0.2)], np.ones(64), np.r_[np.ones(20), np.full(44, 0.5)]]
    h = S.group_horizons(_rows(curves), "offset_copy", "rope", "plain")
    assert h["horizons"].tolist() == [41, 64, 20] and h["median"] == 41.0
    assert (h["reach_2x"], h["reach_4x"], h["n"]) == (2, 1, 3)
    assert math.isclose(h["beyond_4x"], np.mean([np.mean(c[16:]) for c in curves]))
    assert S.group_horizons(_rows(curves), "offset_copy", "rope", "plain", threshold=0.1)["reach_4x"] == 3


def test_group_horizons_refuse_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        S.group_horizons({"rows": []}, "offset_copy", "rope", "plain", threshold=1.5)
    with pytest.raises(ValueError, match="scheme"):
        S.group_horizons({"rows": []}, "offset_copy", "learned", "plain")
    with pytest.raises(ValueError, match="checkpoint"):
        S.group_horizons({"rows": []}, "offset_copy", "rope", "plain", checkpoint="last")


def test_saved_horizons(grid):
    rope = S.group_horizons(grid, "offset_copy", "rope", "plain")
    assert rope["n"] >= 10 and 40 <= rope["median"] <= 48 and rope["reach_2x"] == rope["n"] and rope["reach_4x"] == 0
    shaw = S.group_horizons(grid, "offset_copy", "shaw", "plain")
    assert shaw["reach_4x"] == shaw["n"] >= 10
    long = S.group_horizons(grid, "long_offset_copy", "rope", "plain")
    assert long["median"] == 16
    table = S.horizon_table(grid)
    assert len(table) == len(S.PHASE_A_GROUPS)
    assert sum(r["n"] > 0 for r in table) >= 30


# --------------------------------------------------------------------------- sinusoidal


def test_similarity_is_aligned_with_task_positions():
    plain = S.sinusoidal_similarity_check({"rows": []}, variant="plain")["similarity"]
    bos = S.sinusoidal_similarity_check({"rows": []}, variant="bos")["similarity"]
    assert plain.shape == bos.shape == (64,)
    assert np.allclose(plain[:16], 1) and plain[16] < 1
    assert np.allclose(bos[:16], 1)  # with BOS task position 15 is model position 16, trained
    assert np.allclose(bos[16:], S.sinusoidal_novelty(65, 17)[17:])


def test_similarity_check_correlates_per_trial():
    sim = S.sinusoidal_similarity_check({"rows": []})["similarity"]
    follows = np.r_[np.ones(16), sim[16:]]
    against = np.r_[np.ones(16), 1 - sim[16:]]
    c = S.sinusoidal_similarity_check(_rows([follows, follows, against], task="far_retrieve", scheme="sinusoidal"))
    assert np.allclose(c["correlations"], [1, 1, -1]) and c["positive"] == 2 and c["n"] == 3
    assert math.isclose(c["pooled"], 1.0)


def test_saved_sinusoidal_accuracy_follows_similarity(grid):
    for variant in ("plain", "bos"):
        c = S.sinusoidal_similarity_check(grid, "far_retrieve", variant)
        assert c["n"] >= 10 and c["positive"] == c["n"] and c["interval"][0] > 0.3


# --------------------------------------------------------------------------- randomized positions


def test_eval_positions_are_the_scored_sequences():
    e = S.eval_positions("offset_copy", "bos", 32, 1, S.GridProtocol(eval_size=128))
    assert e["positions"].shape == (128, 33) and e["mask"].shape == (128, 32)
    assert bool((e["positions"][:, 1:] > e["positions"][:, :-1]).all())
    assert abs(e["spacing"] - 257 / 34) < 0.3
    with pytest.raises(ValueError, match="length"):
        S.eval_positions("offset_copy", "bos", 0, 1)
    with pytest.raises(TypeError, match="protocol"):
        S.eval_positions("offset_copy", "bos", 16, 1, protocol={"eval_size": 4})


def test_saved_randomized_fails_at_seen_positions(grid):
    c = S.randomized_seen_check(grid, "offset_copy", "bos")
    assert np.allclose(c["spacing"], c["spacing_formula"], rtol=0.02)
    # the 15.1 / 7.8 / 3.9 at 16 / 32 / 64 tokens (measured 15.06 / 7.78 / 3.95 without BOS)
    assert np.allclose(S.randomized_seen_check(grid, "offset_copy", "plain")["spacing"], [15.1, 7.8, 3.95], atol=0.06)
    assert c["n"] >= 5 and c["seen"].shape == (c["n"], 3)
    assert c["mean"][0] > 0.95 and c["mean"][2] < c["mean"][1] < c["mean"][0] - 0.1 and c["below"] == c["n"]
    # fixed retrieve with BOS keeps its seen positions at every spacing
    assert S.randomized_seen_check(grid, "fixed_retrieve", "bos")["mean"].min() > 0.95


def test_seen_positions_recovered_exactly(grid):
    # the mask counts reproduce the saved beyond_4x from the saved 4x curve: the weighting is the scorer's
    rows = [r for r in grid["rows"] if (r["task"], r["scheme"], r["variant"], r["checkpoint"]) ==
            ("offset_copy", "randomized", "bos", "best")][:3]
    for r in rows:
        m = S.eval_positions("offset_copy", "bos", 64, r["seed"])["mask"]
        counts = m[:, 16:].sum(dim=0).double().numpy()
        curve = np.array(r["pos_4x"][16:], dtype=float)
        assert math.isclose((curve * counts).sum() / counts.sum(), r["beyond_4x"], abs_tol=2e-4)


def test_randomized_check_refuses_bad_input():
    with pytest.raises(ValueError, match="gap"):
        S.randomized_seen_check({"rows": []}, gap=2)
    with pytest.raises(ValueError, match="task"):
        S.randomized_seen_check({"rows": []}, "copy")


# --------------------------------------------------------------------------- one trial's weights


_TINY = S.GridProtocol(steps=4, loss_every=2, score_every=4, eval_size=4, heldout_size=4, batch_size=4, warmup=0)


def test_checkpoint_is_the_grids_trial():
    c = S.train_checkpoint("offset_copy", "rope", "plain", 1, 3e-3, protocol=_TINY)
    ref = S.run_grid_trial("offset_copy", "rope", "plain", 1, 3e-3, _TINY)
    np.testing.assert_equal(c["best"], ref["best"])  # nan (unscored positions) equal to nan
    assert c["best_step"] == ref["best_step"]
    # the returned weights are the best checkpoint's: scoring them again gives the saved scores
    again = S.score_model(c["model"], "offset_copy", "rope", _TINY, False, 1, per_position=True)
    np.testing.assert_equal(again, ref["best"])
    saved = {"rows": [{"task": "offset_copy", "scheme": "rope", "variant": "plain", "seed": 1, "lr": 3e-3,
                       "checkpoint": "best", "phase": "A", "heldout_loss": round(ref["best_loss"], 4),
                       **{k: round(ref["best"][k], 4) for k in ("acc_1x", "beyond_2x", "beyond_4x")}}]}
    c = S.train_checkpoint("offset_copy", "rope", "plain", 1, 3e-3, protocol=_TINY, saved=saved)
    assert c["matches"] is True and set(c["differences"]) == {"acc_1x", "beyond_2x", "beyond_4x", "heldout_loss"}
    assert S.train_checkpoint("offset_copy", "rope", "plain", 2, 3e-3, protocol=_TINY, saved=saved)["saved"] is None


@pytest.mark.parametrize("args, name", [(("copy", "rope", "plain", 0, 1e-3), "task"),
                                        (("offset_copy", "learned", "plain", 0, 1e-3), "scheme"),
                                        (("offset_copy", "rope", "plain", -1, 1e-3), "seed"),
                                        (("offset_copy", "rope", "plain", 0, 0.0), "lr")])
def test_checkpoint_refuses_bad_input(args, name):
    with pytest.raises((ValueError, TypeError), match=name):
        S.train_checkpoint(*args, protocol=_TINY)


# --------------------------------------------------------------------------- figures


def test_figures_draw_the_saved_checks_for_the_column(grid):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from posenc.book.plotting import COLUMN_WIDTH_IN, figure_problems

    fig, axes = plt.subplots(4, 1, figsize=(COLUMN_WIDTH_IN, 14), constrained_layout=True)
    a = S.plot_alias_check(axes[0], S.rope_alias_check(grid, "offset_copy", "plain"))
    assert "41" in a["title"] and 41 in a["aliases"] and len(a["drops"]) >= 10
    h = S.plot_horizons(axes[1], [S.group_horizons(grid, "offset_copy", s, "plain") for s in ("rope", "shaw", "none")])
    assert h["labels"][1].startswith("shaw, plain: 12/12 to 2L") and h["labels"][2].endswith("no fitting trial")
    assert 40 <= h["medians"][0] <= 48
    s = S.plot_similarity_check(axes[2], S.sinusoidal_similarity_check(grid, "far_retrieve", "plain"))
    assert s["x"].size == s["y"].size > 40 and "r = " in s["title"]
    r = S.plot_seen_check(axes[3], S.randomized_seen_check(grid, "offset_copy", "bos"))
    assert "16 / 32 / 64 tokens" in r["title"]
    fig.canvas.draw()
    assert figure_problems(fig) == []
    plt.close(fig)


def test_figures_refuse_what_is_not_their_check():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    with pytest.raises(TypeError, match="check"):
        S.plot_alias_check(ax, [1, 2])
    with pytest.raises(ValueError, match="check"):
        S.plot_seen_check(ax, S.rope_alias_check({"rows": []}))
    with pytest.raises(TypeError, match="ax"):
        S.plot_similarity_check(None, S.sinusoidal_similarity_check({"rows": []}))
    with pytest.raises(ValueError, match="horizons"):
        S.plot_horizons(ax, [{"task": "offset_copy"}])
    plt.close(fig)


# --------------------------------------------------------------------------- a trained RoPE head's q . R(d) k


def _rope_model(bos=False):
    p = S.GridProtocol(eval_size=16)
    with S.seeded(3):
        return p, p.run_config("bos" if bos else "plain", 1e-3).model("rope")


def test_head_profile_is_q_rotated_k_by_distance():
    import torch

    p, m = _rope_model()
    prof = S.rope_head_profile(m, protocol=p)
    # recompute by hand: interleaved pairs x0 + i x1, ... of a query at t and a key at t - d give Re(q conj(k) e^{i omega d})
    g, h = S._eval_generators(0, 16)
    x, _, _, _ = S.grid_batch("offset_copy", "rope", p, False, 16, 16, g, h)
    seen = {}
    hook = m.blocks[-1].attn.register_forward_pre_hook(lambda mod, args: seen.setdefault("x", args[0]))
    with torch.no_grad():
        m(x)
    hook.remove()
    a = m.blocks[-1].attn
    q = a._heads(a.w_q(seen["x"]), 8)[:, :, 3:].mean(dim=(0, 2)).detach().double().numpy()
    k = a._heads(a.w_k(seen["x"]), 8).mean(dim=(0, 2)).detach().double().numpy()
    w = S.rope_omegas()
    qc, kc = q[:, 0::2] + 1j * q[:, 1::2], k[:, 0::2] + 1j * k[:, 1::2]
    d = np.arange(64)
    manual = np.real((qc[:, None, :] * np.conj(kc[:, None, :])) * np.exp(1j * w[None, None, :] * d[None, :, None])).sum(-1)
    assert np.allclose(prof["scores"], manual / math.sqrt(8), atol=1e-4)
    assert prof["aliases"] == [16, 22, 28, 34, 41, 47, 53, 60]
    assert prof["alias_scores"].shape == (4, 8) and np.allclose(prof["selectivity"], prof["target"] - prof["trained_max"])


def test_head_profile_rivals_follow_the_margin():
    p, m = _rope_model(bos=True)
    prof = S.rope_head_profile(m, "long_offset_copy", "bos", layer=0, margin=100.0, protocol=p)
    assert all(r == [0, 1, 2, 3] for r in prof["rivals"]) and prof["predicted_drop"] == prof["aliases"][0] == 23
    tight = S.rope_head_profile(m, "long_offset_copy", "bos", layer=0, margin=0.0, protocol=p)
    assert all(len(r) <= 4 for r in tight["rivals"])


@pytest.mark.parametrize("kw, err, name", [({"layer": 2}, ValueError, "layer"), ({"layer": 1.0}, ValueError, "layer"),
                                           ({"margin": -1.0}, ValueError, "margin"), ({"task": "far_retrieve"}, ValueError, "task"),
                                           ({"seed": -2}, ValueError, "seed")])
def test_head_profile_refuses_bad_input(kw, err, name):
    p, m = _rope_model()
    with pytest.raises(err, match=name):
        S.rope_head_profile(m, protocol=p, **kw)


def test_head_profile_needs_a_rope_model():
    p = S.GridProtocol(eval_size=4)
    with S.seeded(0):
        m = p.run_config("plain", 1e-3).model("alibi")
    with pytest.raises(ValueError, match="model"):
        S.rope_head_profile(m, protocol=p)
    with pytest.raises(ValueError, match="model"):
        S.rope_head_profile("rope", protocol=p)


def test_head_profile_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p, m = _rope_model()
    fig, ax = plt.subplots()
    out = S.plot_head_profile(ax, S.rope_head_profile(m, protocol=p))
    assert out["relative"].shape == (4, 64) and np.allclose(out["relative"][:, 3], 0)
    assert out["title"].startswith("Trained RoPE heads, layer 2, offset copy, plain")
    with pytest.raises(ValueError, match="profile"):
        S.plot_head_profile(ax, {"scores": 1})
    plt.close(fig)


# --------------------------------------------------------------------------- T5's buckets and NoPE + BOS's feature


def test_t5_untrained_buckets_keep_their_initial_values():
    c = S.train_checkpoint("offset_copy", "t5", "plain", 0, 1e-2, protocol=_TINY)
    check = S.t5_bucket_check(c["model"], 0, protocol=_TINY)
    assert check["predicted"] == list(range(16, 32))
    assert check["unchanged"] == check["predicted"]  # every reached bucket moved, no other did
    assert check["bias"].shape == (4, 64) and check["trained_bias"].shape == (4, 16)
    assert np.allclose(check["bias"][:, 16:], check["initial"][S.t5_buckets()["bucket"][16:]].T)
    bos = S.t5_bucket_check(S.train_checkpoint("offset_copy", "t5", "bos", 0, 1e-2, protocol=_TINY)["model"], 0,
                            "bos", protocol=_TINY)
    assert bos["unchanged"] == bos["predicted"] == list(range(17, 32))  # with BOS distance 16 is trained


def test_t5_check_refuses_bad_input():
    p = S.GridProtocol()
    with S.seeded(0):
        m = p.run_config("plain", 1e-3).model("t5")
        other = p.run_config("plain", 1e-3).model("rope")
    with pytest.raises(ValueError, match="model"):
        S.t5_bucket_check(other, 0)
    with pytest.raises(ValueError, match="seed"):
        S.t5_bucket_check(m, -1)
    with pytest.raises(ValueError, match="variant"):
        S.t5_bucket_check(m, 0, "both")


def test_bos_probe_reads_one_over_t_plus_two():
    p = S.GridProtocol(eval_size=32)
    with S.seeded(0):
        m = p.run_config("bos", 1e-3).model("none")
    probe = S.bos_position_probe(m, protocol=p)
    assert probe["mean"].shape == probe["sd"].shape == (64,) and np.allclose(probe["target"], 1 / (np.arange(64) + 2))
    assert probe["r2_seen"] > 0.5  # at initialisation attention is near uniform: the feature is there already
    assert 16 <= probe["resolution"] <= 64 and not probe["resolved"][:3].any()
    assert np.allclose(probe["gap"], S.bos_feature_gap(np.arange(3, 64), 3))


def test_bos_probe_refuses_bad_input():
    p = S.GridProtocol(eval_size=8)
    with S.seeded(0):
        m = p.run_config("bos", 1e-3).model("none")
        rope = p.run_config("bos", 1e-3).model("rope")
    with pytest.raises(ValueError, match="model"):
        S.bos_position_probe(rope, protocol=p)
    for kw, name in (({"layer": 5}, "layer"), ({"offset": 0}, "offset"), ({"ridge": -1.0}, "ridge"),
                     ({"task": "copy"}, "task")):
        with pytest.raises(ValueError, match=name):
            S.bos_position_probe(m, protocol=p, **kw)


def test_bos_probe_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = S.GridProtocol(eval_size=16)
    with S.seeded(0):
        m = p.run_config("bos", 1e-3).model("none")
    probe = S.bos_position_probe(m, "offset_copy", layer=1, protocol=p)
    fig, ax = plt.subplots()
    title = S.plot_bos_probe(ax, probe)["title"]
    assert title.startswith("NoPE + BOS, offset copy, after block 2") and f"position {probe['resolution'] - 1}" in title
    with pytest.raises(ValueError, match="probe"):
        S.plot_bos_probe(ax, {"mean": [1]})
    plt.close(fig)


def test_t5_bucket_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = S.train_checkpoint("offset_copy", "t5", "plain", 0, 1e-2, protocol=_TINY)
    fig, ax = plt.subplots()
    title = S.plot_t5_bucket_check(ax, S.t5_bucket_check(c["model"], 0, protocol=_TINY), target=3)["title"]
    assert title.startswith("T5 bias by distance: the buckets 16-31 not reached in training are at their initial values")
    assert title.endswith("every reached bucket moved")
    with pytest.raises(ValueError, match="check"):
        S.plot_t5_bucket_check(ax, {"bias": 1})
    with pytest.raises(ValueError, match="target"):
        S.plot_t5_bucket_check(ax, S.t5_bucket_check(c["model"], 0, protocol=_TINY), target=-3)
    plt.close(fig)


# --------------------------------------------------------------------------- checkpoints: stored exactly, read back


def test_checkpoint_round_trip_is_exact():
    import torch

    c = S.train_checkpoint("far_retrieve", "none", "bos", 1, 3e-3, protocol=_TINY)
    row = S.checkpoint_row(c, "far_retrieve", "none", "bos", 1, 3e-3)
    back = S.load_checkpoint("far_retrieve", "none", "bos", source={"rows": [row], "config": _TINY.to_dict()})
    for (name, a), (_, b) in zip(c["model"].state_dict().items(), back["model"].state_dict().items()):
        assert torch.equal(a, b), name
    assert "weights" not in back["row"] and back["row"]["seed"] == 1
    with pytest.raises(ValueError, match="far_retrieve / none / bos seed 2"):
        S.load_checkpoint("far_retrieve", "none", "bos", seed=2, source={"rows": [row]})
    with pytest.raises(TypeError, match="trained"):
        S.checkpoint_row({"model": None}, "far_retrieve", "none", "bos", 1, 3e-3)
    with pytest.raises(ValueError, match="scheme"):
        S.load_checkpoint("far_retrieve", "learned", "bos", source={"rows": [row]})


# --------------------------------------------------------------------------- the shipped checkpoints: the predictions that hold


@pytest.fixture(scope="module")
def shipped():
    from posenc.book.resources import resource_path

    return S.load_grid(resource_path("ch6_checkpoints.json"))


def test_shipped_checkpoints_are_the_saved_trials(shipped):
    assert len(shipped["rows"]) >= 4
    for row in shipped["rows"]:
        assert row["matches_saved"] is True, (row["task"], row["scheme"], row["variant"], row["differences"])


def test_trained_rope_head_predicts_the_cliff_at_41():
    prof = S.rope_head_profile(S.load_checkpoint("offset_copy", "rope", "plain")["model"])
    assert prof["predicted_drop"] == 41  # observed in every fitting trial of the grid (test_saved_rope_cliffs_fall_on_aliases)
    quiet = dict(zip(prof["aliases"], prof["rivals"]))
    assert all(quiet[a] == [] for a in (16, 22, 28, 34)) and quiet[47] == [0, 1, 2, 3]
    assert (prof["alias_scores"][:, prof["aliases"].index(47)] > prof["target"]).all()  # 47 beats the target itself
    assert (prof["selectivity"] > 3).all()


def test_trained_t5_keeps_unreached_buckets_at_init():
    check = S.t5_bucket_check(S.load_checkpoint("offset_copy", "t5", "plain")["model"], 0)
    assert check["unchanged"] == check["predicted"] == list(range(16, 32))
    assert np.abs(check["bias"][:, 16:]).max() < 0.1 < check["bias"][:, 3].min()
    others = np.delete(check["trained_bias"], 3, axis=1)
    assert (others.mean(axis=1) < -0.5).all()


def test_nope_bos_feature_extrapolates_only_where_the_task_holds():
    far = S.bos_position_probe(S.load_checkpoint("far_retrieve", "none", "bos")["model"], "far_retrieve")
    copy = S.bos_position_probe(S.load_checkpoint("offset_copy", "none", "bos")["model"], "offset_copy")
    assert far["r2_seen"] > 0.99 and copy["r2_seen"] > 0.99
    assert far["resolution"] >= 28 and far["r2_new"] > 0.5  # keeps falling past L: far retrieve holds
    assert copy["resolution"] == 16 and copy["r2_new"] < 0  # flat past L: offset copy at the floor from 16


# --------------------------------------------------------------------------- RoPE's fall under a context extension


@pytest.fixture(scope="module")
def extension_check():
    model = S.load_checkpoint("offset_copy", "rope", "plain")["model"]
    rotary = model.positional
    check = S.rope_extension_check(model)
    assert model.positional is rotary  # the trained module is put back
    return {(s["method"], s["factor"]): s for s in check["settings"]} | {"check": check}


def test_trained_heads_predict_where_each_extension_falls(extension_check):
    c = extension_check
    assert c[("none", 1.0)]["predicted"] == c[("none", 1.0)]["observed"] == 41  # the fall of every grid trial
    assert c[("ntk", 2.0)]["predicted"] == 47 and 47 <= c[("ntk", 2.0)]["observed"] <= 49  # moved to the next alias
    for key in (("ntk", 4.0), ("yarn", 2.0), ("yarn", 4.0)):  # the heads keep every alias below the target
        assert c[key]["predicted"] is None and c[key]["observed"] is None, key
        assert c[key]["beyond_4x"] > 0.99 > c[("none", 1.0)]["beyond_4x"] + 0.3, key
    for f in (2.0, 4.0):  # PI slows the fastest pair: a trained distance rivals the target at once
        assert c[("pi", f)]["predicted"] == c[("pi", f)]["observed"] < 16 and c[("pi", f)]["acc_1x"] < 0.5
    assert c["check"]["aliases"][:6] == [16, 22, 28, 34, 41, 47]


def test_extension_check_refuses_bad_input():
    with S.seeded(0):
        t5 = S.GridProtocol().run_config("plain", 1e-3).model("t5")
    with pytest.raises(ValueError, match="model"):
        S.rope_extension_check(t5)
    rope = S.load_checkpoint("offset_copy", "rope", "plain")["model"]
    with pytest.raises(TypeError, match="settings"):
        S.rope_extension_check(rope, settings="ntk")
    with pytest.raises(TypeError, match="settings"):
        S.rope_extension_check(rope, settings=[("ntk", 2, 3)])
    with pytest.raises(ValueError, match="method"):
        S.rope_extension_check(rope, settings=[("linear-ish", 2)])
    with pytest.raises(ValueError, match="factor"):
        S.rope_extension_check(rope, settings=[("ntk", 0.5)])
    with pytest.raises(ValueError, match="task"):
        S.rope_extension_check(rope, task="far_retrieve")


def test_extension_figure(extension_check):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    out = S.plot_extension_check(axes, extension_check["check"])
    assert out["drawn"] == ["plain", "NTK x2", "NTK x4", "YaRN x2", "YaRN x4"]
    assert "plain 41" in out["titles"][0] and "NTK x4 none up to 63" in out["titles"][1]
    with pytest.raises(TypeError, match="axes"):
        S.plot_extension_check(axes[0], extension_check["check"])
    with pytest.raises(ValueError, match="methods"):
        S.plot_extension_check(axes, extension_check["check"], methods=("xpos",))
    plt.close(fig)


# --------------------------------------------------------------------------- the refuted predictions in few words


def test_refuted_brief_merges_factors_and_variants_without_losing_a_case(grid):
    import re

    table = S.group_table(grid)
    for scheme in S.GRID_SCHEMES:
        brief = S.refuted_brief(table, scheme)
        cases = S.scheme_predictions(table, scheme)["refuted_cases"]
        if not cases:
            assert brief == "none"
            continue
        expanded = set()
        for entry in brief.split("; "):
            m = re.fullmatch(r"(.+?) ((?:plain|with BOS)(?: and with BOS)?), ((?:fit|2x|4x)(?: and 4x)?): (\w+) "
                             r"\(predicted (\w+)\)", entry)
            assert m, entry
            task, variants, whats, observed, predicted = m.groups()
            for v in variants.split(" and "):
                for w in whats.split(" and "):
                    expanded.add(f"{task}, {v}, {w}: predicted {predicted}, observed {observed}")
        assert expanded == set(cases) and len(brief) < len("; ".join(cases)) + 1, scheme


def test_refuted_brief_refuses_bad_input():
    with pytest.raises(ValueError, match="scheme"):
        S.refuted_brief([], "learned")
    with pytest.raises(TypeError, match="table"):
        S.refuted_brief(42, "rope")
