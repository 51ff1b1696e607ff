"""The small transformer, its positional schemes, the tasks and the training loop (chapter 6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import posenc
from posenc.training import RunConfig

TINY = RunConfig(steps=3, batch_size=4, eval_size=8, d_model=16, n_heads=2, n_layers=1, train_len=8)


@pytest.fixture(autouse=True)
def _deterministic():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("scheme", posenc.SCHEMES)
def test_each_scheme_trains_a_step_without_nan(scheme):
    torch.manual_seed(0)
    model = posenc.PositionalTransformer(16, scheme=scheme, max_len=16)
    batch = posenc.make_task_batch("offset_copy", 8, 16, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    logits = model(batch.inputs)
    loss = torch.nn.functional.cross_entropy(logits[batch.mask], batch.targets[batch.mask])
    opt.zero_grad()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert torch.isfinite(model(batch.inputs)).all()


@pytest.mark.parametrize("scheme", posenc.SCHEMES)
def test_model_is_causal(scheme):
    torch.manual_seed(1)
    model = posenc.PositionalTransformer(16, scheme=scheme, max_len=12).eval()
    tokens = torch.randint(0, 16, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 16
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[:, :7], model(changed)[:, :7])


def test_scheme_parameter_counts():
    d, h, layers, max_len = 32, 4, 2, 16
    counts = {
        s: posenc.PositionalTransformer(16, scheme=s, d_model=d, n_heads=h, n_layers=layers, max_len=max_len)
        for s in posenc.SCHEMES
    }
    added = {s: m.scheme_parameters() for s, m in counts.items()}
    assert added == {
        "none": 0,
        "sinusoidal": 0,
        "learned": max_len * d,  # 512
        "rope": 0,
        "alibi": 0,
        "t5": 32 * h,  # one table shared by all layers, as in T5
        "shaw": layers * (2 * 8 + 1) * (d // h),  # 272
    }
    base = posenc.count_parameters(counts["none"])
    for s, m in counts.items():
        assert posenc.count_parameters(m) == base + added[s]


def test_rope_has_no_trainable_parameters():
    rope = posenc.RotaryEmbedding(64)
    assert posenc.count_parameters(rope) == 0
    assert len(list(rope.parameters())) == 0


def test_learned_embedding_past_max_len_raises_clearly():
    emb = posenc.LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match="max_len=8"):
        emb(torch.zeros(1, 9, 4))
    model = posenc.PositionalTransformer(10, scheme="learned", max_len=8)
    model(torch.zeros(1, 8, dtype=torch.long))  # exactly max_len is fine
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_other_schemes_run_past_the_training_length():
    for scheme in ("none", "sinusoidal", "rope", "alibi", "t5", "shaw"):
        model = posenc.PositionalTransformer(10, scheme=scheme, max_len=8)
        assert model(torch.zeros(1, 40, dtype=torch.long)).shape == (1, 40, 10)


def test_evaluate_reports_nan_where_learned_cannot_run():
    torch.manual_seed(0)
    model = TINY.model("learned")
    assert math.isnan(posenc.evaluate_accuracy(model, "offset_copy", 16, TINY, seed=0))
    acc = posenc.evaluate_accuracy(model, "offset_copy", 8, TINY, seed=0)
    assert 0.0 <= acc <= 1.0
    pos = posenc.evaluate_accuracy(model, "offset_copy", 8, TINY, seed=0, per_position=True)
    assert len(pos) == 8 and all(math.isnan(a) for a in pos[:3])


def test_run_trial_is_deterministic():
    a = posenc.run_trial("t5", "fixed_retrieve", 3, TINY, checkpoints=(2,))
    b = posenc.run_trial("t5", "fixed_retrieve", 3, TINY, checkpoints=(2,))
    for key in ("acc_1x", "acc_2x", "acc_4x", "final_loss", "checkpoints"):
        assert a[key] == b[key]
    assert a["checkpoints"][3]["acc_1x"] == a["acc_1x"]


def test_offset_copy_targets():
    b = posenc.make_task_batch("offset_copy", 3, 10, offset=4, generator=torch.Generator().manual_seed(2))
    assert torch.equal(b.targets[:, 4:], b.inputs[:, :6])
    assert not b.mask[:, :4].any() and b.mask[:, 4:].all()


def test_fixed_retrieve_targets():
    b = posenc.make_task_batch("fixed_retrieve", 3, 10, index=2, generator=torch.Generator().manual_seed(2))
    assert torch.equal(b.targets[:, 2:], b.inputs[:, 2:3].expand(3, 8))
    assert not b.mask[:, :2].any() and b.mask[:, 2:].all()


def test_bad_input_rejected():
    with pytest.raises(ValueError, match="scheme"):
        posenc.PositionalTransformer(10, scheme="relative")
    with pytest.raises(ValueError, match="n_heads"):
        posenc.PositionalTransformer(10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="n_heads"):
        posenc.PositionalTransformer(10, n_heads=0)
    with pytest.raises(ValueError, match="tokens"):
        posenc.PositionalTransformer(10)(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"tokens must be ids in \[0, vocab_size=10\)"):
        posenc.PositionalTransformer(10)(torch.full((1, 4), 10))
    with pytest.raises(ValueError, match="tokens"):
        posenc.PositionalTransformer(10)(torch.full((1, 4), -1))
    with pytest.raises(ValueError, match="task"):
        posenc.make_task_batch("reverse", 2, 8)
    with pytest.raises(ValueError, match="offset"):
        posenc.make_task_batch("offset_copy", 2, 3, offset=3)
    with pytest.raises(TypeError, match="length"):
        posenc.make_task_batch("offset_copy", 2, 8.0)
    with pytest.raises(TypeError, match="generator"):
        posenc.make_task_batch("offset_copy", 2, 8, generator=0)
    with pytest.raises(ValueError, match="checkpoints"):
        posenc.run_trial("none", "offset_copy", 0, TINY, checkpoints=(0,))


def test_position_attention_rows_and_errors():
    torch.manual_seed(0)
    model = posenc.PositionalTransformer(10, scheme="sinusoidal", max_len=8)
    weights = model.position_attention(12)
    assert weights.shape == (4, 12, 12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 12))
    assert torch.all(weights.triu(1) == 0)
    with pytest.raises(ValueError, match="additive"):
        posenc.PositionalTransformer(10, scheme="rope").position_attention(4)
    with pytest.raises(ValueError, match="max_len"):
        posenc.PositionalTransformer(10, scheme="learned", max_len=8).position_attention(9)


def test_learned_table_on_fixed_retrieve_singles_out_the_read_position():
    """The chapter's claim: trained on fixed retrieve, the table makes position 2 stand
    out and the position-only attention of layer 1 points at it from every query."""
    torch.set_num_threads(1)
    r = posenc.run_trial("learned", "fixed_retrieve", 0, RunConfig(steps=300), keep_model=True)
    w = r["model"].positional.weight.detach()
    w = w / w.norm(dim=1, keepdim=True)
    sim = w @ w.T
    others = [i for i in range(16) if i != 2]
    assert float(sim[2, others].max()) < -0.5  # position 2 points away from all others
    attn = r["model"].position_attention()
    assert float(attn.mean(0)[3:, 2].min()) > 0.9


RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results" / "alternatives.json"


def _saved():
    return json.loads(RESULTS.read_text())


def test_saved_results_cover_the_grid_and_learned_cannot_run_past_max_len():
    saved = _saved()
    final = [r for r in saved["rows"] if r["steps"] == saved["config"]["steps"]]
    assert {(r["task"], r["scheme"]) for r in final} == {(t, s) for t in posenc.TASKS for s in posenc.SCHEMES}
    assert len({r["seed"] for r in final}) >= 3
    for r in final:
        if r["scheme"] == "learned":
            assert r["acc_2x"] is None and r["acc_4x"] is None and r["acc_1x"] is not None
        else:
            assert None not in (r["acc_1x"], r["acc_2x"], r["acc_4x"])


def test_saved_results_support_the_chapter_text():
    saved = _saved()
    s = posenc.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
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
    for task in posenc.TASKS:
        assert acc(task, "learned", 1) == acc(task, "sinusoidal", 1) == 1.0


def test_saved_results_reproduce_one_row():
    """A re-run of one saved row (300-step checkpoint) gives the same rounded accuracies."""
    torch.set_num_threads(1)
    saved = _saved()
    row = next(r for r in saved["rows"]
               if (r["task"], r["scheme"], r["seed"], r["steps"]) == ("offset_copy", "t5", 0, 300))
    cfg = RunConfig(**{**saved["config"], "eval_factors": tuple(saved["config"]["eval_factors"]), "steps": 300})
    r = posenc.run_trial("t5", "offset_copy", 0, cfg)
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
    s = posenc.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
    acc = lambda task, scheme, f: s[(task, scheme)][f"acc_{f}x"][0]
    # offset copy at 4x: the sinusoidal model falls below every relative scheme, ALiBi included
    assert acc("offset_copy", "sinusoidal", 4) < min(acc("offset_copy", x, 4) for x in ("rope", "t5", "shaw", "alibi"))
    # fixed retrieve: ALiBi and NoPE stay far below the schemes that can address exact offsets
    assert max(acc("fixed_retrieve", x, 1) for x in ("alibi", "none")) < 0.7


def test_chapter6_rope_and_memory_claims():
    """Chapter 6: RoPE does not reliably extrapolate; a learned table is a tiny share of BERT/GPT-2."""
    transformers = pytest.importorskip("transformers")
    saved = _saved()
    s = posenc.summarize_trials(saved["rows"], steps=saved["config"]["steps"])
    assert s[("fixed_retrieve", "rope")]["acc_2x"][0] < 0.7
    with torch.device("meta"):
        bert = transformers.BertModel(transformers.BertConfig())
        gpt2 = transformers.GPT2Model(transformers.GPT2Config())
    for model, name in [(bert, "embeddings.position_embeddings.weight"), (gpt2, "wpe.weight")]:
        table = dict(model.named_parameters())[name].numel()
        assert table / posenc.count_parameters(model) < 0.01


@pytest.mark.parametrize("notebook", ["01_motivation", "05_tabular", "06_alternatives"])
def test_every_glued_name_in_the_prose_is_stored_in_the_notebook(notebook):
    """A {glue:text} key the prose uses but no cell glues only shows up as a build warning."""
    import re

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / f"{notebook}.ipynb").read_text())
    stored = {
        o.get("metadata", {}).get("scrapbook", {}).get("name")
        for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    }
    used = set()
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            text = "".join(c["source"])
            used |= set(re.findall(r"\{glue:text\}`([^`:]+)", text))
            used |= set(re.findall(r"```\{glue:figure\} (\S+)", text))
    assert used and used <= stored, sorted(used - stored)
