"""Chapter 6: the numbers and orderings the chapter states, from the saved results.

The comparison's claims come from ``alternatives_v2.json`` (the fixed-budget runs) and are
checked against it group by group, so they hold for a partial file as for the whole one;
the context extension reads the kept RoPE trial (``ch6_checkpoints.json``) and, for fixed
retrieve only, ``alternatives.json``; the cost study reads ``alternatives_cost.json``.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest
import torch

import posenc
from posenc.book import models, resources, results, synthetic, tasks, training
from posenc.book.training import RunConfig
from posenc.book.training import final_rows, grid_summary, verdict

RESULTS = resources.DATA_DIR  # the saved results ship with posenc.book
VARIANTS = ("plain", "bos")
CHANCE_LEVEL = 0.3  # "chance" in the chapter's verdicts: below 0.3 (chance itself is 1/16)


def _saved():
    return results.read_results(RESULTS / "alternatives.json")


def _grid():
    return grid_summary(final_rows(_saved()))


def _m(g, task, scheme, variant, key):
    return g[(task, scheme, variant)][key][0]


def test_saved_grid_is_complete_and_follows_the_protocol():
    saved = _saved()
    protocol = saved["protocol"]
    assert protocol["lrs"] == [1e-3, 3e-3, 1e-2] and protocol["seeds"] == 5
    assert protocol["shared"]["warmup"] > 0 and protocol["shared"]["patience"] >= 3
    finals = [r for r in saved["rows"] if r.get("final")]
    groups = {(t, s, v) for t in tasks.TASKS for s in models.SCHEMES for v in VARIANTS}
    assert len(tasks.TASKS) >= 4 and len(models.SCHEMES) >= 7
    for group in groups:
        tune = [r for r in finals if (r["task"], r["scheme"], r["variant"]) == group and r["role"] == "tune"]
        main = [r for r in finals if (r["task"], r["scheme"], r["variant"]) == group and r["role"] == "main"]
        assert sorted(r["lr"] for r in tune) == protocol["lrs"], group
        assert sorted(r["seed"] for r in main) == [0, 1, 2, 3, 4], group
        assert len({r["lr"] for r in main}) == 1 and main[0]["lr"] in protocol["lrs"]
        assert protocol["tune_seed"] not in {r["seed"] for r in main}
    for r in saved["rows"]:
        for key in ("task", "scheme", "variant", "seed", "steps", "lr", "acc_1x", "beyond_2x", "beyond_4x"):
            assert key in r
        if r["scheme"] == "learned":
            assert r["beyond_2x"] is None and r["beyond_4x"] is None and r["acc_1x"] is not None


def test_lr_was_chosen_on_the_tuning_seed_by_in_distribution_accuracy():
    saved = _saved()
    finals = [r for r in saved["rows"] if r.get("final")]
    for (t, s, v), entry in _grid().items():
        tune = [r for r in finals if (r["task"], r["scheme"], r["variant"], r["role"]) == (t, s, v, "tune")]
        best = max(r["acc_1x"] for r in tune)
        chosen = next(r for r in tune if r["lr"] == entry["lr"])
        assert chosen["acc_1x"] >= best - 0.005






def test_context_extension_on_fixed_retrieve_in_the_stopping_rule_runs():
    """Fixed retrieve's context extension comes from the first grid (alternatives.json), the only runs that kept
    RoPE's weights on that task: YaRN holds, NTK-aware scaling does not help."""
    rows = [r for r in final_rows(_saved())
            if (r["task"], r["scheme"], r["variant"]) == ("fixed_retrieve", "rope", "plain")]

    def mean(method):
        return results.summarize([r[f"ext_{method}"] for r in rows])[0]

    assert mean("yarn") > 0.85 > mean("none") >= mean("ntk")
    for m in ("none", "ntk", "yarn"):
        assert _glued(f"ext-fixed-{m}") == f"{mean(m):.2f}"


def test_trained_heads_predict_the_fall_under_each_extension():
    """The prediction stated before the data: read through the scaled rotary module, the trained RoPE head's
    q.R(d)k names the first rivalling distance; the same weights, scored, fall there (or within one position)."""
    check = synthetic.rope_extension_check(synthetic.load_checkpoint("offset_copy", "rope", "plain")["model"])
    got = {s["method"] if s["method"] == "none" else f"{s['method']}-{s['factor']:g}": s for s in check["settings"]}
    assert got["none"]["predicted"] == got["none"]["observed"] == 41 == int(_glued("ext-pred-none"))
    assert got["ntk-2"]["predicted"] == 47 == int(_glued("ext-pred-ntk-2"))
    assert got["ntk-2"]["observed"] - 47 in (0, 1) and int(_glued("ext-obs-ntk-2")) == got["ntk-2"]["observed"]
    for key in ("ntk-4", "yarn-2", "yarn-4"):
        assert got[key]["predicted"] is None and got[key]["observed"] is None, key
        assert got[key]["beyond_4x"] > 0.99, key
    assert "no distance up to 63" in _glued("ext-pred-ntk-4") and "either factor" in _glued("ext-pred-yarn")
    assert got["pi-4"]["predicted"] == got["pi-4"]["observed"] < 16 and got["pi-4"]["acc_1x"] < 0.5
    assert _glued("ext-b4-none") == f"{got['none']['beyond_4x']:.2f}" and got["none"]["beyond_4x"] < 0.6


def test_cost_orderings():
    cost = results.read_results(RESULTS / "alternatives_cost.json")
    ms = {(r["scheme"], r["length"]): r["ms_per_step"] for r in cost["rows"]}
    lengths = sorted({n for _, n in ms})
    assert lengths[0] == 16 and lengths[-1] >= 256
    ratio = {s: ms[(s, 256)] / ms[("none", 256)] for s in models.SCHEMES}
    assert max(ratio, key=ratio.get) == "shaw" and 1.2 < ratio["shaw"] < 1.7
    assert all(ms[(s, 16)] / ms[("none", 16)] < 1.3 for s in models.SCHEMES)
    assert all(ratio[s] < 1.15 for s in ("sinusoidal", "learned", "randomized"))


def test_verdict_rule():
    assert verdict(1.0, 1.0) == "fits, holds" and verdict(0.6, 0.2) == "partly, chance"
    assert verdict(0.3, float("nan")) == "fails, cannot run"
    with pytest.raises(TypeError, match="beyond_4x"):
        verdict(1.0, "high")


def test_a_saved_trial_is_reproduced():
    """Re-running one saved trial (Shaw, offset copy, seed 0) stops at the same step with the same accuracies."""
    torch.set_num_threads(1)
    saved = _saved()
    row = next(r for r in final_rows(saved) if (r["task"], r["scheme"], r["variant"], r["seed"]) == ("offset_copy", "shaw", "plain", 0))
    cfg = RunConfig(lr=row["lr"], **saved["protocol"]["shared"])
    r = training.run_trial("shaw", "offset_copy", 0, cfg)
    assert r["steps"] == row["steps"]
    for key in ("acc_1x", "beyond_2x", "beyond_4x"):
        assert abs(r[key] - row[key]) < 0.01


def test_chapter6_quoted_settings():
    """Numbers chapter 6 states from the model settings."""
    config = RunConfig()
    assert (config.d_model, config.n_layers, config.n_heads) == (32, 2, 4)
    assert (config.batch_size, config.train_len, config.vocab_size) == (32, 16, 16)
    assert config.eval_size == 256 and config.eval_factors == (1, 2, 4)
    assert tasks.TASK_DEFAULTS == {"offset_copy": 3, "fixed_retrieve": 2, "long_offset_copy": 10, "far_retrieve": 12}
    assert config.model("shaw").blocks[0].shaw.max_distance == 8  # "clipping distance k = 8"
    assert models.PositionalTransformer(16, scheme="randomized").randomized_max_len == 256
    omega = posenc.rotary_frequencies(config.d_model // config.n_heads)
    assert omega[1] == pytest.approx(0.1) and 2 * math.pi / omega[1] == pytest.approx(62.83, abs=0.01)


def test_chapter6_memory_claim():
    """Chapter 6: a learned table is a tiny share of BERT/GPT-2 (the glued shares)."""
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        bert = transformers.BertModel(transformers.BertConfig())
        gpt2 = transformers.GPT2Model(transformers.GPT2Config())
    for model, name in [(bert, "embeddings.position_embeddings.weight"), (gpt2, "wpe.weight")]:
        table = dict(model.named_parameters())[name].numel()
        assert table / models.count_parameters(model) < 0.01
    assert float(_glued("pos-share-bert-base")) < 1 and float(_glued("pos-share-gpt-2")) < 1


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



# ----------------------------------------------------------------------------- bias engineering (issue 33, theme 3)

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "06_alternatives.ipynb"


def _glued(name: str) -> str:
    """The text a cell glued under ``name`` (as stored in the notebook)."""
    nb = json.loads(NOTEBOOK.read_text())
    for c in nb["cells"]:
        for o in c.get("outputs", []) if c["cell_type"] == "code" else []:
            if o.get("metadata", {}).get("scrapbook", {}).get("name") == name:
                return o["data"]["application/papermill.record/text/plain"].strip("'\"")
    raise KeyError(name)


def test_bias_engineering_headings_are_there_to_be_found():
    text = "".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"])
    for label, heading in [
        ("sec-alternatives-bias-engineering", "## Bias engineering"),
        ("sec-alternatives-alibi-per-key", "### Why released ALiBi code adds"),
        ("sec-alternatives-alibi-encoders", "### ALiBi in bidirectional encoders"),
        ("sec-alternatives-xpos", "### xPos: RoPE with a decay"),
        ("sec-alternatives-bias-kernels", "### Biases in FlashAttention and FlexAttention"),
    ]:
        assert f"({label})=\n{heading}" in text, label


def _alibi_forms(H=4, n=12):
    slopes = posenc.alibi_slopes(H).double()
    per_key = slopes[:, None, None] * torch.arange(n).double()
    paper = posenc.alibi_bias(H, n, dtype=torch.float64)
    symmetric = posenc.alibi_bias(H, n, bidirectional=True, dtype=torch.float64)
    return slopes, per_key, paper, symmetric


def test_alibi_per_key_form_equals_the_papers_under_the_causal_mask_only():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    H, n = 4, 12
    slopes, per_key, paper, symmetric = _alibi_forms(H, n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    # on the keys a query sees, the two forms differ by m_h * i, one constant per row
    row = slopes[:, None, None] * torch.arange(n).double()[:, None]
    assert (per_key - paper - row)[:, causal].abs().max() < 1e-12
    scores = torch.randn(H, n, n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def attention(bias, mask=None):
        s = scores + bias
        return (s if mask is None else s.masked_fill(~mask, float("-inf"))).softmax(-1)

    causal_gap = (attention(per_key, causal) - attention(paper, causal)).abs().max().item()
    encoder_gap = (attention(per_key) - attention(symmetric)).abs().max().item()
    assert causal_gap < 1e-14 and encoder_gap > 0.3
    assert causal_gap < float(_glued("alibi-gap-causal")) == 1e-14 and _glued("alibi-gap-encoder") == f"{encoder_gap:.2f}"
    bloom = build_alibi_tensor(torch.ones(1, n), H, torch.float32)
    assert tuple(bloom.shape) == (H, 1, n) and torch.equal(bloom, per_key.float())
    assert _glued("alibi-bloom-shape") == str((H, 1, n))


def test_symmetric_alibi_alone_cannot_tell_left_from_right():
    H, n, d = 4, 12, 16
    *_, symmetric = _alibi_forms(H, n)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w_q, w_k, w_v = torch.randn(3, d, d, generator=g, dtype=torch.float64)

    def layer(x, bias):
        return (((x @ w_q) @ (x @ w_k).T) / d**0.5 + bias).softmax(-1) @ (x @ w_v)

    assert (layer(x.flip(0), symmetric) - layer(x, symmetric).flip(1)).abs().max() < 1e-12
    causal_form = _alibi_forms(H, n)[2].masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    assert (layer(x.flip(0), causal_form) - layer(x, causal_form).flip(1)).abs().max() > 0.1
    assert float(_glued("alibi-flip-gap")) == 1e-12  # the bound the notebook asserts


def test_xpos_decays_with_distance_depends_on_it_alone_and_overflows_float16_far_out():
    d_h, B = 64, 512
    zeta = (2 * torch.arange(d_h // 2).double() + 0.4 * d_h) / (1.4 * d_h)
    assert float(zeta.max()) < 1 and abs(float(zeta[0]) - 2 / 7) < 1e-12
    rope = posenc.RotaryEmbedding(d_h, layout="interleaved")
    u = torch.randn(d_h, generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def score(m, p):
        pos = torch.tensor([m, p])
        r = rope(u.expand(2, d_h), positions=pos)
        s = (zeta[None, :] ** (pos.double()[:, None] / B)).repeat_interleave(2, dim=-1)
        return float((r[0] * s[0]) @ (r[1] / s[1]))

    assert abs(score(100, 40) - score(5100, 5040)) < 1e-9
    # against RoPE alone, pair i's term is scaled by zeta_i ** (distance / B)
    assert float(zeta[0] ** (4096 / B)) < 1e-4 < 0.8 < float(zeta[-1] ** (4096 / B))
    assert torch.isinf(torch.tensor(float(zeta[0] ** (-8192 / B))).half())
    assert _glued("xpos-fast-512") == f"{float(zeta[0]):.2f}" and _glued("xpos-slow-4096") == "0.83"
    assert float(_glued("xpos-shift-gap")) == 1e-10  # the bound the notebook asserts


def test_score_mods_give_the_bias_tensors_at_every_index():
    from posenc.bias import alibi_score_mod

    H, n = 4, 12
    _, _, paper, symmetric = _alibi_forms(H, n)
    head, q, k = torch.arange(H)[:, None, None], torch.arange(n)[:, None], torch.arange(n)[None, :]
    zero = torch.zeros(H, n, n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    assert torch.equal(alibi_score_mod(H)(zero, 0, head, q, k)[:, causal], paper.float()[:, causal])
    assert torch.equal(alibi_score_mod(H, bidirectional=True)(zero, 0, head, q, k), symmetric.float())
    with torch.random.fork_rng():
        t5 = posenc.T5RelativeBias(H, bidirectional=False)
    assert torch.equal(t5.score_mod()(zero, 0, head, q, k), t5(n))
    assert _glued("score-mod-gap") == "0"


# ----------------------------------------------------------------------------- the fixed-budget comparison (issue 30)


@functools.cache
def _v2():
    """Phase A's results and the chapter's table: phase C's extra seeds pooled in (``more_seeds``)."""
    data = synthetic.load_grid()
    return data, synthetic.group_table(data, more_seeds=_c())


@functools.cache
def _c():
    return synthetic.load_grid(resources.resource_path("alternatives_v2_C.json"))


def _curves(task, scheme, variant):
    got = synthetic.group_curves(_v2()[0], task, scheme, variant)
    if got["missing"]:
        pytest.skip(got["missing"])
    return got["curves"]


def _nanmean(curves):
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(curves, axis=0)


def test_glued_prediction_counts_are_those_of_the_results_file():
    _, table = _v2()
    summary = synthetic.prediction_summary(table)
    assert int(_glued("pred-confirmed")) == summary["confirmed"]
    assert int(_glued("pred-refuted")) == summary["refuted"]
    assert int(_glued("pred-decided")) == summary["confirmed"] + summary["refuted"]
    for scheme in synthetic.GRID_SCHEMES:
        p = synthetic.scheme_predictions(table, scheme)
        assert int(_glued(f"pred-{scheme}-tested")) == p["tested"], scheme
        assert int(_glued(f"pred-{scheme}-confirmed")) == p["confirmed"], scheme
        assert _glued(f"pred-{scheme}-refuted-text") == synthetic.refuted_brief(table, scheme), scheme
    done = [r for r in table if r["status"] == "done"]
    assert int(_glued("n-done")) == len(done)
    assert int(_glued("n-not-fit")) == sum(r["fit_label"] == "fails" for r in done)


def _check(name, *args):
    """One of synthetic's mechanism checks on the results file, skipped while its group is missing."""
    got = getattr(synthetic, name)(_v2()[0], *args)
    if got["missing"]:
        pytest.skip(got["missing"])
    return got


def test_rope_falls_at_its_untrained_aliases():
    """Offset copy (distance 3): every fitting trial falls at the alias 41 and only at aliases in most, none before
    35; long offset copy (distance 10): its first alias 16.3 is new, so every trial falls at 16."""
    import numpy as np

    assert [round(a, 1) for a in synthetic.rope_alias_positions(3, 64)[5:7]] == [40.7, 47.0]
    for variant, key in (("plain", "alias"), ("bos", "alias-bos")):
        c = _check("rope_alias_check", "offset_copy", variant)
        assert c["n"] >= 10 and c["k"] >= 0.75 * c["n"] and c["chance"] < 0.2
        assert not any(t < 35 for d in c["drops"] for t in d)
        assert _glued(f"rope-{key}-matched") == f"{c['k']}/{c['n']}"
        assert _glued(f"rope-{key}-drops") == ", ".join(f"{t} in {k}/{c['n']}" for t, k in c["counts"].items())
    plain = _check("rope_alias_check", "offset_copy", "plain")
    assert plain["counts"][41] == plain["n"] and int(_glued("rope-early")) == 0
    assert _glued("rope-chance") == f"{plain['chance']:.2f}"
    for variant, key in (("plain", "long"), ("bos", "long-bos")):
        c = _check("rope_alias_check", "long_offset_copy", variant)
        assert c["n"] >= 10 and c["counts"] == {16: c["n"]}
        assert _glued(f"rope-{key}-drops") == f"16 in {c['n']}/{c['n']}"
    # fixed retrieve: a trough between 20 and 40, then the 0.1 pair turns back
    mean = _nanmean(_curves("fixed_retrieve", "rope", "plain"))
    assert np.nanmin(mean[20:40]) < 0.2 and np.nanmean(mean[58:]) > 0.7
    row = synthetic.table_row(_v2()[1], "fixed_retrieve", "rope", "plain")
    assert row["beyond_4x"] > row["beyond_2x"]


def test_trained_models_show_the_mechanisms():
    """The kept trials: RoPE's heads predict the fall at 41 (not at 16-34), T5's unreached buckets keep their initial
    values, NoPE + BOS carries 1/(t+2) (read past the length only where the task holds)."""
    load = synthetic.load_checkpoint
    prof = synthetic.rope_head_profile(load("offset_copy", "rope", "plain")["model"])
    assert prof["predicted_drop"] == 41 == int(_glued("head-drop"))
    quiet = [a for a, r in zip(prof["aliases"], prof["rivals"]) if not r]
    assert quiet == [16, 22, 28, 34] and _glued("head-quiet") == "16, 22, 28, 34"
    t5 = synthetic.t5_bucket_check(load("offset_copy", "t5", "plain")["model"], 0)
    assert t5["unchanged"] == t5["predicted"] == list(range(16, 32)) and _glued("t5-kept") == "16-31"
    assert float(_glued("t5-new-bias")) < 0.1 < float(_glued("t5-target-bias"))
    assert float(_glued("t5-other-bias")) < -0.5
    probes = {name: synthetic.bos_position_probe(load(task, "none", "bos")["model"], task)
              for task, name in (("far_retrieve", "far"), ("offset_copy", "offset"))}
    for name, probe in probes.items():
        assert probe["r2_seen"] > 0.99 and _glued(f"probe-{name}-r2") == f"{probe['r2_seen']:.3f}"
        assert int(_glued(f"probe-{name}-resolution")) == probe["resolution"]
    assert probes["far"]["resolution"] >= 28 and probes["far"]["r2_new"] > 0.5
    assert probes["offset"]["resolution"] == 16 and probes["offset"]["r2_new"] < 0


def test_t5_declines_gradually_and_the_sinusoidal_model_follows_its_similarity():
    import numpy as np

    for task in ("offset_copy", "long_offset_copy"):
        drop = np.nanmax(-np.diff(_nanmean(_curves(task, "t5", "plain"))[15:]))
        assert drop < 0.2, task
    for variant, key in (("plain", "similarity"), ("bos", "similarity-bos")):
        c = _check("sinusoidal_similarity_check", "far_retrieve", variant)
        assert c["positive"] == c["n"] >= 10 and c["interval"][0] > 0.3
        lo, hi = c["interval"]
        assert _glued(f"sin-{key}") == f"{c['mean']:.2f} [{lo:.2f}, {hi:.2f}]"
        assert _glued(f"sin-{key}-positive") == f"{c['n']}/{c['n']}"


def test_randomized_positions_fail_at_positions_they_saw():
    """Offset copy + BOS loses its seen indices as the spacing shrinks; fixed retrieve + BOS does not."""
    c = _check("randomized_seen_check", "offset_copy", "bos")
    assert c["below"] == c["n"] >= 5 and c["mean"][2] < c["mean"][1] < c["mean"][0] - 0.1
    assert _glued("rand-seen") == " / ".join(f"{m:.2f}" for m in c["mean"])
    assert _glued("rand-below") == f"{c['n']}/{c['n']}"
    fixed = _check("randomized_seen_check", "fixed_retrieve", "bos")
    assert fixed["mean"].min() > 0.95 and _glued("rand-fixed") == f"{fixed['mean'].min():.3f}"
    spacing = synthetic.randomized_seen_check(_v2()[0], "offset_copy", "plain")["spacing"]
    assert _glued("spacing") == " / ".join(f"{s:.2f}" for s in spacing) == "15.06 / 7.78 / 3.95"


def test_best_claims_and_the_heat_table():
    data, table = _v2()
    for variant in VARIANTS:
        shaw = synthetic.table_row(table, "offset_copy", "shaw", variant)
        assert shaw["label_4x"] == "holds" and shaw["held_4x"] == len(shaw["seeds_4x"])
        assert synthetic.best_schemes(data, table, "offset_copy", variant, more_seeds=_c())["tied"] == ["shaw"]
        assert synthetic.best_schemes(data, table, "long_offset_copy", variant, more_seeds=_c())["tied"] == ["t5"]
    floors = {t: 0.1 for t in tasks.ALL_TASKS}
    heat = synthetic.verdict_heat_table(table, factor=4, floors=floors)
    missing = sum(r["status"] != "done" for r in table)
    assert heat.html.count("<td") == len(table) and heat.markdown.count("| — ") == missing
    assert heat.markdown.count("†") == sum(bool(r.get("added_seeds")) for r in table) == 30


# ----------------------------------------------------------------------------- more seeds where a verdict was open (phase C)


@functools.cache
def _changes():
    return synthetic.phase_c_changes(_v2()[0], _c())


def _text():
    """The chapter's markdown, whitespace collapsed (a sentence may break across source lines)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def test_phase_c_counts_are_those_of_the_results_files():
    """The passage's counts: 30 groups got 6 seeds; 11 changed a label, 8 uncertain cells were decided (2x 12 to 9,
    4x 8 to 3), 5 stay uncertain on the other side of a threshold, no other label and no fit label changed."""
    changes = _changes()
    kinds = [k for r in changes for k in r["kinds"].values()]
    assert int(_glued("c-groups")) == len(changes) == 30
    assert int(_glued("c-seeds")) == len(synthetic.PHASE_C_SEEDS) == 6
    assert int(_glued("c-changed")) == sum(r["changed"] for r in changes) == 11
    assert int(_glued("c-resolved")) == kinds.count("resolved") == 8
    assert int(_glued("c-still")) == kinds.count("still uncertain") == 5
    assert _glued("c-other") == "no other label changed" and len(kinds) == 13
    assert sum("fit" in r["changes"] for r in changes) == 0
    before = synthetic.group_table(_v2()[0])
    for f, (b, a) in ((2, (12, 9)), (4, (8, 3))):
        got = [sum(r[f"label_{f}x"].startswith("uncertain") for r in t) for t in (before, _v2()[1])]
        assert got == [b, a] and _glued(f"c-unc{f}") == f"{b} to {a}"
    s0, s1 = synthetic.prediction_summary(before), synthetic.prediction_summary(_v2()[1])
    assert int(_glued("c-confirmed")) == s1["confirmed"] - s0["confirmed"] == 4
    assert int(_glued("c-refuted")) == s1["refuted"] - s0["refuted"] == 4


def test_phase_c_cells_the_prose_names():
    """ALiBi without BOS holds latest marker at 4x (uncertain before; predicted to hold); Shaw with BOS degrades
    there (uncertain before; predicted to hold)."""
    text = _text()
    assert "ALiBi without BOS now holds latest marker at 4x, as predicted" in text
    assert "Shaw with BOS degrades there, predicted to hold" in text
    by = {(r["task"], r["scheme"], r["variant"]): r for r in _changes()}
    alibi = by[("latest_marker", "alibi", "plain")]
    assert alibi["label_4x_before"].startswith("uncertain") and alibi["label_4x_after"] == "holds"
    shaw = by[("latest_marker", "shaw", "bos")]
    assert shaw["label_4x_before"].startswith("uncertain") and shaw["label_4x_after"] == "degrades"
    table = _v2()[1]
    assert synthetic.table_row(table, "latest_marker", "alibi", "plain")["outcome_4x"] == "confirmed"
    assert synthetic.table_row(table, "latest_marker", "shaw", "bos")["outcome_4x"] == "refuted"


def test_phase_c_followed_its_rule():
    """Phase C's groups are exactly those ``needs_more_seeds`` picks on phase A, each at ``band_centre``."""
    a = _v2()[0]
    verdicts = synthetic.grid_verdicts([r for r in a["rows"] if r.get("phase", "A") == "A"])
    picked = {g: synthetic.band_centre(v["band"]) for g, v in verdicts.items() if synthetic.needs_more_seeds(v)}
    assert {(r["task"], r["scheme"], r["variant"]): r["lr"] for r in _changes()} == picked


# ----------------------------------------------------------------------------- the ablations (issue 30, phase D)


@functools.cache
def _ablations():
    return synthetic.ablation_table()  # the shipped alternatives_v2_D.json beside alternatives_v2.json


def _ablation(ablation, task, scheme, variant):
    """One ablation unit, skipped (naming it) while it is not in the results file."""
    (r,) = [r for r in _ablations() if (r["ablation"], r["task"], r["scheme"], r["variant"]) ==
            (ablation, task, scheme, variant)]
    if r["status"] != "done":
        pytest.skip(f"{ablation} / {task} / {scheme} / {variant}: {r['status']}")
    return r


@pytest.mark.parametrize("scheme", ["none", "alibi"])
@pytest.mark.parametrize("task", ["far_retrieve", "long_offset_copy"])
def test_four_layers_do_not_make_the_far_pointers_fit(task, scheme):
    """Predicted before the runs: depth is not what NoPE and ALiBi without BOS lack; no seed fits with 4 layers."""
    r = _ablation("depth4", task, scheme, "plain")
    assert r["ablated"]["fit_k"] == 0 and r["ablated"]["fit_n"] == len(synthetic.PHASE_D_SEEDS)
    assert r["baseline"]["fit_k"] == 0 and r["outcome"] == "held"
    assert _glued("abl-depth-fits") == f"0/{r['ablated']['fit_n']}"


def test_nope_fits_latest_marker_with_four_layers():
    r = _ablation("depth4", "latest_marker", "none", "plain")
    assert r["ablated"]["fit_k"] == r["ablated"]["fit_n"] and r["baseline"]["fit_k"] == 0
    assert (_glued("abl-nope-latest-4"), _glued("abl-nope-latest-2")) == (r["ablated"]["fit"], r["baseline"]["fit"])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("ablation", ["rope_base100", "rope_2heads"])
def test_a_faster_rope_pair_adds_falls_at_aliases_and_keeps_the_cliff(ablation, variant):
    """Seed by seed on offset copy: every fall within one position of an untrained alias of distance 3 at the
    model's frequencies, a fall at 40-42 in every seed, and no horizon later than with base 10,000 (41-43)."""
    r = _ablation(ablation, "offset_copy", "rope", variant)
    alias = r["alias"]
    assert alias["n"] == r["ablated"]["fit_n"] == len(synthetic.PHASE_D_SEEDS)
    for drops in alias["drops"]:
        assert drops and all(min(abs(t - a) for a in alias["aliases"]) <= 1 for t in drops), drops
        assert any(40 <= t <= 42 for t in drops), drops
    assert max(r["ablated"]["horizons"]) <= 42 and min(r["baseline"]["horizons"]) >= 40
    # the pre-registered range 16-22: judged per group from the Wilson interval of k/n, as the chapter says
    (p,) = r["predictions"]
    assert p["k"] == sum(16 <= h <= 22 for h in r["ablated"]["horizons"])
    assert p["outcome"] in _glued("abl-rope-outcome")


def test_a_faster_rope_pair_moves_long_offset_copy_later():
    """Not predicted, stated as observed: on long offset copy every seed's horizon moves past phase A's (16)."""
    rows = [r for r in _ablations() if r["task"] == "long_offset_copy" and r["scheme"] == "rope"
            and r["status"] == "done"]
    if not rows:
        pytest.skip("rope_base100 / long_offset_copy: not in the results yet")
    for r in rows:
        assert min(r["ablated"]["horizons"]) > max(r["baseline"]["horizons"]) == 16
        assert r["ablated"]["n_2x"] == len(synthetic.PHASE_D_SEEDS)
    horizons = [h for r in rows for h in r["ablated"]["horizons"]]
    assert _glued("abl-long-horizons") == f"{min(horizons)}-{max(horizons)}" and _glued("abl-long-before") == "16"
    held = sum(r["ablated"]["held_2x"] for r in rows)
    assert _glued("abl-long-hold") == f"{held} of {sum(r['ablated']['n_2x'] for r in rows)}"
    assert held >= 0.75 * len(horizons)  # "the horizon moves later": most seeds keep 0.9 of their accuracy at 2x


def test_glued_ablation_counts_are_those_of_the_results_file():
    rope = [r for r in _ablations() if r["task"] == "offset_copy" and r["scheme"] == "rope" and r["status"] == "done"]
    drops = [d for r in rope for d in r["alias"]["drops"]]
    assert _glued("abl-rope-on-alias") == f"{sum(r['alias']['on_alias'] for r in rope)} of {len(drops)}"
    assert _glued("abl-rope-41") == f"{sum(41 in d for d in drops)} of {len(drops)}"
    eight = [r for r in _ablations() if r["ablation"] == "alibi_8heads" and r["predictions"]]
    missing = sum(r["status"] != "done" for r in eight)
    text = _glued("abl-alibi8-outcome")
    if missing == len(eight):
        assert text == "not in the results yet"
    else:
        assert (f"{missing} not in the results yet" in text) == bool(missing)
    for r in eight:
        if r["status"] == "done":
            assert r["outcome"] in text
    assert "not in the results yet" not in _glued("abl-depth-outcome") or any(
        r["status"] != "done" for r in _ablations() if r["ablation"] == "depth4")


@pytest.mark.parametrize("task, variant", [("far_retrieve", "bos"), ("associative_recall", "plain"),
                                           ("associative_recall", "bos")])
def test_eight_alibi_heads_extrapolate_as_four(task, variant):
    """Predicted before the runs: 8 heads (the same shallowest slope, 1/256) hold where 4 hold and degrade at 4x
    on far retrieve with BOS; k of n per label, every seed fitting."""
    r = _ablation("alibi_8heads", task, "alibi", variant)
    assert r["ablated"]["fit_k"] == r["ablated"]["fit_n"] == len(synthetic.PHASE_D_SEEDS)
    assert r["outcome"] == "held" and all(p["outcome"] == "held" for p in r["predictions"])
    n = r["ablated"]["fit_n"]
    if task == "far_retrieve":
        assert r["ablated"]["held_2x"] >= n - 1 and r["ablated"]["held_4x"] == 0
        assert r["ablated"]["horizon"] <= r["baseline"]["horizon"]
    else:
        assert r["ablated"]["held_2x"] == r["ablated"]["held_4x"] == n
    assert posenc.alibi_slopes(8)[-1] == posenc.alibi_slopes(4)[-1]
    assert "held in" in _glued("abl-alibi8-outcome")


def test_four_layers_help_nope_hold_recall_at_2x():
    r = _ablation("depth4", "associative_recall", "none", "plain")
    assert r["ablated"]["held_2x"] == r["ablated"]["n_2x"] == len(synthetic.PHASE_D_SEEDS)
    assert r["baseline"]["held_2x"] == 0
    assert _glued("abl-nope-recall-4") == f"{r['ablated']['held_2x']}/{r['ablated']['n_2x']}"
    assert _glued("abl-nope-recall-2") == f"{r['baseline']['held_2x']}/{r['baseline']['n_2x']}"


@functools.cache
def _longer():
    table = synthetic.phase_b_table()  # alternatives_v2_B.json
    return table, synthetic.phase_b_summary(table)


def test_phase_b_counts_are_those_of_the_results_file():
    """Training on to 5,000 steps: 292 trials in 48 groups; fit 96 -> 146 (0 lost); 5 of the 22 groups
    with no fitting trial gain one (prediction 1 refuted); 2 of 26 groups with trials fitting at both
    moments change a decided label (2 holds); the 5 newly fitting groups land on 2 of their 9 decided
    labels (3 refuted)."""
    table, s = _longer()
    p1, p2, p3 = (s[f"prediction_{i}"] for i in (1, 2, 3))
    assert s["complete"] and int(_glued("longer-groups")) == s["groups"] == 48
    assert int(_glued("longer-trials")) == s["trials"] == 292
    assert _glued("longer-steps") == "5,000" and all(r["steps"] == (2000, 5000) for r in table)
    assert (int(_glued("longer-fit-early")), int(_glued("longer-fit-late"))) == p1["fit"] == (96, 146)
    assert int(_glued("longer-lost")) == p1["lost"] == 0
    assert int(_glued("longer-none")) == len(p1["groups_none"]) == 22
    assert int(_glued("longer-gaining")) == len(p1["groups_gaining"]) == 5
    assert int(_glued("longer-both")) == len(p2["groups"]) == 26
    assert int(_glued("longer-changed")) == len(p2["changed"]) == 2
    said = [o for g in p3["groups"] for o in g[3]["outcomes"].values()]
    assert int(_glued("longer-newly-n")) == len(p3["groups"]) == 5
    assert int(_glued("longer-newly-confirmed")) == said.count("confirmed") == 2
    assert int(_glued("longer-newly-decided")) == len(said) - said.count("open") == 9
    for i, verdict in ((1, "refuted"), (2, "holds"), (3, "refuted")):
        assert _glued(f"longer-verdict-{i}") == s[f"prediction_{i}"]["verdict"] == verdict


def test_phase_b_changes_go_towards_holding_on_associative_recall():
    """The two groups that change a decided label are NoPE and randomized positions with BOS on associative
    recall, each from degrades to holds (at 2x; the randomized one at 4x too), as the prose says."""
    table, s = _longer()
    by_group = {(r["task"], r["scheme"], r["variant"]): r for r in table}
    changed = s["prediction_2"]["changed"]
    assert [c[:3] for c in changed] == [("associative_recall", "none", "bos"),
                                       ("associative_recall", "randomized", "bos")]
    assert _glued("longer-changed-groups") == "NoPE and randomized positions with BOS on associative recall"
    for *group, factors in changed:
        assert "2x" in factors
        early, late = by_group[tuple(group)]["both"]
        for f in factors:
            assert (early[f"label_{f}"], late[f"label_{f}"]) == ("degrades", "holds")


def test_phase_b_groups_that_fit_none_are_still_learning():
    """Of the 17 groups that fit no trial at either moment, 7 raise their median accuracy in distribution by
    at least 0.1; ALiBi without BOS on offset copy comes closest: median 0.74 -> 0.91, best trial 0.94."""
    table, s = _longer()
    p1 = s["prediction_1"]
    by_group = {(r["task"], r["scheme"], r["variant"]): r for r in table}
    still = [g for g in p1["groups_none"] if g not in p1["groups_gaining"]]
    medians = [by_group[g]["acc_1x_median"] for g in still]
    assert int(_glued("longer-still")) == len(still) == 17
    assert int(_glued("longer-climbing")) == sum(b - a >= 0.1 for a, b in medians) == 7
    closest = max(still, key=lambda g: by_group[g]["acc_1x_max"][1])
    assert closest == ("offset_copy", "alibi", "plain")
    assert _glued("longer-closest") == "ALiBi without BOS on offset copy"
    near = by_group[closest]
    assert _glued("longer-closest-acc") == "0.74 \u2192 0.91"
    assert f"{near['acc_1x_median'][0]:.2f}" == "0.74" and f"{near['acc_1x_median'][1]:.2f}" == "0.91"
    assert _glued("longer-closest-max") == f"{near['acc_1x_max'][1]:.2f}" == "0.94"
    assert near["acc_1x_max"][1] < synthetic.FIT
    # the library's reading (phase_b_summary) is the one recomputed here
    assert p1["groups_still"] == still and p1["closest"] == closest
    assert p1["groups_climbing"] == [g for g, (a, b) in zip(still, medians) if b - a >= 0.1]


def test_phase_b_prose_states_its_point():
    """The passage says what 'fails' means and the verdicts' paragraph says fitting is within a budget."""
    text = _text()
    assert '*fails* means "does not fit within {glue:text}`steps` steps", not "cannot learn the task"' in text
    assert "fit no seed within {glue:text}`steps` steps (a budget, not a ceiling" in text
    assert "cannot learn" not in text.replace('not "cannot learn the task"', "")
