"""The small transformer, its positional schemes, the tasks and the training loop (chapter 6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import posenc
from posenc import book
from posenc.book import RunConfig

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results" / "alternatives.json"


def _saved():
    return json.loads(RESULTS.read_text())


def test_saved_results_cover_the_grid_and_learned_cannot_run_past_max_len():
    saved = _saved()
    final = [r for r in saved["rows"] if r["steps"] == saved["config"]["steps"]]
    assert {(r["task"], r["scheme"]) for r in final} == {(t, s) for t in book.TASKS for s in book.SCHEMES}
    assert len({r["seed"] for r in final}) >= 3
    for r in final:
        if r["scheme"] == "learned":
            assert r["acc_2x"] is None and r["acc_4x"] is None and r["acc_1x"] is not None
        else:
            assert None not in (r["acc_1x"], r["acc_2x"], r["acc_4x"])


def test_saved_results_support_the_chapter_text():
    saved = _saved()
    s = book.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
    acc = lambda task, scheme, f: s[(task, scheme)][f"acc_{f}x"][0]
    # offset copy: Shaw extrapolates perfectly, sinusoidal does not
    assert acc("offset_copy", "shaw", 4) == 1.0
    assert acc("offset_copy", "sinusoidal", 1) == 1.0 and acc("offset_copy", "sinusoidal", 2) < 0.6
    assert acc("offset_copy", "rope", 2) == 1.0 and acc("offset_copy", "rope", 4) < 0.8
    assert acc("offset_copy", "alibi", 1) < 0.8
    assert 1 / 16 * 3 < acc("offset_copy", "none", 1) < 0.6  # NoPE: well above chance
    # fixed retrieve: sinusoidal holds; T5 and Shaw nearly solve it; RoPE fails beyond 1x
    assert acc("fixed_retrieve", "sinusoidal", 4) > 0.98
    assert min(acc("fixed_retrieve", s_, 4) for s_ in ("t5", "shaw")) > 0.9
    assert acc("fixed_retrieve", "rope", 1) > 0.98 and acc("fixed_retrieve", "rope", 4) < 0.7
    # learned equals sinusoidal in distribution
    for task in book.TASKS:
        assert acc(task, "learned", 1) == acc(task, "sinusoidal", 1) == 1.0


def test_saved_results_reproduce_one_row():
    """A re-run of one saved row (300-step checkpoint) gives the same rounded accuracies."""
    torch.set_num_threads(1)
    saved = _saved()
    row = next(
        r for r in saved["rows"] if (r["task"], r["scheme"], r["seed"], r["steps"]) == ("offset_copy", "t5", 0, 300)
    )
    cfg = RunConfig(**{**saved["config"], "eval_factors": tuple(saved["config"]["eval_factors"]), "steps": 300})
    r = book.run_trial("t5", "offset_copy", 0, cfg)
    for key in ("acc_1x", "acc_2x", "acc_4x"):
        assert round(r[key], 4) == row[key]


def test_chapter6_quoted_settings_and_orderings():
    """Numbers chapter 6 glues from the model settings, and orderings its text states."""
    config = RunConfig()
    # the settings the chapter states in prose (model, optimiser, data, evaluation)
    assert (config.d_model, config.n_layers, config.n_heads) == (32, 2, 4)
    assert (config.lr, config.batch_size, config.train_len, config.vocab_size) == (3e-3, 32, 16, 16)
    assert config.eval_size == 256 and config.eval_factors == (1, 2, 4)
    assert (config.offset, config.index) == (3, 2)
    saved_config = _saved()["config"]
    assert saved_config["steps"] == 1500 and len({r["seed"] for r in _saved()["rows"]}) == 3  # "1500 steps, 3 seeds"
    assert config.model("shaw").blocks[0].shaw.max_distance == 8  # "clipping distance of 8"
    omega = posenc.rotary_frequencies(config.d_model // config.n_heads)
    assert omega[1] == pytest.approx(0.1) and 2 * math.pi / omega[1] == pytest.approx(62.83, abs=0.01)
    saved = _saved()
    s = book.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
    acc = lambda task, scheme, f: s[(task, scheme)][f"acc_{f}x"][0]
    # offset copy at 4x: the sinusoidal model falls below every relative scheme, ALiBi included
    assert acc("offset_copy", "sinusoidal", 4) < min(acc("offset_copy", x, 4) for x in ("rope", "t5", "shaw", "alibi"))
    # fixed retrieve: ALiBi and NoPE stay far below the schemes that can address exact offsets
    assert max(acc("fixed_retrieve", x, 1) for x in ("alibi", "none")) < 0.7


def test_chapter6_rope_and_memory_claims():
    """Chapter 6: RoPE does not reliably extrapolate; a learned table is a tiny share of BERT/GPT-2."""
    transformers = pytest.importorskip("transformers")
    saved = _saved()
    s = book.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
    assert s[("fixed_retrieve", "rope")]["acc_2x"][0] < 0.7
    with torch.device("meta"):
        bert = transformers.BertModel(transformers.BertConfig())
        gpt2 = transformers.GPT2Model(transformers.GPT2Config())
    for model, name in [(bert, "embeddings.position_embeddings.weight"), (gpt2, "wpe.weight")]:
        table = dict(model.named_parameters())[name].numel()
        assert table / book.count_parameters(model) < 0.01


@pytest.mark.parametrize("notebook", ["01_motivation", "05_tabular", "06_alternatives"])
def test_every_glued_name_in_the_prose_is_stored_in_the_notebook(notebook):
    """A {glue:text} key the prose uses but no cell glues only shows up as a build warning."""
    import re

    nb = json.loads((Path(__file__).parents[2] / "notebooks" / f"{notebook}.ipynb").read_text())
    stored = {
        o.get("metadata", {}).get("scrapbook", {}).get("name")
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
    }
    used = set()
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            text = "".join(c["source"])
            used |= set(re.findall(r"\{glue:text\}`([^`:]+)", text))
            used |= set(re.findall(r"```\{glue:figure\} (\S+)", text))
    assert used and used <= stored, sorted(used - stored)
