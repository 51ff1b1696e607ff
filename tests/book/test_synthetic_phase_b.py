"""Chapter 6's phase B read (issue 30): the same trials at 2,000 and 5,000 steps, on small fake rows and on the shipped file."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from posenc.book import synthetic as S  # noqa: E402

NONE = ("offset_copy", "none", "plain")  # never fits: prediction 1's "gains none"
GAIN = ("associative_recall", "none", "plain")  # newly fits and degrades, as predicted (confirmed)
GAIN_REFUTED = ("associative_recall", "randomized", "plain")  # newly fits and holds; predicted degrades (refuted)
CHANGED = ("fixed_retrieve", "t5", "plain")  # fits at both; 4x holds -> degrades (a decided change)
SAME = ("fixed_retrieve", "shaw", "plain")  # fits at both; labels unchanged


def _heldout(best_step: int, n: int = 40) -> list[float]:
    """Losses every 50 steps, falling by 0.01 to ``best_step``, then rising by 0.001 (phase B's rule selects it)."""
    i = best_step // 50 - 1
    return [round(1.0 - 0.01 * min(j, i) + 0.001 * max(0, j - i), 4) for j in range(n)]


def _scores(acc: float, b2: float, b4: float) -> dict:
    return {"acc_1x": acc, "beyond_2x": b2, "beyond_4x": b4}


def _curve(acc: float, b4: float) -> list[float]:
    return [acc] * 16 + [b4] * 48


def _trial(group, seed, early, late, *, lr=1e-3, best_step=1950, replays=True, list_b=None):
    """Phase A's and phase B's rows of one trial; ``early``/``late``: (acc, b2, b4) of its best up to 2,000 / 5,000."""
    task, scheme, variant = group
    base = {"task": task, "scheme": scheme, "variant": variant, "seed": seed, "lr": lr, "role": "main"}
    h_a = _heldout(best_step)
    h_b = list_b if list_b is not None else h_a + [round(h_a[-1] - 0.005 * (j + 1), 4) for j in range(60)]
    e, late_scores = _scores(*early), _scores(*late)
    a = [{**base, "checkpoint": "trajectory", "steps": s, "heldout_loss": h_a[s // 50 - 1], **e}
         for s in range(250, 2001, 250)]
    a += [{**base, "checkpoint": "best", "steps": best_step, "heldout_loss": min(h_a), **e,
           "pos_4x": _curve(early[0], early[2])},
          {**base, "checkpoint": "final", "steps": 2000, "heldout_loss": h_a[-1], **e, "heldout": h_a,
           "pos_4x": _curve(early[0], early[2])}]
    b = [{**base, "checkpoint": "trajectory", "steps": s, "heldout_loss": h_b[s // 50 - 1],
          **(e if s <= 2000 else late_scores), "phase": "B", "replays_a": replays} for s in range(250, 5001, 250)]
    b += [{**base, "checkpoint": "best", "steps": 5000, "heldout_loss": min(h_b), **late_scores,
           "pos_4x": _curve(late[0], late[2]), "phase": "B", "replays_a": replays},
          {**base, "checkpoint": "final", "steps": 5000, "heldout_loss": h_b[-1], **late_scores, "heldout": h_b,
           "pos_4x": _curve(late[0], late[2]), "phase": "B", "replays_a": replays}]
    return a, b


def _flat(group, seed, lr=1e-3):
    """A phase-A trial whose loss no longer falls: not continued."""
    a, _ = _trial(group, seed, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), lr=lr)
    for r in a:
        if r["checkpoint"] == "final":
            r["heldout"] = [0.1] * 40
    return a


def _fake():
    a, b = [], []
    spec = {NONE: ((0.5, 0.2, 0.2), (0.5, 0.2, 0.2)), GAIN: ((0.5, 0.4, 0.4), (1.0, 0.5, 0.5)),
            GAIN_REFUTED: ((0.5, 0.4, 0.4), (1.0, 0.99, 0.99)), CHANGED: ((1.0, 0.99, 0.99), (1.0, 0.99, 0.5)),
            SAME: ((1.0, 0.99, 0.99), (1.0, 0.99, 0.98))}
    for group, (early, late) in spec.items():
        for seed in (0, 1):
            ta, tb = _trial(group, seed, early, late)
            a += ta
            b += tb
        a += _flat(group, 2)
    return {"rows": b}, {"rows": a}


@pytest.fixture(scope="module")
def fake():
    return _fake()


@pytest.fixture(scope="module")
def table(fake):
    return S.phase_b_table(*fake)


def _row(table, group):
    (row,) = [r for r in table if (r["task"], r["scheme"], r["variant"]) == group]
    return row


# --------------------------------------------------------------------------- the two moments of each trial


def test_best_at_2000_is_phase_a_best_where_the_replay_holds(fake):
    trials = S.phase_b_trials(*fake)
    assert len(trials) == 10
    a_best = {(r["task"], r["scheme"], r["variant"], r["seed"], r["lr"]): r for r in fake[1]["rows"]
              if r["checkpoint"] == "best"}
    for t in trials:
        key = (t["task"], t["scheme"], t["variant"], t["seed"], t["lr"])
        assert t["source"] == "phase A" and t["agrees"] and t["best_step"] == 1950
        assert t["best"][0] is a_best[key]
        assert [r["steps"] for r in t["best"]] == [1950, 5000] and [r["steps"] for r in t["final"]] == [2000, 5000]


def test_a_rounded_tie_still_agrees():
    h = _heldout(2000)
    h[38] = h[39]  # steps 1,950 and 2,000 tie after rounding; phase A (unrounded) chose 2,000
    a, b = _trial(SAME, 0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), best_step=2000,
                  list_b=h + [round(h[-1] - 0.005 * (j + 1), 4) for j in range(60)])
    (t,) = S.phase_b_trials({"rows": b}, {"rows": a})
    assert t["best_step"] == 1950 and t["best"][0]["steps"] == 2000 and t["agrees"]


def test_a_replay_that_disagrees_is_flagged():
    a, b = _trial(SAME, 0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), best_step=1950,
                  list_b=_heldout(1500) + [0.1] * 60)  # phase B's own list puts the best at 1,500
    (t,) = S.phase_b_trials({"rows": b}, {"rows": a})
    assert t["source"] == "phase A" and not t["agrees"]


def test_without_a_replay_phase_b_rows_are_used():
    a, b = _trial(SAME, 0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), best_step=1750, replays=False)
    (t,) = S.phase_b_trials({"rows": b}, {"rows": a})
    assert t["source"] == "phase B" and t["agrees"] and t["best"][0]["phase"] == "B"
    assert t["best"][0]["steps"] == 1750 and t["final"][0]["steps"] == 2000 and t["final"][0]["phase"] == "B"
    a, b = _trial(SAME, 0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), best_step=1950, replays=False)
    (t,) = S.phase_b_trials({"rows": b}, {"rows": a})  # the lowest loss falls between scored steps
    assert t["source"] == "phase B, scored steps only" and not t["agrees"] and t["best"][0]["steps"] == 2000


# --------------------------------------------------------------------------- the table and the predictions


def test_table_lists_planned_groups_in_phase_a_order(table):
    groups = [(r["task"], r["scheme"], r["variant"]) for r in table]
    assert groups == [g for g in S.PHASE_A_GROUPS if g in (NONE, GAIN, GAIN_REFUTED, CHANGED, SAME)]
    assert all(r["status"] == "done" and r["n"] == 2 and r["of"] == 3 for r in table)
    assert all(r["steps"] == (2000, 5000) for r in table)
    assert _row(table, NONE)["fit_a"]["k"] == 1 and _row(table, SAME)["fit_a"]["k"] == 3  # the flat trial fits


def test_prediction_1_per_group(table):
    none, gain = _row(table, NONE), _row(table, GAIN)
    assert none["p1"] == {"fit": (0, 0), "outcome": "gains none"}
    assert gain["p1"] == {"fit": (0, 2), "outcome": "gains a fitting trial"} and gain["gained"] == 2
    assert gain["acc_1x_median"] == (0.5, 1.0) and gain["acc_1x_max"] == (0.5, 1.0)
    assert _row(table, SAME)["p1"]["outcome"] is None
    fit = gain["all"][1]
    assert fit["fit"] == "2/2" and fit["fit_interval"] == pytest.approx(S.wilson_interval(2, 2))


def test_prediction_2_counts_only_decided_changes(table):
    changed, same = _row(table, CHANGED), _row(table, SAME)
    assert changed["n_both"] == 2 and changed["p2"] == {"changed": ["4x"], "outcome": "changed"}
    assert [s["label_4x"] for s in changed["both"]] == ["holds", "degrades"]
    assert same["p2"] == {"changed": [], "outcome": "unchanged"}
    assert _row(table, NONE)["p2"] is None and _row(table, NONE)["both"] is None


def test_prediction_2_ignores_uncertain_labels():
    a, b = [], []
    for seed, late in enumerate([(1.0, 0.99, 0.99), (1.0, 0.99, 0.3), (1.0, 0.99, 0.95), (1.0, 0.99, 0.5)]):
        ta, tb = _trial(CHANGED, seed, (1.0, 0.99, 0.99), late)
        a, b = a + ta, b + tb
    (row,) = S.phase_b_table({"rows": b}, {"rows": a})
    assert row["both"][1]["label_4x"].startswith("uncertain")
    assert row["p2"] == {"changed": [], "outcome": "unchanged"}


def test_prediction_3_against_the_written_predictions(table):
    gain, refuted = _row(table, GAIN), _row(table, GAIN_REFUTED)
    assert S.PREDICTIONS[GAIN]["beyond_4x"] == "degrades" and S.PREDICTIONS[GAIN_REFUTED]["beyond_4x"] == "degrades"
    assert gain["p3"]["outcomes"] == {"beyond_2x": "confirmed", "beyond_4x": "confirmed"}
    assert gain["p3"]["outcome"] == "confirmed"
    assert refuted["p3"]["outcome"] == "refuted" and refuted["all"][1]["label_4x"] == "holds"
    assert _row(table, SAME)["p3"] is None and _row(table, NONE)["p3"] is None


def test_final_checkpoint_reads_the_weights_at_each_moment(fake):
    row = _row(S.phase_b_table(*fake, checkpoint="final"), CHANGED)
    assert [s["label_4x"] for s in row["all"]] == ["holds", "degrades"]


def test_summary_on_the_fake_table(table):
    s = S.phase_b_summary(table)
    assert (s["groups"], s["planned"], s["complete"], s["trials"]) == (5, 5, True, 10)
    p1 = s["prediction_1"]
    assert p1["fit"] == (4, 8) and p1["gained"] == 4 and p1["lost"] == 0
    assert p1["groups_none"] == [NONE, GAIN, GAIN_REFUTED] and p1["groups_gaining"] == [GAIN, GAIN_REFUTED]
    assert p1["verdict"] == "holds"  # the count rises and 2 of 3 gain
    assert s["prediction_2"]["changed"] == [(*CHANGED, ["4x"])]
    assert s["prediction_2"]["verdict"] == "refuted"  # 1 of 2 groups > a quarter
    assert [g[:3] for g in s["prediction_3"]["groups"]] == [GAIN, GAIN_REFUTED]
    assert s["prediction_3"]["verdict"] == "refuted"


def _summary_row(group, k, *, p2=None, p3=None):
    outcome = None if k[0] else "gains a fitting trial" if k[1] else "gains none"
    return {"task": group[0], "scheme": group[1], "variant": group[2], "status": "done", "n": 4, "all": (),
            "n_both": 0, "gained": max(0, k[1] - k[0]), "lost": 0, "p1": {"fit": k, "outcome": outcome},
            "p2": p2, "p3": p3, "acc_1x_median": (0.5, 0.6), "acc_1x_max": (0.6, 0.7)}


def test_summary_thresholds():
    groups = [g for g in S.PHASE_A_GROUPS][:6]
    unchanged, changed = {"changed": [], "outcome": "unchanged"}, {"changed": ["2x"], "outcome": "changed"}
    # the count does not rise: refuted even though every group fitting none gains one
    rows = [_summary_row(groups[0], (0, 1)), _summary_row(groups[1], (3, 2))]
    assert S.phase_b_summary(rows)["prediction_1"]["verdict"] == "refuted"
    # fewer than half of the groups fitting none gain one: refuted; exactly half: holds
    rows = [_summary_row(groups[0], (0, 1)), _summary_row(groups[1], (0, 0)), _summary_row(groups[2], (0, 0))]
    assert S.phase_b_summary(rows)["prediction_1"]["verdict"] == "refuted"
    assert S.phase_b_summary(rows[:2])["prediction_1"]["verdict"] == "holds"
    # one change among four groups is a quarter (holds); one among three is more (refuted)
    rows = [_summary_row(g, (2, 2), p2=changed if i == 0 else unchanged) for i, g in enumerate(groups[:4])]
    assert S.phase_b_summary(rows)["prediction_2"]["verdict"] == "holds"
    assert S.phase_b_summary(rows[:3])["prediction_2"]["verdict"] == "refuted"
    assert S.phase_b_summary([_summary_row(groups[0], (0, 0))])["prediction_2"]["verdict"] == "untested"
    # prediction 3: open outcomes leave it untested
    p3 = {"predicted": {}, "outcomes": {"beyond_2x": "open", "beyond_4x": "open"}, "outcome": "open"}
    assert S.phase_b_summary([_summary_row(groups[0], (0, 2), p3=p3)])["prediction_3"]["verdict"] == "untested"


def test_summary_marks_an_incomplete_table():
    row = {"task": "offset_copy", "scheme": "none", "variant": "plain", "status": "not in the results yet"}
    s = S.phase_b_summary([row])
    assert s["complete"] is False and s["groups"] == 0 and s["prediction_1"]["verdict"] == "untested"


def test_group_not_yet_run_reads_so(fake):
    b = {"rows": [r for r in fake[0]["rows"] if (r["task"], r["scheme"], r["variant"]) != SAME]}
    table = S.phase_b_table(b, fake[1])
    row = _row(table, SAME)
    assert row["status"] == "not in the results yet" and row["n"] == 2
    assert "not in the results yet" in S.format_phase_b_table([row])
    assert "not in the results yet" in S.format_phase_b_table([row], compact=True)


# --------------------------------------------------------------------------- the formatted table and the figure


def test_format_full_and_compact(table):
    full = S.format_phase_b_table(table).splitlines()
    assert full[0].startswith("| task | scheme | continued | fit 2,000 → 5,000 |") and len(full) == 2 + len(table)
    line = [x for x in full if "fixed retrieve | T5, plain" in x][0]
    assert "2/2 [0.34, 1.00] → 2/2 [0.34, 1.00] | 1.00 (1.00) → 1.00 (1.00) |" in line
    assert "holds 2/2 → degrades 0/2" in line
    assert "2: changed (4x)" in line
    compact = S.format_phase_b_table(table, compact=True).splitlines()
    assert compact[0] == "| task | scheme | fit 2,000 → 5,000 | 2x | 4x | horizon | note |"
    assert "| offset copy | NoPE | 0/2 → 0/2 | – → – | – → – | – | still none fits (highest 0.50) |" in compact
    recall = [x for x in compact if "associative recall" in x or "| randomized |" in x]
    assert recall[0].startswith("| associative recall | NoPE |") and recall[1].startswith("|  | randomized |")
    assert "newly fits: 2x refuted, 4x refuted" in recall[1]
    assert [x for x in compact if "| T5 |" in x][0].endswith("| holds → degrades | 64 → 16 | label changes at 4x |")


def test_plot_draws_a_line_per_trial(fake):
    fig, axes = plt.subplots(1, 2)
    out = S.plot_phase_b_group(axes, fake[0], *CHANGED)
    assert out["trials"] == [(0, 1e-3), (1, 1e-3)] and out["missing"] is None
    assert len(axes[0].lines) == 2 + 2 + 1  # trials, the 2,000-step and fit lines, one legend handle
    missing = S.plot_phase_b_group(axes, fake[0], "latest_marker", "rope", "bos")
    assert missing["trials"] == [] and "not in phase B" in missing["missing"]
    plt.close(fig)


# --------------------------------------------------------------------------- bad input


def test_bad_input_names_the_argument(fake, table):
    with pytest.raises(TypeError, match="results_b"):
        S.phase_b_table(3, fake[1])
    with pytest.raises(TypeError, match="results_a"):
        S.phase_b_trials(fake[0], [1, 2])
    with pytest.raises(ValueError, match="results_b"):
        S.phase_b_table(fake[1], fake[1])  # phase A's file passed as phase B's
    with pytest.raises(ValueError, match="results_a"):
        S.phase_b_table(fake[0], {"rows": [{**r, "phase": "B"} for r in fake[1]["rows"]]})
    with pytest.raises(ValueError, match="checkpoint"):
        S.phase_b_table(*fake, checkpoint="last")
    broken = {"rows": [{k: v for k, v in r.items() if k != "heldout"} for r in fake[0]["rows"]]}
    with pytest.raises(ValueError, match="results_b.*heldout"):
        S.phase_b_trials(broken, fake[1])
    with pytest.raises(ValueError, match="results_b rows"):
        S.phase_b_trials({"rows": [{"phase": "B", "task": "offset_copy"}]}, fake[1])
    with pytest.raises(ValueError, match="results_b must run past"):
        S.phase_b_trials({**fake[0], "config": {"steps": 2000}}, fake[1])
    with pytest.raises(TypeError, match="table"):
        S.phase_b_summary("table")
    with pytest.raises(ValueError, match="table"):
        S.phase_b_summary([{"task": "offset_copy", "scheme": "none", "variant": "plain", "status": "done"}])
    with pytest.raises(TypeError, match="compact"):
        S.format_phase_b_table(table, compact="yes")
    with pytest.raises(TypeError, match="table"):
        S.format_phase_b_table(None)
    with pytest.raises(ValueError, match="table"):
        S.format_phase_b_table([])
    fig, ax = plt.subplots()
    with pytest.raises(TypeError, match="axes"):
        S.plot_phase_b_group(ax, fake[0], *CHANGED)
    with pytest.raises(ValueError, match="scheme"):
        S.plot_phase_b_group([ax, ax], fake[0], "offset_copy", "learned", "plain")
    plt.close(fig)


# --------------------------------------------------------------------------- the shipped files


@pytest.fixture(scope="module")
def shipped():
    from posenc.book.resources import resource_path

    return S.load_grid(resource_path("alternatives_v2_B.json")), S.load_grid(None)


def test_shipped_best_at_2000_equals_phase_a_best_where_replayed(shipped):
    b, a = shipped
    trials = S.phase_b_trials(b, a)
    assert trials and all(t["replays_a"] for t in trials)
    a_rows = {(r["task"], r["scheme"], r["variant"], r["seed"], r["lr"], r["checkpoint"]): r for r in a["rows"]
              if r.get("phase", "A") == "A" and r["checkpoint"] in ("best", "final")}
    b_rows: dict = {}
    for r in b["rows"]:
        b_rows.setdefault((r["task"], r["scheme"], r["variant"], r["seed"], r["lr"]), []).append(r)
    on_grid = 0
    for t in trials:
        key = (t["task"], t["scheme"], t["variant"], t["seed"], t["lr"])
        best_a = a_rows[(*key, "best")]
        assert t["agrees"] and t["best"][0] == best_a
        # phase B's own rows, independently: its 50-step held-out list up to 2,000 is phase A's, and its lowest
        # loss is phase A's best (at phase A's best step, up to a rounded tie)
        final_b = [r for r in b_rows[key] if r["checkpoint"] == "final"][0]
        h = final_b["heldout"][:40]
        assert h == a_rows[(*key, "final")]["heldout"]
        assert min(h) == best_a["heldout_loss"] and h[best_a["steps"] // 50 - 1] == min(h)
        scored = [r for r in b_rows[key] if r["checkpoint"] == "trajectory" and r["steps"] == best_a["steps"]]
        for r in scored:  # where phase B scored that step, its scores are phase A's best
            on_grid += 1
            assert all(r[k] == best_a[k] for k in ("heldout_loss", "acc_1x", "beyond_2x", "beyond_4x"))
        assert t["best"][1] == [r for r in b_rows[key] if r["checkpoint"] == "best"][0]
    assert on_grid > 0


def test_shipped_groups_are_phase_b_members(shipped):
    b, a = shipped
    table = S.phase_b_table(b, a)
    assert len(table) == 48 and sum(r["n"] for r in table) == 292
    done = [r for r in table if r["status"] == "done"]
    assert done and all(r["replays_a"] == r["agrees"] == r["n"] for r in done)
    s = S.phase_b_summary(table)
    assert s["planned"] == 48 and s["groups"] == len(done)
    assert all(math.isfinite(x) for x in s["prediction_1"]["fit"])


def test_phase_b_summary_names_the_groups_still_climbing():
    # two groups fit nothing at 2,000 or 5,000: one climbs by 0.2 in median, one by 0.05
    base = {"status": "done", "n": 1, "n_both": 0, "gained": 0, "lost": 0, "p2": None, "p3": None,
            "p1": {"fit": (0, 0), "outcome": "gains none"}, "all": None}
    table = [{**base, "task": "offset_copy", "scheme": "alibi", "variant": "plain",
              "acc_1x_median": (0.6, 0.8), "acc_1x_max": (0.7, 0.9)},
             {**base, "task": "offset_copy", "scheme": "none", "variant": "plain",
              "acc_1x_median": (0.5, 0.55), "acc_1x_max": (0.6, 0.93)}]
    p1 = S.phase_b_summary(table)["prediction_1"]
    assert p1["groups_still"] == [("offset_copy", "alibi", "plain"), ("offset_copy", "none", "plain")]
    assert p1["groups_climbing"] == [("offset_copy", "alibi", "plain")]
    assert p1["closest"] == ("offset_copy", "none", "plain")
