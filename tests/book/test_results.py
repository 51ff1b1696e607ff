"""posenc.book.results: result keys, summaries, the results file format, and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.book.results import (
    acc_key,
    pos_key,
    read_results,
    summarize,
    summarize_trials,
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


def test_summarize_trials_groups_and_filters():
    out = summarize_trials(ROWS, keys=("acc_1x",))
    assert out[("t", "x")]["acc_1x"] == pytest.approx((0.6, math.sqrt(0.02), 2))
    assert out[("t", "y")]["acc_1x"][2] == 0
    assert summarize_trials(ROWS, steps=11, keys=("acc_1x",)) == {}


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(rows={"task": "t"}), TypeError, "rows must be a list of dicts"),
        (dict(rows=[ROWS[0], "row"]), TypeError, "rows must be a list of dicts"),
        (dict(rows=ROWS, keys="acc_1x"), TypeError, "keys must be a tuple of field names"),
        (dict(rows=ROWS, by="task"), TypeError, "by must be a tuple of field names"),
        (dict(rows=ROWS, by=("task", 3)), TypeError, "by must be a tuple"),
        (dict(rows=ROWS, by=("task", "seed")), ValueError, r"rows\[0\] has no field 'seed'"),
        (dict(rows=ROWS, steps=2.5), TypeError, "steps"),
        (dict(rows=ROWS, steps=-1), ValueError, "steps"),
        (dict(rows=[{"task": "t", "scheme": "x", "acc_1x": "high"}]), TypeError, "must be"),
    ],
)
def test_summarize_trials_bad_input(kwargs, error, match):
    rows = kwargs.pop("rows")
    with pytest.raises(error, match=match):
        summarize_trials(rows, **kwargs)


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
