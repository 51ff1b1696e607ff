"""Chapter 6's fixed-budget grid: the new tasks, drawn lengths, floors, one trial, and the verdict statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc.book import synthetic as S
from posenc.book import tasks as T


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- tasks


def test_pointer_tasks_draw_what_they_drew_before():
    # the saved grid's sequences: the same generator calls as before the new tasks
    for task in T.TASKS:
        b = T.make_task_batch(task, 8, 20, generator=_gen(3))
        assert torch.equal(b.inputs, torch.randint(0, 16, (8, 20), generator=_gen(3)))


def _reference_targets(task: str, x: list[int], vocab: int) -> list[int | None]:
    """Targets by the task's words, position by position (None: not scored)."""
    out: list[int | None] = []
    for t in range(len(x)):
        if task == "associative_recall":
            key_pos = t % 2 == 0
            earlier = [x[s + 1] for s in range(0, t, 2) if x[s] == x[t]]
            value = x[t + 1] if t + 1 < len(x) else None
            out.append((earlier[-1] if value is None else value) if key_pos and earlier else None)
        elif task == "latest_marker":
            marks = [s for s in range(t + 1) if x[s] == vocab - 1]
            out.append(x[marks[-1] + 1] if marks and marks[-1] + 1 < t else None)
        elif task == "separator_copy":
            n = x.index(vocab - 1)
            out.append(x[t + 1] if n <= t < 2 * n else None)
    return out


@pytest.mark.parametrize("task", T.NEW_TASKS)
def test_new_tasks_match_their_definition(task):
    b = T.make_task_batch(task, 64, 15, generator=_gen(1))
    for i in range(64):
        ref = _reference_targets(task, b.inputs[i].tolist(), 16)
        got = [int(y) if m else None for y, m in zip(b.targets[i].tolist(), b.mask[i].tolist())]
        assert got == ref, (task, i)
    assert b.mask.any()


def test_recall_values_are_fixed_per_key_and_disjoint_from_keys():
    b = T.make_task_batch("associative_recall", 32, 40, generator=_gen(2))
    keys, values = b.inputs[:, 0::2], b.inputs[:, 1::2]
    assert int(keys.max()) < 8 <= int(values.min())
    for i in range(32):
        seen = {}
        for k, v in zip(keys[i].tolist(), values[i].tolist()):
            assert seen.setdefault(k, v) == v


def test_marker_never_twice_in_a_row_and_rate():
    b = T.make_task_batch("latest_marker", 256, 64, generator=_gen(4))
    m = b.inputs == 15
    assert not (m[:, 1:] & m[:, :-1]).any()
    assert 0.15 < m.double().mean().item() < 0.25


def test_lengths_mask_the_filler_and_set_the_copy_length():
    lengths = torch.tensor([1, 5, 9, 16])
    b = T.make_task_batch("separator_copy", 4, 16, generator=_gen(5), lengths=lengths)
    for i, m in enumerate(lengths.tolist()):
        n = (m - 1) // 2
        assert b.mask[i].nonzero().flatten().tolist() == list(range(n, 2 * n))
        if n:
            assert int(b.inputs[i, n]) == 15
    c = T.make_task_batch("offset_copy", 4, 16, generator=_gen(5), lengths=lengths)
    assert c.mask.sum(dim=1).tolist() == [0, 2, 6, 13]


def test_draw_lengths_ranges():
    n = T.draw_lengths("latest_marker", 4000, 16, generator=_gen(0))
    assert int(n.min()) == T.min_length("latest_marker") == 3 and int(n.max()) == 16
    assert set(T.draw_lengths("offset_copy", 4000, 16, generator=_gen(0)).tolist()) == set(range(4, 17))
    c = T.draw_lengths("separator_copy", 4000, 16, generator=_gen(0))
    assert set(c.tolist()) == {3, 5, 7, 9, 11, 13, 15}


def test_bos_shifts_new_tasks():
    a = T.make_task_batch("latest_marker", 4, 12, generator=_gen(6))
    b = T.make_task_batch("latest_marker", 4, 12, generator=_gen(6), bos=True)
    assert torch.equal(b.inputs[:, 1:], a.inputs) and bool((b.inputs[:, 0] == 16).all()) and not b.mask[:, 0].any()


def test_floors():
    b = T.make_task_batch("far_retrieve", 2048, 16, generator=_gen(0))
    acc = T.trivial_accuracy(b, "far_retrieve")
    assert acc["floor"][12] == 1.0 and math.isnan(acc["floor"][0])
    assert np.nanmin(acc["floor"] - acc["uniform"]) >= 0
    assert 0.35 < T.chance_floor("far_retrieve", 16) < 0.45  # not 1/16: its own index is a quarter of the scored tokens
    for task in T.ALL_TASKS:
        low, high = T.target_ids(task)
        assert T.chance_floor(task, 64, start=16, size=512) >= 1 / (high - low) - 1e-9


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: T.make_task_batch("nope", 2, 8), "task"),
        (lambda: T.make_task_batch("associative_recall", 2, 8, vocab_size=3), "vocab_size"),
        (lambda: T.make_task_batch("separator_copy", 2, 2), "length"),
        (lambda: T.make_task_batch("latest_marker", 2, 8, lengths=torch.tensor([1])), "lengths"),
        (lambda: T.make_task_batch("latest_marker", 2, 8, lengths=torch.tensor([0, 3])), "lengths"),
        (lambda: T.make_task_batch("latest_marker", 2, 8, lengths=torch.tensor([1.0, 3.0])), "lengths"),
        (lambda: T.make_task_batch("latest_marker", 2, 8, lengths=torch.tensor([9, 3])), "lengths"),
        (lambda: T.draw_lengths("separator_copy", 2, 2), "max_length"),
        (lambda: T.draw_lengths("latest_marker", 2, 8, generator=3), "generator"),
        (lambda: T.trivial_accuracy("batch", "offset_copy"), "batch"),
        (lambda: T.chance_floor("offset_copy", 16, start=16), "start"),
        (lambda: T.chance_floor("far_retrieve", 32, start=0, size=0), "size"),
        (lambda: T.target_ids("nope"), "task"),
        (lambda: T.min_length("nope"), "task"),
    ],
)
def test_task_bad_input_names_the_argument(call, name):
    with pytest.raises((TypeError, ValueError), match=name):
        call()


# --------------------------------------------------------------------------- one trial

SMALL = S.GridProtocol(steps=6, loss_every=2, score_every=4, eval_size=8, heldout_size=8, batch_size=8, warmup=2)


def test_randomized_positions_per_length_and_same_tokens_for_every_scheme():
    p = S.GridProtocol()
    x, y, m, pos = S.grid_batch("latest_marker", "randomized", p, False, 64, 16, _gen(0), _gen(9), draw=True)
    x2, y2, m2, none = S.grid_batch("latest_marker", "rope", p, False, 64, 16, _gen(0), _gen(1), draw=True)
    assert torch.equal(x, x2) and torch.equal(m, m2) and none is None
    lengths = T.draw_lengths("latest_marker", 64, 16, generator=_gen(0))
    for i, n in enumerate(lengths.tolist()):
        row = pos[i, :n]
        assert bool((row.diff() > 0).all()) and int(row.max()) < 256
    # the spacing follows the sequence's own length: short sequences are spread thinly
    short = [pos[i, : n].diff().double().mean().item() for i, n in enumerate(lengths.tolist()) if 2 <= n <= 4]
    long = [pos[i, : n].diff().double().mean().item() for i, n in enumerate(lengths.tolist()) if n >= 14]
    assert np.mean(short) > 2 * np.mean(long)


def test_trial_is_deterministic_and_its_best_is_the_lowest_heldout_loss():
    a = S.run_grid_trial("separator_copy", "randomized", "bos", 1, 3e-3, SMALL)
    b = S.run_grid_trial("separator_copy", "randomized", "bos", 1, 3e-3, SMALL)
    assert a["losses"] == b["losses"]
    np.testing.assert_equal(a["final"], b["final"])  # nan (unscored positions) equal to nan
    steps, losses = zip(*a["heldout"])
    assert steps == (2, 4, 6) and a["best_step"] == steps[int(np.argmin(losses))]
    assert [t["steps"] for t in a["trajectory"]] == [4, 6]
    assert a["length_rule"] == "uniform" and len(a["final"]["pos_4x"]) == 64


def test_a_members_numbers_do_not_depend_on_its_pack():
    alone = S.run_grid_trial("latest_marker", "randomized", "plain", 1, 1e-2, SMALL)
    pack = S.run_grid_pack("latest_marker", "randomized", "plain", [(0, 1e-3), (1, 1e-2), (2, 3e-3)], SMALL)
    assert pack[1]["losses"] == alone["losses"] and pack[1]["heldout"] == alone["heldout"]
    np.testing.assert_equal(pack[1]["best"], alone["best"])
    assert [m["lr"] for m in pack] == [1e-3, 1e-2, 3e-3]
    with pytest.raises(TypeError, match="members"):
        S.run_grid_pack("latest_marker", "rope", "plain", [], SMALL)


def test_trial_rows_carry_the_protocol_fields():
    rows = S.trial_rows(S.run_grid_trial("offset_copy", "alibi", "plain", 0, 1e-2, SMALL))
    kinds = [r["checkpoint"] for r in rows]
    assert kinds == ["trajectory", "trajectory", "best", "final"]
    for r in rows:
        for k in ("task", "scheme", "variant", "role", "seed", "lr", "steps", "acc_1x", "beyond_2x", "beyond_4x",
                  "final", "stop"):
            assert k in r
    assert rows[-1]["length_rule"] == "fixed" and "acc_4x" in rows[-1] and "acc_4x" not in rows[0]
    assert rows[-1]["final"] and rows[-1]["stop"] == "budget" and rows[2]["stop"] == "best_heldout_loss"
    assert sum(r["final"] for r in rows) == 1 and "pos_4x" in rows[2] and "pos_4x" not in rows[0]
    assert "pos_1x" not in rows[-1] and len(rows[-1]["heldout"]) == 3


def test_grid_schemes_exclude_learned_and_protocol_checks():
    assert "learned" not in S.GRID_SCHEMES and len(S.GRID_SCHEMES) == 7
    with pytest.raises(ValueError, match="scheme"):
        S.run_grid_trial("offset_copy", "learned", "plain", 0, 1e-3, SMALL)
    with pytest.raises(ValueError, match="variant"):
        S.run_grid_trial("offset_copy", "rope", "both", 0, 1e-3, SMALL)
    with pytest.raises(TypeError, match="protocol"):
        S.run_grid_trial("offset_copy", "rope", "plain", 0, 1e-3, {"steps": 3})
    with pytest.raises(ValueError, match="eval_factors"):
        S.GridProtocol(eval_factors=(2, 4))
    with pytest.raises(TypeError, match="lrs"):
        S.GridProtocol(lrs=[1e-3])
    with pytest.raises(ValueError, match="score_every"):
        S.GridProtocol(loss_every=50, score_every=120)
    assert "U(1, train_len)" in S.LENGTH_RULE
    assert S.GridProtocol.from_dict(S.GridProtocol().to_dict()) == S.GridProtocol()


def test_first_losses_are_the_trials_first_losses():
    trial = S.run_grid_trial("associative_recall", "t5", "plain", 2, 3e-3, SMALL)
    again = S.first_losses(SMALL.to_dict(), 2, 4, task="associative_recall", scheme="t5", variant="plain", lr=3e-3)
    assert again == trial["losses"][:4]


# --------------------------------------------------------------------------- statistics


def test_wilson_interval_known_values():
    lo, hi = S.wilson_interval(0, 4)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)
    lo, hi = S.wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    with pytest.raises(ValueError, match="k"):
        S.wilson_interval(5, 4)


def test_fit_and_extrapolation_labels():
    assert S.fit_label([0.5, 0.6])["label"] == "fails"
    f = S.fit_label([1.0, 0.99, 0.2, 1.0])
    assert (f["k"], f["n"], f["label"]) == (3, 4, "split")
    # retention counts only the seeds that fit: the failing seed's 0.0 is left out
    e = S.extrapolation_label([1.0, 1.0, 0.3], [0.95, 0.97, 0.0], 0.1)
    assert e["n"] == 2 and e["label"] == "holds" and e["per_seed"] == [0.95, 0.97]
    assert S.extrapolation_label([1.0] * 4, [0.12, 0.11, 0.13, 0.12], 0.1)["label"] == "floor"
    assert S.extrapolation_label([0.5] * 4, [0.9] * 4, 0.1)["label"] == "not fit"
    assert S.extrapolation_label([1.0] * 2, [None, math.nan], 0.1)["label"] == "cannot run"
    assert S.extrapolation_label([1.0] * 4, [0.5, 0.55, 0.6, 0.5], 0.1)["label"] == "degrades"
    u = S.extrapolation_label([1.0] * 4, [1.0, 1.0, 1.0, 0.5], 0.1)
    assert u["uncertain"] and u["label"].startswith("uncertain")
    with pytest.raises(ValueError, match="one value per seed"):
        S.extrapolation_label([1.0], [0.5, 0.5], 0.1)


def test_group_verdict_at_2x_and_4x():
    rows = [{"acc_1x": 1.0, "beyond_2x": 0.95, "beyond_4x": 0.5 + 0.01 * i} for i in range(4)]
    v = S.group_verdict(rows, {"beyond_2x": 0.15, "beyond_4x": 0.15})
    assert v["beyond_2x"]["label"] == "holds" and v["beyond_4x"]["label"] == "degrades"
    with pytest.raises(ValueError, match="floors"):
        S.group_verdict(rows, {"beyond_2x": 0.1})


def test_comparisons_and_trajectory_rules():
    assert S.permutation_p([1, 1, 1, 1], [0, 0, 0, 0]) < 0.05
    assert S.best_or_indistinguishable({"a": [0.9, 0.5], "b": [0.8, 0.6]})["claim"] == "indistinguishable"
    assert S.horizon([1.0] * 70, 16) == 70
    assert S.horizon([1.0] * 16 + [math.nan, 0.5], 16) == 17
    assert not S.unstable([{"acc_1x": 0.5, "beyond_4x": b} for b in (0.1, 0.9, 0.1, 0.9)])
    assert not S.still_improving([[2000, 0.1]])
    band = S.lr_band([{"lr": 0.01, "seed": 0, "acc_1x": 0.2, "heldout_loss": 0.5, "beyond_4x": 0.1},
                      {"lr": 0.001, "seed": 0, "acc_1x": 1.0, "heldout_loss": 0.9, "beyond_4x": 0.7}])
    assert band["chosen"] == 0.001 and band["fitting"] == [0.001] and band["band"] == (0.7, 0.7)


def test_task_floors_keys():
    f = S.task_floors("offset_copy", S.GridProtocol(eval_factors=(1, 2, 4)))
    assert sorted(f) == ["acc_1x", "beyond_2x", "beyond_4x"]
    assert all(1 / 16 <= v < 0.3 for v in f.values())


def test_grid_verdicts_pool_the_rates_that_fit_and_count_unstable_trials():
    def row(seed, lr, checkpoint, acc, b4, steps=2000, loss=0.1):
        return {"task": "fixed_retrieve", "scheme": "t5", "variant": "bos", "seed": seed, "lr": lr, "steps": steps,
                "checkpoint": checkpoint, "acc_1x": acc, "heldout_loss": loss, "beyond_2x": b4, "beyond_4x": b4}

    rows = [row(s, 1e-2, "best", 0.5, 0.1, loss=0.9) for s in range(4)]
    rows += [row(s, 1e-3, "best", 1.0, 0.95) for s in range(4)]
    rows += [row(0, 1e-3, "trajectory", 1.0, b, steps=k) for k, b in zip((1250, 1500, 1750, 2000), (0.2, 0.5, 0.7, 0.95))]
    v = S.grid_verdicts(rows)[("fixed_retrieve", "t5", "bos")]
    assert v["band"]["fitting"] == [1e-3] and v["band"]["chosen"] == 1e-3
    assert v["pooled"]["fit"]["n"] == 4 and v["pooled"]["beyond_4x"]["label"] == "holds"
    assert v["unstable"] == 1 and v["trials"] == 8
    with pytest.raises(ValueError, match="checkpoint"):
        S.grid_verdicts(rows, checkpoint="last")


# --------------------------------------------------------------------------- predictions


def test_predictions_cover_phase_a_and_match_the_readme():
    from pathlib import Path

    assert len(S.PREDICTIONS) == len(T.ALL_TASKS) * len(S.GRID_SCHEMES) * len(S.VARIANTS)
    for p in S.PREDICTIONS.values():
        assert p["fit"] in ("fits", "split", "fails")
        assert (p["beyond_2x"] is None) == (p["beyond_4x"] is None) == (p["fit"] == "fails")
    readme = (Path(__file__).resolve().parents[2] / "experiments" / "README.md").read_text()
    short = {"holds": "H", "degrades": "D", "floor": "F"}
    for task in T.ALL_TASKS:
        line = next(row for row in readme.splitlines() if row.startswith(f"| {task} |"))
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        for scheme, cell in zip(S.GRID_SCHEMES, cells):
            for variant, part in zip(S.VARIANTS, cell.split(" / ")):
                p = S.PREDICTIONS[(task, scheme, variant)]
                want = p["fit"] + (f" {short[p['beyond_2x']]}{short[p['beyond_4x']]}" if p["beyond_2x"] else "")
                assert part == want, (task, scheme, variant)


# --------------------------------------------------------------------------- analysis of a partial results file


def _fake_results(groups=(("offset_copy", "rope", "plain"), ("offset_copy", "shaw", "plain"))):
    """A results file with a few groups: 3 rates x 4 seeds, best/final rows with 4x curves and a trajectory."""
    rows = []
    rng = np.random.default_rng(0)
    for task, scheme, variant in groups:
        for lr in (1e-3, 3e-3, 1e-2):
            for seed in range(4):
                cliff = 41 if scheme == "rope" else 64
                curve = [None] * 3 + [1.0] * (cliff - 3) + [0.1] * (64 - cliff)
                b4 = float(np.mean([c for c in curve[16:]]))
                base = {"task": task, "scheme": scheme, "variant": variant, "seed": seed, "lr": lr, "phase": "A"}
                for steps, b in ((1500, b4 - 0.01), (2000, b4)):
                    rows.append({**base, "checkpoint": "trajectory", "steps": steps, "acc_1x": 1.0, "heldout_loss": 0.1,
                                 "beyond_2x": 1.0, "beyond_4x": b})
                for kind in ("best", "final"):
                    rows.append({**base, "checkpoint": kind, "steps": 2000, "acc_1x": 1.0 - 0.001 * seed,
                                 "heldout_loss": lr + 0.01 * rng.random(), "beyond_2x": 1.0, "beyond_4x": b4,
                                 "pos_4x": curve})
    return {"rows": rows}


def test_coverage_and_table_say_what_is_missing():
    data = _fake_results()
    c = S.grid_coverage(data)
    assert c["done"] == [("offset_copy", "rope", "plain"), ("offset_copy", "shaw", "plain")]
    assert len(c["missing"]) == 96 and "all of fixed_retrieve, long_offset_copy" in c["text"] and c["partial"] == []
    table = S.group_table(data)
    assert [r["status"] for r in table].count("done") == 2
    rope = next(r for r in table if r["scheme"] == "rope" and r["variant"] == "plain" and r["task"] == "offset_copy")
    assert rope["fit"] == "12/12" and rope["label_2x"] == "holds" and rope["label_4x"] == "degrades"
    assert rope["horizon"] == 41 and len(rope["seeds_4x"]) == 12 and rope["outcome_4x"] == "confirmed"
    text = S.format_group_table(table, task="offset_copy")
    assert "| offset_copy | rope | plain | 12/12 (fits) | holds 1.00" in text and text.count("missing") == 12
    summary = S.prediction_summary(table)
    assert summary["missing"] == 96 and summary["confirmed"] == 6 and summary["refuted"] == 0


def test_paired_differences_pair_seeds_and_list_missing_schemes():
    out = S.paired_scheme_differences(_fake_results(), "offset_copy", "plain")
    d = out["pairs"][("rope", "shaw")]
    assert d["n"] == 4 and d["a_lower"] == 4 and d["mean"] == pytest.approx((25 + 23 * 0.1) / 48 - 1)
    assert out["missing"] == ["none", "sinusoidal", "alibi", "t5", "randomized"]
    assert S.paired_scheme_differences(_fake_results(), "offset_copy", "plain", lr="all")["pairs"][("rope", "shaw")]["n"] == 12
    with pytest.raises(ValueError, match="lr"):
        S.paired_scheme_differences(_fake_results(), "offset_copy", "plain", lr="best")


def test_prediction_outcomes():
    assert S.prediction_outcome("floor", "floor") == "confirmed"
    assert S.prediction_outcome("holds", "degrades") == "refuted"
    assert S.prediction_outcome(None, "holds") == S.prediction_outcome("holds", "not fit") == "open"


def test_mechanisms_known_values():
    # RoPE: offset copy's unseen aliases 40.7 and 47.0; long offset copy's first alias 16.3 is past L
    assert [round(a) for a in S.rope_alias_positions(3, 64)][5:7] == [41, 47]
    assert round(S.rope_alias_positions(10, 64)[0], 1) == 16.3
    # with the 0.1 pair weighted as much as the fast one, the alias at 9 is suppressed more than at 41 is not
    s = S.rope_template_score([3, 9, 41], 3, weights=[1, 1, 0, 0])
    assert s[0] == pytest.approx(1.0) and s[1] > s[2]
    b, bb = S.t5_buckets(), S.t5_buckets(bos=True)
    assert b["trained"][:16].all() and not b["trained"][16:].any() and bb["trained"][16]
    assert set(b["bucket"][16:].tolist()) == set(range(16, 27))
    sim = S.sinusoidal_novelty()
    assert sim[:16].min() == pytest.approx(1.0) and sim[16:].max() < 1.0
    assert S.randomized_spacing([16])[0] == pytest.approx(257 / 17)
    with pytest.raises(ValueError, match="max_len"):
        S.randomized_spacing([300])  # more distinct positions than 0 .. 255 holds
    gap = S.bos_feature_gap([10, 20, 40], 3)
    assert (np.diff(gap) < 0).all()
    with pytest.raises(ValueError, match="positions"):
        S.bos_feature_gap([1], 3)
    with pytest.raises(ValueError, match="weights"):
        S.rope_template_score([3], 3, weights=[1, 1])
    with pytest.raises(TypeError, match="source"):
        S.load_grid(3)
    with pytest.raises(ValueError, match="rows"):
        S.load_grid({"units": []})


def test_mechanism_figures_draw_on_partial_and_empty_files():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, empty = _fake_results(), {"rows": []}
    fig, axes = plt.subplots(2, 6)
    try:
        got = S.plot_alias_check(axes[0, 0], S.rope_alias_check(data))
        assert got["drops"] == [[41]] * 12 and 41 in got["aliases"]
        assert "not in the results file" in S.plot_alias_check(axes[1, 0], S.rope_alias_check(empty))["title"]
        assert S.plot_similarity_check(axes[0, 2], S.sinusoidal_similarity_check(empty))["x"].size == 0
        assert S.plot_trajectories(axes[0, 3], data, "offset_copy", "rope", "plain")["missing"] is None
        assert S.plot_trajectories(axes[1, 3], empty, "offset_copy", "rope", "plain")["missing"]
        h = S.plot_verdict_heatmap(axes[0, 4], S.group_table(data), "plain")
        assert len(h["missing"]) == 47 and h["values"][0, S.GRID_SCHEMES.index("shaw")] == 1.0
        with pytest.raises(ValueError, match="task"):
            S.rope_alias_check(data, task="far_retrieve")
        with pytest.raises(TypeError, match="ax"):
            S.plot_trajectories("ax", data, "offset_copy", "rope", "plain")
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- phases B-D


def _grid_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "ch6_grid.py"
    spec = importlib.util.spec_from_file_location("ch6_grid_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_phase_a_is_still_the_default_with_its_plan_and_protocol():
    G = _grid_script()
    exp = G.experiment()
    assert exp is G.EXPERIMENT and exp.path.name == "alternatives_v2.json" and exp.name == "ch6_grid"
    assert exp.protocol == {**S.GridProtocol().to_dict(), "length_rule": S.LENGTH_RULE}
    units = exp.units({"rows": []})
    assert len(units) == 98 and units[0] == ("A", "offset_copy", "none", "plain") and all(u[0] == "A" for u in units)
    with pytest.raises(ValueError, match="phase"):
        G.experiment("E")


@pytest.mark.parametrize("phase", ["B", "C", "D"])
def test_phases_b_to_d_quick_runs_save_nothing(phase, tmp_path, capsys):
    G = _grid_script()
    G.OUT = tmp_path / "missing_a.json"  # no phase A yet: the plans are empty, the quick unit still runs
    exp = G.experiment(phase)
    assert exp.path.name == f"alternatives_v2_{phase}.json" and exp.units({"rows": []}) == []
    assert G.main(["--phase", phase, "--quick"]) == 0
    assert "quick run finished" in capsys.readouterr().out


def test_phase_rules():
    final = {"task": "offset_copy", "scheme": "none", "variant": "plain", "checkpoint": "final", "lr": 1e-3}
    rows = [{**final, "seed": 0, "heldout": [1.0] * 30 + [0.9] * 10},      # still falling
            {**final, "seed": 1, "heldout": [0.002] * 30 + [0.001] * 10},  # relative fall only: converged
            {**final, "seed": 2, "heldout": [0.5] * 40}]                    # flat
    assert S.phase_b_members(rows, ("offset_copy", "none", "plain")) == [(0, 1e-3)]
    assert S.band_centre({"fitting": [1e-3, 3e-3, 1e-2], "chosen": 1e-2}) == 3e-3
    assert S.band_centre({"fitting": [], "chosen": 1e-2}) == 1e-2
    assert S.needs_more_seeds({"pooled": {"fit": {"label": "fits"}, "beyond_2x": {"uncertain": True}}})
    assert not S.needs_more_seeds({"pooled": {"fit": {"label": "fits"}, "beyond_2x": {"uncertain": False}}})
    assert S.ablation_lr({"fitting": [1e-2]}) == 1e-2 and S.ablation_lr({"fitting": [1e-3, 1e-2]}) == 1e-3
    units = S.ablation_units()
    assert len(units) == 34 and len(set(units)) == 34
    assert all((t, s, v) in S.PREDICTIONS for _, t, s, v in units)
    assert S.ablation_protocol("rope_2heads").n_heads == 2 and S.ablation_protocol("depth4").steps == 2000


def test_rope_base_ablation_changes_only_the_rotary_table():
    small = S.GridProtocol(steps=3, loss_every=3, score_every=3, eval_size=4, heldout_size=4, batch_size=4, warmup=0)
    plain = S.run_grid_pack("offset_copy", "rope", "plain", [(0, 1e-3)], small)[0]
    same = S.run_grid_pack("offset_copy", "rope", "plain", [(0, 1e-3)], small, modify=S.rope_base_modifier(10000.0))[0]
    other = S.run_grid_pack("offset_copy", "rope", "plain", [(0, 1e-3)], small, modify=S.rope_base_modifier(100.0))[0]
    assert same["losses"] == plain["losses"] and other["losses"] != plain["losses"]
    assert S.ablation_first_losses(small.to_dict(), 0, 3, ablation="rope_base100", task="offset_copy", scheme="rope",
                                   variant="plain", lr=1e-3) == other["losses"]
    with pytest.raises(ValueError, match="RoPE"):
        S.run_grid_pack("offset_copy", "alibi", "plain", [(0, 1e-3)], small, modify=S.rope_base_modifier(100.0))
    with pytest.raises(TypeError, match="modify"):
        S.run_grid_pack("offset_copy", "rope", "plain", [(0, 1e-3)], small, modify=3)


def test_extensions_move_the_fast_pairs_aliases_only_under_interpolation():
    d = np.arange(80)
    fast = [1, 0, 0, 0]  # the pair that aliases every 2 pi
    for method in ("none", "ntk", "yarn"):
        assert S.rope_extended_frequencies(method)[0] == pytest.approx(1.0)
        s = S.rope_extended_score(d, 3, method, weights=fast)
        assert s[41] > 0.9 and s[47] > 0.99  # the aliases 3 + 6(2 pi) and 3 + 7(2 pi) stay
    pi = S.rope_extended_score(d, 3, "pi", weights=fast)
    assert int(d[np.argmax(pi)]) == 12 and pi[3] < 0.8  # the head now finds 12, not 3
    assert S.rope_extended_score(d, 3, "none") == pytest.approx(S.rope_template_score(d, 3))
    with pytest.raises(ValueError, match="method"):
        S.rope_extended_frequencies("longrope")


# --------------------------------------------------------------------------- the chapter's verdict table and reports


def test_best_schemes_needs_a_paired_test_and_the_heat_table_marks_it():
    data = _fake_results()
    table = S.group_table(data)
    best = S.best_schemes(data, table, "offset_copy", "plain")
    assert best == {"order": ["shaw", "rope"], "claim": "best", "tied": ["shaw"]}
    assert S.best_schemes(data, table, "far_retrieve", "plain")["claim"] == "none"
    one = S.group_table(_fake_results(groups=(("offset_copy", "rope", "plain"),)))
    assert S.best_schemes(data, one, "offset_copy", "plain")["claim"] == "only"
    rope = S.table_row(table, "offset_copy", "rope", "plain")
    assert rope["held_4x"] == 0 and S.table_row(table, "offset_copy", "shaw", "plain")["held_4x"] == 12
    floors = {t: 0.1 for t in S.ALL_TASKS}
    heat = S.verdict_heat_table(table, factor=4, bests={("offset_copy", "plain"): best}, floors=floors)
    assert heat.html.count("<td") == 98 and heat.markdown.count("—") == 96
    assert "1.00 [1.00, 1.00]<br>fits 12/12 · hold 12/12<br>holds · best" in heat.html
    assert "fits 12/12 · hold 0/12" in heat.markdown and "offset copy (floor 0.10)" in heat.markdown
    with pytest.raises(ValueError, match="table"):
        S.table_row(table, "offset_copy", "learned", "plain")
    with pytest.raises(ValueError, match="task"):
        S.best_schemes(data, table, "copy", "plain")


def test_scheme_predictions_count_and_word_the_refuted_cases():
    table = S.group_table(_fake_results())
    rope = S.scheme_predictions(table, "rope")
    assert (rope["confirmed"], rope["refuted"], rope["tested"], rope["groups"]) == (3, 0, 3, 1)
    assert rope["refuted_text"] == "none"
    row = S.table_row(table, "offset_copy", "shaw", "plain")
    row["predicted"] = {"fit": "fits", "beyond_2x": "holds", "beyond_4x": "floor"}
    row["outcome_4x"] = "refuted"
    shaw = S.scheme_predictions(table, "shaw")
    assert shaw["refuted_text"] == "offset copy, plain, 4x: predicted floor, observed holds"
    with pytest.raises(ValueError, match="scheme"):
        S.scheme_predictions(table, "learned")


def test_scheme_curves_panel_lists_what_it_drew():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    try:
        got = S.plot_scheme_curves(a, _fake_results(), "offset_copy", "plain")
        assert got["drawn"] == ["rope", "shaw"] and len(got["missing"]) == 5 and got["not_fit"] == []
        assert S.plot_scheme_curves(b, {"rows": []}, "offset_copy", "bos")["drawn"] == []
        with pytest.raises(TypeError, match="ax"):
            S.plot_scheme_curves("ax", _fake_results(), "offset_copy", "plain")
    finally:
        plt.close(fig)
