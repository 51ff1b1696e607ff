"""posenc.book.results: result keys, summaries, provenance, the results file format, the harness, bad input."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.book import results as res
from posenc.book.results import (
    Experiment,
    acc_key,
    paired_difference,
    pos_key,
    provenance,
    read_results,
    summarize,
    to_numpy,
    write_results,
)

EXAMPLES = settings(max_examples=25, deadline=None)


def test_keys():
    assert acc_key(2) == "acc_2x" and pos_key(4) == "pos_4x"


@EXAMPLES
@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.none(), st.just(math.nan)), max_size=12))
def test_summarize_is_mean_sample_std_and_count_of_the_present_values(values):
    present = [v for v in values if v is not None and not math.isnan(v)]
    mean, std, n = summarize(values)
    assert n == len(present)
    if n == 0:
        assert math.isnan(mean) and math.isnan(std)
        return
    assert mean == pytest.approx(float(np.mean(present)), rel=1e-9, abs=1e-9)
    if n == 1:
        assert math.isnan(std)
    else:
        assert std == pytest.approx(float(np.std(present, ddof=1)), rel=1e-9, abs=1e-6)
    # the same from a tensor and from an array
    if all(v is not None for v in values):
        assert summarize(torch.tensor(values, dtype=torch.float64))[2] == n
        assert summarize(np.array(values))[2] == n


def test_to_numpy_accepts_tensors_of_every_real_dtype():
    assert to_numpy(torch.ones(2, dtype=torch.bfloat16, requires_grad=True)).dtype == np.float64
    assert to_numpy(torch.tensor([1, 2])).tolist() == [1.0, 2.0]
    assert to_numpy([[1, 2], [3, 4]]).shape == (2, 2)


@EXAMPLES
@given(x=st.one_of(st.none(), st.text(max_size=4), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                   st.just([1, "a"]), st.just([[1.0], [1.0, 2.0]]), st.complex_numbers(allow_nan=False),
                   st.just(torch.ones(2, dtype=torch.complex64))))
def test_to_numpy_refuses_what_is_not_real_numbers(x):
    with pytest.raises(TypeError, match="x must (be|hold)"):
        to_numpy(x)


@EXAMPLES
@given(values=st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=3), st.just(b"ab"), st.none()))
def test_summarize_refuses_scalars_and_strings(values):
    with pytest.raises(TypeError, match="values"):
        summarize(values)


@EXAMPLES
@given(values=st.lists(st.floats(-10, 10), max_size=4).map(lambda v: [*v, math.inf]), sign=st.sampled_from([1, -1]))
def test_summarize_refuses_infinite_values(values, sign):
    values[-1] *= sign
    with pytest.raises(ValueError, match="finite"):
        summarize(values)
    with pytest.raises(ValueError, match="finite"):
        summarize({"a": values})


ROWS = [{"task": "t", "scheme": s, "steps": 10, "acc_1x": a} for s, a in (("x", 0.5), ("x", 0.7), ("y", None))]


def test_results_round_trip(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_results(path, ROWS, config={"steps": 10})
    data = read_results(str(path))
    assert data["rows"] == ROWS and data["config"] == {"steps": 10}
    assert not (tmp_path / "sub" / "r.json.tmp").exists()


def test_results_io_bad_input(tmp_path):
    path = tmp_path / "r.json"
    with pytest.raises(TypeError, match="path must be a str or a pathlib.Path"):
        write_results(3, ROWS)
    with pytest.raises(TypeError, match="path must be a str"):
        read_results(None)
    with pytest.raises(ValueError, match="path must name a file"):
        read_results("")
    with pytest.raises(TypeError, match="rows must be a list of dicts"):
        write_results(path, ({"a": 1},))
    with pytest.raises(TypeError, match="JSON values"):
        write_results(path, [{"acc": torch.tensor(0.5)}])
    with pytest.raises(TypeError, match="JSON values"):
        write_results(path, [{"acc": 0.5}], config={"dtype": torch.float32})
    assert not path.exists()  # nothing written by a refused call
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_results(path)
    path.write_text(json.dumps({"rows": {"a": 1}}))
    with pytest.raises(ValueError, match="a list 'rows'"):
        read_results(path)
    path.write_text(json.dumps({"rows": [1, 2]}))
    with pytest.raises(ValueError, match="every entry of 'rows'"):
        read_results(path)
    with pytest.raises(FileNotFoundError):
        read_results(tmp_path / "missing.json")


def test_accuracy_at_step_takes_each_seed_at_or_before_the_step():
    from posenc.book.training import accuracy_at_step

    rows = [
        {"role": "main", "task": "t", "scheme": "s", "variant": "v", "seed": k, "steps": n, "acc_1x": a}
        for k, n, a in [(0, 400, 0.75), (0, 200, 0.5), (1, 200, 0.25)]
    ] + [{"role": "tune", "task": "t", "scheme": "s", "variant": "v", "seed": 9, "steps": 200, "acc_1x": 1.0}]
    saved = {"rows": rows}
    assert accuracy_at_step(saved, ("t", "s", "v"), 200) == 0.375  # tuning rows ignored
    assert accuracy_at_step(saved, ("t", "s", "v"), 10_000) == 0.5  # seed 1 keeps its final score
    assert math.isnan(accuracy_at_step(saved, ("t", "s", "v"), 100))
    with pytest.raises(ValueError, match="step"):
        accuracy_at_step(saved, ("t", "s", "v"), -1)
    with pytest.raises(TypeError, match="group"):
        accuracy_at_step(saved, ["t", "s", "v"], 200)
    with pytest.raises(TypeError, match="saved"):
        accuracy_at_step([], ("t", "s", "v"), 200)


# ------------------------------------------------------------------ intervals and paired differences


def test_summarize_intervals():
    from scipy import stats

    vals = [2.0, 2.5, 3.5, 4.0]
    s = summarize(vals, interval="t95")
    half = stats.t.ppf(0.975, 3) * np.std(vals, ddof=1) / 2
    assert s.interval == pytest.approx((3.0 - half, 3.0 + half)) and s.kind == "t95"
    assert summarize(vals).interval == pytest.approx((3.0 - s.sd, 3.0 + s.sd))
    b = summarize(vals, interval="bootstrap")
    assert b.interval == summarize(vals, interval="bootstrap").interval  # a fixed function of the values
    assert 2.0 <= b.interval[0] < 3.0 < b.interval[1] <= 4.0
    assert all(math.isnan(x) for x in summarize([1.0], interval="t95").interval)
    mean, sd, n = s
    assert (mean, n) == (3.0, 4) and s[:] == (s.mean, s.sd, s.n)
    with pytest.raises(ValueError, match="interval must be one of"):
        summarize(vals, interval="95")


def test_paired_difference():
    a, b = [2.0, 2.2, 2.4, None], [2.5, 2.6, 2.8, 3.0]
    d = paired_difference(a, b)
    assert d["n"] == 3 and d["mean"] == pytest.approx(-13 / 30) and d["a_lower"] == 3
    assert d["t95"][0] < d["mean"] < d["t95"][1] < 0
    assert d["bootstrap"][0] <= d["mean"] <= d["bootstrap"][1]
    with pytest.raises(ValueError, match="same length"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(TypeError, match="a must be"):
        paired_difference("ab", [1.0, 2.0])
    with pytest.raises(ValueError, match="b must hold finite"):
        paired_difference([1.0, 2.0], [1.0, math.inf])


# ------------------------------------------------------------------ provenance


def test_provenance_names_the_checkout_commit(monkeypatch, tmp_path):
    p = provenance(core_hours=0.25)
    head = subprocess.run(["git", "-C", str(res.REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert p["commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    assert p["core_hours"] == 0.25 and p["torch"] == torch.__version__ and p["numpy"] == np.__version__
    assert p["machine"]["cpus"] >= 1 and p["threads"] == torch.get_num_threads()
    monkeypatch.setattr(res, "REPO", tmp_path)  # not a git checkout (an installed copy)
    assert provenance()["commit"] is None and provenance()["dirty"] is None
    with pytest.raises(ValueError, match="core_hours"):
        provenance(core_hours=-1)


# ------------------------------------------------------------------ the harness, on a tiny fake experiment


class Clock:
    """A fake perf_counter: each unit of the fake experiment takes one minute."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def fake(monkeypatch, tmp_path):
    clock = Clock()
    monkeypatch.setattr(res.time, "perf_counter", clock)
    calls = []

    def run_unit(unit, ctx):
        calls.append(unit)
        clock.t += 60.0
        kind, x = unit
        return {"rows": [{"kind": kind, "x": x, "y": x * x if not ctx.quick else -1}]}

    def make(**kw):
        kw.setdefault("pack", 2)
        return Experiment("fake", tmp_path / "fake.json", run_unit, [("sq", x) for x in range(5)],
                          protocol={"p": 1}, fingerprint=lambda: {"losses": [1.0]}, **kw)

    return make, calls, tmp_path / "fake.json"


def test_experiment_runs_the_plan_and_resumes(fake, capsys):
    make, calls, path = fake
    assert make().main([]) == 0
    saved = read_results(path)
    assert [r["y"] for r in saved["rows"]] == [0, 1, 4, 9, 16]
    assert [u["key"] for u in saved["units"]] == [f"sq:{x}" for x in range(5)]
    assert saved["protocol"] == {"p": 1} and saved["fingerprint"] == {"losses": [1.0]}
    assert saved["provenance"]["commit"] == provenance()["commit"] and "core_hours" in saved["provenance"]
    out = capsys.readouterr().out
    assert "[fake] pack 1/3: 2 units done, 3 left" in out and "core-min" in out and "min left" in out
    assert "pack 3/3: 5 units done, 0 left" in out
    calls.clear()
    make().main([])  # resume: every unit is done
    assert calls == [] and len(read_results(path)["rows"]) == 5


def test_experiment_stops_before_the_time_budget_and_continues(fake, capsys):
    make, calls, path = fake
    make(pack=5).main(["--max-minutes", "2.5"])  # units take a minute: the third would end at 3
    assert len(calls) == 2 and len(read_results(path)["units"]) == 2  # the partial pack is saved
    assert "stopping before sq:2 (3 units left)" in capsys.readouterr().out
    make().main([])
    assert [c[1] for c in calls] == [0, 1, 2, 3, 4]  # nothing run twice
    assert [r["x"] for r in read_results(path)["rows"]] == [0, 1, 2, 3, 4]


def test_experiment_quick_saves_nothing(fake):
    make, calls, path = fake
    make().main(["--quick", "--quiet"])
    assert calls == [("sq", 0)] and not path.exists()


def test_experiment_quick_out_writes_a_fixture_with_the_schema(fake, tmp_path):
    make, calls, path = fake
    out = tmp_path / "quick.json"
    make(quick_plan=[("sq", 2), ("sq", 3)]).main(["--quick", "--quiet", "--out", str(out)])
    saved = read_results(out)
    assert saved["quick"] is True and saved["protocol"] == {"p": 1} and not path.exists()
    assert [r["x"] for r in saved["rows"]] == [2, 3] and [u["key"] for u in saved["units"]] == ["sq:2", "sq:3"]
    make().main(["--quick", "--quiet", "--out", str(out)])      # a quick file may be replaced
    assert [r["x"] for r in read_results(out)["rows"]] == [0]
    with pytest.raises(SystemExit, match="results file"):
        make().main(["--quick", "--quiet", "--out", str(path)])
    with pytest.raises(SystemExit, match="results file"):    # the same file by another path
        make().main(["--quick", "--quiet", "--out", str(tmp_path / ".." / tmp_path.name / "fake.json")])
    other = tmp_path / "other.json"
    write_results(other, [{"x": 1}])
    with pytest.raises(SystemExit, match="not written by a quick run"):
        make().main(["--quick", "--quiet", "--out", str(other)])
    assert read_results(other)["rows"] == [{"x": 1}] and not path.exists()


def test_experiment_refuses_a_file_of_another_protocol(fake):
    make, calls, path = fake
    write_results(path, [], protocol={"p": 2})
    with pytest.raises(SystemExit, match="another protocol"):
        make().main(["--quiet"])


def test_experiment_write_is_atomic(fake, monkeypatch):
    make, calls, path = fake
    make(pack=1).main(["--quiet", "--max-minutes", "1.5"])
    before = path.read_text()

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(res.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        make(pack=1).main(["--quiet"])
    assert path.read_text() == before  # a stop while writing leaves the last complete file


def test_experiment_plan_may_grow_with_the_results(tmp_path):
    def plan(saved):  # the second stage depends on the first's result
        first = [r for r in saved["rows"] if r["stage"] == "tune"]
        return ["tune"] + ([f"main{first[0]['best']}"] if first else [])

    def run_unit(unit, ctx):
        return {"rows": [{"stage": "tune", "best": 7} if unit == "tune" else {"stage": unit}]}

    Experiment("grow", tmp_path / "g.json", run_unit, plan).main(["--quiet"])
    assert [r["stage"] for r in read_results(tmp_path / "g.json")["rows"]] == ["tune", "main7"]


def test_experiment_commits_each_pack(fake, monkeypatch, tmp_path):
    make, calls, path = fake
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "other.txt").write_text("not committed by the harness")
    monkeypatch.setattr(res, "REPO", tmp_path)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@t")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@t")
    make().main(["--quiet", "--commit"])
    log = subprocess.run([*git, "log", "--format=%s", "--name-only"], capture_output=True, text=True).stdout
    assert log.count("fake: pack") == 3 and "fake: pack 1/3, 2 units done, 3 left" in log
    assert "other.txt" not in log and "fake.json" in log


def test_experiment_bad_input(tmp_path):
    with pytest.raises(TypeError, match="run_unit must be callable"):
        Experiment("x", tmp_path / "x.json", None, [1])
    with pytest.raises(TypeError, match="plan must be"):
        Experiment("x", tmp_path / "x.json", lambda u, c: {}, "abc")
    with pytest.raises(ValueError, match="pack"):
        Experiment("x", tmp_path / "x.json", lambda u, c: {}, [1], pack=0)
    with pytest.raises(TypeError, match="dict of lists"):
        Experiment("x", tmp_path / "x.json", lambda u, c: [1], [1]).main(["--quiet"])
    with pytest.raises(TypeError, match="a unit must be"):
        Experiment("x", tmp_path / "x.json", lambda u, c: {}, [[1]]).main(["--quiet"])


def test_tuned_grid_helpers_choose_the_lowest_score_and_plan_seeds_after_tuning():
    from posenc.book.results import Context, chosen_lr, timed_unit, tuning_plan

    rows = [{"variant": "a", "role": "tune", "lr": lr, "heldout_loss": v} for lr, v in ((0.03, 0.2), (0.01, 0.2))]
    assert chosen_lr(rows, "a", (0.01, 0.03)) == 0.01  # a tie goes to the smaller rate
    assert chosen_lr(rows, "a", (0.01, 0.03, 0.1)) is None
    assert chosen_lr(rows, "b", (0.01,)) is None
    assert tuning_plan({"rows": rows}, ["a", "b"], (0.01, 0.03), (0, 1)) == [
        ("tune", "a", 0.01), ("tune", "a", 0.03), ("main", "a", 0), ("main", "a", 1),
        ("tune", "b", 0.01), ("tune", "b", 0.03)]
    logged = []
    out = timed_unit(Context(False, {"rows": []}, logged.append), lambda: {"x": 1})
    assert list(out["rows"][0]) == ["x", "seconds"] and len(logged) == 1


def _pool_experiment(path, fail_at=None, **kw):
    """A tiny experiment with a plan that grows (a tuning stage, then seeds) and two sections of output."""
    import time as _time

    def plan(saved):
        tuned = [r for r in saved["rows"] if r["stage"] == "tune"]
        return [("tune", x) for x in range(3)] + ([("main", x) for x in range(5)] if len(tuned) == 3 else [])

    def run_unit(unit, ctx):
        stage, x = unit
        if unit == fail_at:
            raise RuntimeError(f"unit {unit} failed")
        _time.sleep(0.02)
        best = max(r["y"] for r in ctx.saved["rows"] if r["stage"] == "tune") if stage == "main" else None
        return {"rows": [{"stage": stage, "x": x, "y": x * x, "best": best}], "runs": [{"x": x, "curve": [x, x + 1]}]}

    return Experiment("pool", path, run_unit, plan, **{"pack": 2, **kw})


def _content(path):
    saved = read_results(path)
    return saved["rows"], saved["runs"], [u["key"] for u in saved["units"]]


def test_workers_write_the_same_rows_as_one_worker(tmp_path):
    _pool_experiment(tmp_path / "one.json").main(["--quiet"])
    _pool_experiment(tmp_path / "two.json").main(["--quiet", "--workers", "2"])
    assert _content(tmp_path / "two.json") == _content(tmp_path / "one.json")
    saved = read_results(tmp_path / "two.json")
    assert saved["provenance"]["workers"] == 2 and saved["provenance"]["core_hours"] is not None
    assert [r["best"] for r in saved["rows"] if r["stage"] == "main"] == [4] * 5  # seeds saw the merged tuning


def test_a_failed_pack_loses_at_most_the_packs_in_flight_and_a_rerun_completes(tmp_path):
    path = tmp_path / "two.json"
    with pytest.raises(RuntimeError, match="failed"):
        _pool_experiment(path, fail_at=("main", 2), pack=1).main(["--quiet", "--workers", "2"])
    keys = _content(path)[2]
    assert "main:2" not in keys and len(keys) >= 8 - 1 - 2  # the failed pack, at most one more in flight, and 2 after
    assert set(keys) >= {"tune:0", "tune:1", "tune:2", "main:0"}
    _pool_experiment(path).main(["--quiet", "--workers", "2"])
    _pool_experiment(tmp_path / "one.json").main(["--quiet"])
    assert _content(path)[:2] == _content(tmp_path / "one.json")[:2]


def test_workers_hand_out_no_pack_past_the_time_budget(tmp_path):
    _pool_experiment(tmp_path / "t.json").main(["--quiet", "--workers", "2", "--max-minutes", "0"])
    assert not (tmp_path / "t.json").exists()
    with pytest.raises(ValueError, match="--workers"):
        _pool_experiment(tmp_path / "t.json").main(["--quiet", "--workers", "0"])
    with pytest.raises(ValueError, match="workers"):
        _pool_experiment(tmp_path / "t.json", workers=0)
