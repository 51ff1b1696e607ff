"""The small transformer, its positional schemes, the tasks and the training loop (chapter 6)."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc.book import models, results, tasks, training
from posenc.book.training import RunConfig

TINY = RunConfig(steps=3, batch_size=4, eval_size=8, d_model=16, n_heads=2, n_layers=1, train_len=8)


@pytest.mark.parametrize("scheme", models.SCHEMES)
def test_each_scheme_trains_a_step_without_nan(scheme):
    torch.manual_seed(0)
    model = models.PositionalTransformer(16, scheme=scheme, max_len=16)
    batch = tasks.make_task_batch("offset_copy", 8, 16, generator=torch.Generator().manual_seed(0))
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


@pytest.mark.parametrize("scheme", models.SCHEMES)
def test_model_is_causal(scheme):
    torch.manual_seed(1)
    model = models.PositionalTransformer(16, scheme=scheme, max_len=12).eval()
    tokens = torch.randint(0, 16, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 16
    # randomized positions are drawn per call: fix them so that only the tokens differ
    kwargs = {"positions": torch.arange(0, 24, 2).expand(2, 12)} if scheme == "randomized" else {}
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, **kwargs)[:, :7], model(changed, **kwargs)[:, :7])


def test_scheme_parameter_counts():
    d, h, layers, max_len = 32, 4, 2, 16
    counts = {
        s: models.PositionalTransformer(16, scheme=s, d_model=d, n_heads=h, n_layers=layers, max_len=max_len)
        for s in models.SCHEMES
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
        "randomized": 0,
    }
    base = models.count_parameters(counts["none"])
    for s, m in counts.items():
        assert models.count_parameters(m) == base + added[s]


def test_rope_has_no_trainable_parameters():
    rope = posenc.RotaryEmbedding(64)
    assert models.count_parameters(rope) == 0
    assert len(list(rope.parameters())) == 0


def test_learned_embedding_past_max_len_raises_clearly():
    emb = posenc.LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match="max_len=8"):
        emb(torch.zeros(1, 9, 4))
    model = models.PositionalTransformer(10, scheme="learned", max_len=8)
    model(torch.zeros(1, 8, dtype=torch.long))  # exactly max_len is fine
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_other_schemes_run_past_the_training_length():
    for scheme in ("none", "sinusoidal", "rope", "alibi", "t5", "shaw", "randomized"):
        model = models.PositionalTransformer(10, scheme=scheme, max_len=8)
        assert model(torch.zeros(1, 40, dtype=torch.long)).shape == (1, 40, 10)


def test_evaluate_reports_nan_where_learned_cannot_run():
    torch.manual_seed(0)
    model = TINY.model("learned")
    assert math.isnan(training.evaluate_accuracy(model, "offset_copy", 16, TINY, seed=0))
    acc = training.evaluate_accuracy(model, "offset_copy", 8, TINY, seed=0)
    assert 0.0 <= acc <= 1.0
    pos = training.evaluate_accuracy(model, "offset_copy", 8, TINY, seed=0, per_position=True)
    assert len(pos) == 8 and all(math.isnan(a) for a in pos[:3])


def test_run_trial_is_deterministic():
    a = training.run_trial("t5", "fixed_retrieve", 3, TINY, checkpoints=(2,))
    b = training.run_trial("t5", "fixed_retrieve", 3, TINY, checkpoints=(2,))
    for key in ("acc_1x", "acc_2x", "acc_4x", "beyond_4x", "final_loss", "checkpoints", "steps"):
        assert a[key] == b[key]
    assert a["checkpoints"][3]["acc_1x"] == a["acc_1x"]


def test_offset_copy_targets():
    b = tasks.make_task_batch("offset_copy", 3, 10, offset=4, generator=torch.Generator().manual_seed(2))
    assert torch.equal(b.targets[:, 4:], b.inputs[:, :6])
    assert not b.mask[:, :4].any() and b.mask[:, 4:].all()


def test_fixed_retrieve_targets():
    b = tasks.make_task_batch("fixed_retrieve", 3, 10, index=2, generator=torch.Generator().manual_seed(2))
    assert torch.equal(b.targets[:, 2:], b.inputs[:, 2:3].expand(3, 8))
    assert not b.mask[:, :2].any() and b.mask[:, 2:].all()


def test_bad_input_rejected():
    with pytest.raises(ValueError, match="scheme"):
        models.PositionalTransformer(10, scheme="relative")
    with pytest.raises(ValueError, match="n_heads"):
        models.PositionalTransformer(10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="n_heads"):
        models.PositionalTransformer(10, n_heads=0)
    with pytest.raises(ValueError, match="tokens"):
        models.PositionalTransformer(10)(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"tokens must be ids in \[0, vocab_size=10\)"):
        models.PositionalTransformer(10)(torch.full((1, 4), 10))
    with pytest.raises(ValueError, match="tokens"):
        models.PositionalTransformer(10)(torch.full((1, 4), -1))
    with pytest.raises(ValueError, match="task"):
        tasks.make_task_batch("reverse", 2, 8)
    with pytest.raises(ValueError, match="offset"):
        tasks.make_task_batch("offset_copy", 2, 3, offset=3)
    with pytest.raises(TypeError, match="length"):
        tasks.make_task_batch("offset_copy", 2, 8.0)
    with pytest.raises(TypeError, match="generator"):
        tasks.make_task_batch("offset_copy", 2, 8, generator=0)
    with pytest.raises(ValueError, match="checkpoints"):
        training.run_trial("none", "offset_copy", 0, TINY, checkpoints=(0,))


def test_position_attention_rows_and_errors():
    torch.manual_seed(0)
    model = models.PositionalTransformer(10, scheme="sinusoidal", max_len=8)
    weights = model.position_attention(12)
    assert weights.shape == (4, 12, 12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 12))
    assert torch.all(weights.triu(1) == 0)
    with pytest.raises(ValueError, match="additive"):
        models.PositionalTransformer(10, scheme="rope").position_attention(4)
    with pytest.raises(ValueError, match="max_len"):
        models.PositionalTransformer(10, scheme="learned", max_len=8).position_attention(9)


def test_learned_table_on_fixed_retrieve_singles_out_the_read_position():
    """The chapter's claim: trained on fixed retrieve, the table makes position 2 stand
    out and the position-only attention of layer 1 points at it from every query."""
    torch.set_num_threads(1)
    r = training.run_trial("learned", "fixed_retrieve", 0, RunConfig(steps=300), keep_model=True)
    w = r["model"].positional.weight.detach()
    w = w / w.norm(dim=1, keepdim=True)
    sim = w @ w.T
    others = [i for i in range(16) if i != 2]
    assert float(sim[2, others].max()) < -0.5  # position 2 points away from all others
    attn = r["model"].position_attention()
    assert float(attn.mean(0)[3:, 2].min()) > 0.9


def test_bos_token_is_prepended_and_never_scored():
    g = torch.Generator().manual_seed(0)
    b = tasks.make_task_batch("fixed_retrieve", 3, 10, index=2, bos=True, generator=g)
    assert b.inputs.shape == (3, 11)
    assert (b.inputs[:, 0] == 16).all() and (b.inputs[:, 1:] < 16).all()
    assert not b.mask[:, :3].any() and b.mask[:, 3:].all()
    assert torch.equal(b.targets[:, 3:], b.inputs[:, 3:4].expand(3, 8))


@pytest.mark.parametrize(("task", "first"), [("long_offset_copy", 10), ("far_retrieve", 12)])
def test_far_tasks(task, first):
    g = torch.Generator().manual_seed(0)
    b = tasks.make_task_batch(task, 2, 20, generator=g)
    assert tasks.first_scored(task) == first
    assert not b.mask[:, :first].any() and b.mask[:, first:].all()
    if task == "long_offset_copy":
        assert torch.equal(b.targets[:, first:], b.inputs[:, :-first])
    else:
        assert (b.targets[:, first:] == b.inputs[:, first : first + 1]).all()
    # the relative far task exceeds the clipping distance of the book's Shaw model
    assert tasks.first_scored("long_offset_copy") > 8


def test_bos_model_has_one_more_token_and_position():
    cfg = RunConfig(bos=True)
    model = cfg.model("learned")
    assert model.embed.num_embeddings == 17 and model.max_len == 17


def test_beyond_accuracy_scores_only_new_positions():
    cfg = RunConfig(eval_size=16, train_len=8)
    torch.manual_seed(0)
    model = cfg.model("none")
    pos = training.evaluate_accuracy(model, "offset_copy", 32, cfg, seed=0, per_position=True)
    beyond = training.evaluate_accuracy(model, "offset_copy", 32, cfg, seed=0, start=8)
    assert beyond == pytest.approx(sum(pos[8:]) / 24, abs=1e-12)


def test_early_stopping_and_warmup():
    cfg = RunConfig(steps=400, batch_size=8, eval_size=16, d_model=16, n_heads=2, n_layers=1, train_len=8,
                    eval_every=10, patience=2, min_delta=1.0, warmup=5)
    r = training.run_trial("alibi", "offset_copy", 0, cfg)
    # min_delta=1 makes every evaluation after the first a non-improvement: stop at 3 x eval_every
    assert r["steps"] == 30 and r["stop"] == "patience" and r["converged"]
    assert sorted(r["checkpoints"]) == [10, 20, 30]
    assert set(r["checkpoints"][30]) == {"acc_1x", "acc_2x", "beyond_2x", "acc_4x", "beyond_4x"}


def test_randomized_positions_are_sorted_and_reproducible():
    from posenc.book.models import random_positions

    a = random_positions(3, 10, 50, generator=torch.Generator().manual_seed(1))
    b = random_positions(3, 10, 50, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and (a.diff(dim=1) > 0).all() and a.max() < 50
    model = models.PositionalTransformer(10, scheme="randomized", randomized_max_len=50)
    assert model(torch.zeros(3, 10, dtype=torch.long), a).shape == (3, 10, 10)
    with pytest.raises(ValueError, match="positions"):
        model(torch.zeros(3, 10, dtype=torch.long), a + 50)
    with pytest.raises(ValueError, match="positions"):
        models.PositionalTransformer(10, scheme="rope")(torch.zeros(3, 10, dtype=torch.long), a)
    with pytest.raises(ValueError, match="max_len"):
        random_positions(1, 60, 50)


def test_context_extension_restores_the_model():
    cfg = RunConfig(eval_size=8, train_len=8)
    torch.manual_seed(0)
    model = cfg.model("rope")
    rotary = model.positional
    ext = training.context_extension(model, "offset_copy", cfg, seed=0)
    assert list(ext) == list(training.CONTEXT_EXTENSIONS)
    assert model.positional is rotary
    assert ext["none"] == training.evaluate_accuracy(model, "offset_copy", 32, cfg, seed=0, start=8)
    with pytest.raises(ValueError, match="rope"):
        training.context_extension(cfg.model("alibi"), "offset_copy", cfg, seed=0)


def test_float64_training_keeps_rope_tables():
    cfg = RunConfig(steps=2, batch_size=4, eval_size=4, dtype="float64")
    r = training.run_trial("rope", "offset_copy", 0, cfg, keep_model=True)
    assert r["model"].head.weight.dtype == torch.float64
    assert r["model"].positional.cos.dtype == torch.float32  # a model cast leaves the rotary tables in float32


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"steps": 1.5}, TypeError, "steps"),
        ({"eval_every": -1}, ValueError, "eval_every"),
        ({"bos": 1}, TypeError, "bos"),
        ({"dtype": "float16"}, ValueError, "dtype"),
        ({"eval_factors": (2, 4)}, ValueError, "eval_factors"),
    ],
)
def test_run_config_rejects_bad_settings(kwargs, error, name):
    with pytest.raises(error, match=name):
        RunConfig(**kwargs)


def test_training_entry_points_reject_bad_arguments():
    with pytest.raises(TypeError, match="config"):
        training.run_trial("none", "offset_copy", 0, {"steps": 3})
    with pytest.raises(TypeError, match="model"):
        training.train_model("not a model", "offset_copy", TINY, seed=0)
    with pytest.raises(ValueError, match="task"):
        training.train_model(TINY.model("none"), "copy", TINY, seed=0)
    with pytest.raises(ValueError, match="train_len"):
        training.run_trial("none", "far_retrieve", 0, TINY)  # index 12 >= train_len 8
    with pytest.raises(ValueError, match="start"):
        training.evaluate_accuracy(TINY.model("none"), "offset_copy", 8, TINY, seed=0, start=8)
    with pytest.raises(TypeError, match="bos"):
        tasks.make_task_batch("offset_copy", 2, 8, bos="yes")


def _grid_script():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "alternatives_extrapolation.py"
    spec = importlib.util.spec_from_file_location("alternatives_extrapolation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the worker processes find run_one by its module name
    spec.loader.exec_module(module)
    return module


def test_grid_script_workers_are_processes(tmp_path, monkeypatch):
    """``python experiments/alternatives_extrapolation.py --workers N`` runs packs in N
    processes, as the harness's option says (the script once passed it on as ``--pack N``);
    the pack keeps its default. Nothing is run: the pool is a stub that records what it got."""
    import runpy
    import sys
    from pathlib import Path

    seen = {}

    def pool(self, saved, ctx, workers, args, log):
        seen.update(workers=workers, pack=self.pack)
        return 0

    monkeypatch.setattr(results.Experiment, "_run_pool", pool)
    monkeypatch.setattr(results.Experiment, "units", lambda self, saved: [])  # one process: nothing to run
    monkeypatch.setattr(results, "one_thread", lambda quick=False: None)  # the test process keeps its threads
    monkeypatch.setattr(sys, "argv", ["alternatives_extrapolation.py", "--workers", "3", "--quiet",
                                      "--out", str(tmp_path / "a.json")])
    path = Path(__file__).resolve().parents[2] / "experiments" / "alternatives_extrapolation.py"
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(path), run_name="__main__")
    assert stop.value.code == 0 and seen == {"workers": 3, "pack": 2}, seen


def test_grid_script_rows_plan_and_quick_run():
    """The grid script on the Experiment harness (whose resume and atomic writes
    tests/book/test_results.py tests): a trial's rows, the plan, and a --quick run."""
    from types import SimpleNamespace

    script = _grid_script()
    ctx = SimpleNamespace(quick=True, log=lambda msg: None, saved={"rows": []})
    rows = script.run_unit(("tune", "offset_copy", "rope", "bos", 1, 0.01), ctx)["rows"]
    finals = [r for r in rows if r.get("final")]
    assert len(finals) == 1 and finals[0] is rows[-1] and finals[0]["role"] == "tune"
    for r in rows:
        assert {"task", "scheme", "variant", "seed", "steps", "lr", "acc_1x", "beyond_2x", "beyond_4x"} <= set(r)
    assert "ext_yarn" in finals[0] and len(finals[0]["pos_4x"]) == 64
    # every group's tuning trials first; a group's seeds once its three tuning trials are saved
    group = ("offset_copy", "rope", "bos")
    tune = [{"role": "tune", "task": group[0], "scheme": group[1], "variant": group[2], "seed": script.TUNE_SEED,
             "lr": lr, "acc_1x": acc, "steps": 400, "final": True} for lr, acc in zip(script.LRS, (0.5, 1.0, 0.9))]
    units = script.plan({"rows": tune})
    main = [u for u in units if u[0] == "main"]
    assert len(units) == 3 * len(script.GROUPS) + script.SEEDS
    assert main == [("main", *group, seed, script.LRS[1]) for seed in range(script.SEEDS)]
    assert len(script.done({"rows": tune})) == 3
    assert script.EXPERIMENT.main(["--quick", "--quiet"]) == 0  # two short trials, nothing saved


def test_grid_script_chooses_the_lr_by_in_distribution_accuracy():
    script = _grid_script()
    rows = [{"acc_1x": 0.90, "steps": 400, "lr": 1e-3}, {"acc_1x": 0.998, "steps": 1000, "lr": 3e-3},
            {"acc_1x": 1.0, "steps": 2000, "lr": 1e-2}]
    assert script.choose_lr(rows) == 3e-3  # within 0.005 of the best: fewer steps wins
