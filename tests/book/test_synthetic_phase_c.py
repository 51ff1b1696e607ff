"""Phase C's extra seeds pooled into chapter 6's verdicts (``group_table(more_seeds=...)``).

The default (no ``more_seeds``) gives exactly the table it gave before phase C was read;
pooling adds exactly phase C's rows of each group it holds; ``phase_c_changes`` agrees
with the two tables; bad arguments are errors that name the argument.
"""

from __future__ import annotations

import functools
import math

import pytest

from posenc.book import resources, synthetic

KEYS = ("task", "scheme", "variant")


@functools.cache
def _shipped():
    a = synthetic.load_grid()
    c = synthetic.load_grid(resources.resource_path("alternatives_v2_C.json"))
    return a, c, synthetic.group_table(a), synthetic.group_table(a, more_seeds=c)


def _group(r):
    return tuple(r[k] for k in KEYS)


def _c_groups(c, checkpoint="best"):
    out: dict = {}
    for r in c["rows"]:
        if r["checkpoint"] == checkpoint:
            out.setdefault(_group(r), []).append(r)
    return out


def _rows(task="offset_copy", scheme="rope", variant="plain", seeds=range(4), lr=3e-3, phase=None, **values):
    base = {"task": task, "scheme": scheme, "variant": variant, "lr": lr, "steps": 2000, "checkpoint": "best",
            "acc_1x": 1.0, "heldout_loss": 0.1, "beyond_2x": 0.95, "beyond_4x": 0.5, **values}
    return [{**base, "seed": s, **({"phase": phase} if phase else {})} for s in seeds]


# ----------------------------------------------------------------------------- the default is unchanged


def test_default_table_is_the_table_before_phase_c():
    """Without ``more_seeds`` nothing is pooled: no new keys, and the shipped file's counts as the chapter read
    them before phase C (167 confirmed, 63 refuted, 64 open; 12 and 8 uncertain cells at 2x and 4x)."""
    a, _, before, _ = _shipped()
    assert before == synthetic.group_table(a, more_seeds=None)
    assert not any("added_seeds" in r or "added_lr" in r for r in before)
    s = synthetic.prediction_summary(before)
    assert (s["confirmed"], s["refuted"], s["open"], s["missing"]) == (167, 63, 64, 0)
    for f, n in ((2, 12), (4, 8)):
        assert sum(r[f"label_{f}x"].startswith("uncertain") for r in before) == n


def test_groups_without_added_seeds_are_unchanged():
    _, c, before, after = _shipped()
    added = _c_groups(c)
    for b, p in zip(before, after):
        assert _group(b) == _group(p)
        rest = {k: v for k, v in p.items() if k not in ("added_seeds", "added_lr")}
        if _group(p) in added:
            assert p["added_seeds"] == len(added[_group(p)]) == len(synthetic.PHASE_C_SEEDS)
        else:
            assert p["added_seeds"] == 0 and p["added_lr"] is None and rest == b


def test_an_empty_more_seeds_changes_nothing_but_the_marks():
    a, _, before, _ = _shipped()
    pooled = synthetic.group_table(a, more_seeds={"rows": []})
    assert [{k: v for k, v in r.items() if k not in ("added_seeds", "added_lr")} for r in pooled] == before
    assert {r["added_seeds"] for r in pooled} == {0}


# ----------------------------------------------------------------------------- pooling adds exactly phase C's rows


def test_pooling_adds_exactly_the_rows_of_phase_c():
    """Fit k/n grows by phase C's trials and its fitting seeds; the per-seed points are phase A's (at the rates
    that fit) plus phase C's; the verdict equals ``group_verdict`` of those rows together."""
    a, c, before, after = _shipped()
    added = _c_groups(c)
    assert len(added) == 30
    floors = {t: synthetic.task_floors(t) for t in {g[0] for g in added}}
    for group, extra in added.items():
        b = synthetic.table_row(before, *group)
        p = synthetic.table_row(after, *group)
        kb, nb = map(int, b["fit"].split("/"))
        kp, np_ = map(int, p["fit"].split("/"))
        fit_c = sum(r["acc_1x"] >= synthetic.FIT for r in extra)
        assert (kp, np_) == (kb + fit_c, nb + len(extra)), group
        assert {r["lr"] for r in extra} == {p["added_lr"]}
        mine = [r for r in a["rows"] if r.get("phase", "A") == "A" and _group(r) == group and r["checkpoint"] == "best"]
        pool = set(synthetic.lr_band(mine)["fitting"]) or {r["lr"] for r in mine}
        assert p["added_lr"] in pool, group  # phase C ran at the band's centre
        verdict = synthetic.group_verdict([r for r in mine if r["lr"] in pool] + extra, floors[group[0]])
        for f in (2, 4):
            e = verdict[f"beyond_{f}x"]
            assert p[f"label_{f}x"] == e["label"] and p[f"held_{f}x"] == e["held"], group
            fitting = [r[f"beyond_{f}x"] for r in extra if r["acc_1x"] >= synthetic.FIT]
            assert sorted(p[f"seeds_{f}x"]) == sorted(b[f"seeds_{f}x"] + [round(v, 4) for v in fitting]), group
        assert p["lr"] == b["lr"]  # the band is still chosen on phase A's rows


def test_pooling_on_a_small_grid():
    a = _rows(beyond_4x=0.5) + _rows(seeds=range(4), lr=1e-3, acc_1x=0.2)
    c = _rows(seeds=range(4, 10), phase="C", beyond_4x=0.96)
    row = synthetic.table_row(synthetic.group_table({"rows": a}, more_seeds={"rows": c}), "offset_copy", "rope", "plain")
    assert row["fit"] == "10/10" and row["added_seeds"] == 6 and row["added_lr"] == 3e-3
    assert row["seeds_4x"] == [0.5] * 4 + [0.96] * 6
    assert math.isclose(row["beyond_4x"], (4 * 0.5 + 6 * 0.96) / 10)
    alone = synthetic.table_row(synthetic.group_table({"rows": a}), "offset_copy", "rope", "plain")
    assert alone["fit"] == "4/4" and alone["seeds_4x"] == [0.5] * 4


def test_grid_verdicts_counts_the_added_trials():
    a = _rows()
    v = synthetic.grid_verdicts(a, more_seeds=_rows(seeds=range(4, 10), phase="C"))[("offset_copy", "rope", "plain")]
    assert v["added"] == 6 and v["trials"] == 10 and v["pooled"]["fit"]["n"] == 10 and v["chosen"]["fit"]["n"] == 4
    assert "added" not in synthetic.grid_verdicts(a)[("offset_copy", "rope", "plain")]


# ----------------------------------------------------------------------------- the changes table


def test_changes_agree_with_the_two_tables():
    a, c, before, after = _shipped()
    changes = synthetic.phase_c_changes(a, c)
    assert [_group(r) for r in changes] == [_group(r) for r in after if r.get("added_seeds")]
    for r in changes:
        b, p = synthetic.table_row(before, *_group(r)), synthetic.table_row(after, *_group(r))
        for name in ("fit", "fit_label", "label_2x", "label_4x", "beyond_4x_interval", "held_2x", "horizon"):
            assert r[f"{name}_before"] == b[name] or (name == "horizon" and math.isnan(b[name])), (name, r)
            assert r[f"{name}_after"] == p[name] or (name == "horizon" and math.isnan(p[name])), (name, r)
        labels = {"fit": "fit_label", "2x": "label_2x", "4x": "label_4x"}
        assert r["changes"] == [w for w, n in labels.items() if b[n] != p[n]]
        assert r["changed"] == bool(r["changes"]) and set(r["kinds"]) == set(r["changes"])
        assert r["lr"] == p["added_lr"] and r["added_seeds"] == 6
    assert sum(r["changed"] for r in changes) == 11


def test_change_kinds():
    kinds = {k for r in synthetic.phase_c_changes(*_shipped()[:2]) for k in r["kinds"].values()}
    assert kinds <= {"resolved", "still uncertain", "became uncertain", "relabelled"}
    assert synthetic._change_kind("uncertain (holds)", "holds") == "resolved"
    assert synthetic._change_kind("holds", "uncertain (holds)") == "became uncertain"
    assert synthetic._change_kind("uncertain (holds)", "uncertain (degrades)") == "still uncertain"
    assert synthetic._change_kind("fits", "split") == "relabelled"


def test_format_phase_c_changes():
    changes = synthetic.phase_c_changes(*_shipped()[:2])
    full = synthetic.format_phase_c_changes(changes).splitlines()
    compact = synthetic.format_phase_c_changes(changes, compact=True).splitlines()
    assert len(full) == 2 + len(changes) and len(compact) == 2 + sum(r["changed"] for r in changes)
    assert full[0] == "| group | rate | fit | beyond 2x | beyond 4x |"
    assert any(line.startswith("| ALiBi, latest marker |") and line.endswith("**holds** |") for line in compact)
    assert synthetic.format_phase_c_changes([]).count("\n") == 1


# ----------------------------------------------------------------------------- paired tests and curves


def test_paired_differences_pair_only_trials_both_schemes_have():
    """Fixed retrieve, plain: T5 and Shaw both got phase C's seeds at 3e-3, so they pair on 12 + 6 trials; T5 and
    RoPE (no extra seeds) still on phase A's 12."""
    a, c, _, _ = _shipped()
    plain = synthetic.paired_scheme_differences(a, "fixed_retrieve", "plain", lr="all")["pairs"]
    pooled = synthetic.paired_scheme_differences(a, "fixed_retrieve", "plain", lr="all", more_seeds=c)["pairs"]
    assert plain[("t5", "shaw")]["n"] == 12 and pooled[("t5", "shaw")]["n"] == 18
    assert pooled[("rope", "t5")]["n"] == plain[("rope", "t5")]["n"] == 12
    # a results file that also holds phase C's rows reads as phase A's alone
    merged = {"rows": a["rows"] + c["rows"]}
    assert synthetic.paired_scheme_differences(merged, "fixed_retrieve", "plain", lr="all")["pairs"] == plain


def test_best_schemes_with_more_seeds():
    a, c, _, after = _shipped()
    for variant in ("plain", "bos"):  # the chapter's claims hold on the pooled table
        assert synthetic.best_schemes(a, after, "offset_copy", variant, more_seeds=c)["tied"] == ["shaw"]
        assert synthetic.best_schemes(a, after, "long_offset_copy", variant, more_seeds=c)["tied"] == ["t5"]
    got = synthetic.best_schemes(a, after, "latest_marker", "plain", more_seeds=c)
    assert got["claim"] in ("best", "tied") and set(got["tied"]) <= set(got["order"])
    assert got["order"] == [r["scheme"] for r in sorted(
        (r for r in after if (r["task"], r["variant"]) == ("latest_marker", "plain") and r["label_4x"] != "not fit"),
        key=lambda r: -r["beyond_4x"])]


def test_group_curves_add_the_fitting_seeds_of_phase_c():
    a, c, _, _ = _shipped()
    alone = synthetic.group_curves(a, "latest_marker", "alibi", "plain")
    pooled = synthetic.group_curves(a, "latest_marker", "alibi", "plain", more_seeds=c)
    extra = [r for r in _c_groups(c)[("latest_marker", "alibi", "plain")] if r["acc_1x"] >= synthetic.FIT]
    assert pooled["trials"] == alone["trials"] + [(r["seed"], r["lr"]) for r in extra]
    assert pooled["curves"].shape == (len(alone["trials"]) + len(extra), alone["curves"].shape[1])


def test_heat_table_marks_the_pooled_groups():
    _, _, before, after = _shipped()
    floors = {t: 0.1 for t in synthetic.ALL_TASKS}
    assert "†" not in synthetic.verdict_heat_table(before, floors=floors).markdown
    assert synthetic.verdict_heat_table(after, floors=floors).markdown.count("†") == 30


# ----------------------------------------------------------------------------- bad arguments


def test_bad_more_seeds():
    a = {"rows": _rows()}
    with pytest.raises(TypeError, match="more_seeds"):
        synthetic.group_table(a, more_seeds=5)
    with pytest.raises(ValueError, match="more_seeds"):
        synthetic.group_table(a, more_seeds={"rows": _rows(seeds=range(4, 6))})  # no phase: phase A's rows
    with pytest.raises(ValueError, match="more_seeds"):
        synthetic.group_table(a, more_seeds={"steps": []})
    with pytest.raises(ValueError, match="more_seeds repeats"):
        synthetic.group_table(a, more_seeds={"rows": _rows(seeds=range(3, 6), phase="C")})
    with pytest.raises(ValueError, match="not in rows"):
        synthetic.group_table(a, more_seeds={"rows": _rows(scheme="t5", seeds=range(4, 6), phase="C")})
    with pytest.raises(ValueError, match="phase A"):
        synthetic.group_table({"rows": []}, more_seeds={"rows": _rows(seeds=range(4, 6), phase="C")})
    with pytest.raises(ValueError, match="more_seeds"):
        synthetic.grid_verdicts(_rows(), more_seeds=[{"task": "offset_copy"}])
    with pytest.raises(ValueError, match="more_seeds repeats"):
        synthetic.paired_scheme_differences(a, "offset_copy", "plain", more_seeds={"rows": _rows(phase="C")})


def test_bad_phase_c_changes_arguments():
    a, c = {"rows": _rows()}, {"rows": _rows(seeds=range(4, 10), phase="C")}
    with pytest.raises(TypeError, match="grid_a"):
        synthetic.phase_c_changes(3, c)
    with pytest.raises(TypeError, match="grid_c"):
        synthetic.phase_c_changes(a, [1, 2])
    with pytest.raises(ValueError, match="grid_c"):
        synthetic.phase_c_changes(a, {"no rows": 1})
    with pytest.raises(ValueError, match="checkpoint"):
        synthetic.phase_c_changes(a, c, checkpoint="last")
    with pytest.raises((TypeError, ValueError), match="changes"):
        synthetic.format_phase_c_changes("table")
    with pytest.raises(ValueError, match="changes"):
        synthetic.format_phase_c_changes([{"task": "offset_copy"}])
    with pytest.raises(TypeError, match="compact"):
        synthetic.format_phase_c_changes([], compact="yes")
