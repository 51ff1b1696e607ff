"""Chapter 7's laboratory: the shipped corpus, its split, training and bits-per-character evaluation."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from posenc.book import realtext as rt

TINY = rt.TextConfig(train_len=16, d_model=16, n_heads=2, n_layers=1, batch_size=4, steps=6, eval_every=3,
                     val_chars=64, warmup=2, randomized_max_len=128)


@pytest.fixture(scope="module")
def corpus():
    return rt.load_corpus()


def test_corpus_matches_its_recorded_hash(corpus):
    assert rt.sha256_of(rt.CORPUS_FILE) == rt.CORPUS_SHA256
    assert corpus.vocab_size == 65 and len(corpus.text) == 1_115_394
    readme = (rt.CORPUS_FILE.parent / "README.md").read_text()
    assert rt.CORPUS_SHA256 in readme


def test_split_is_by_position_and_covers_the_text(corpus):
    rec = corpus.record()
    train, val, test = rec["split"]["train"], rec["split"]["val"], rec["split"]["test"]
    assert train[0] == 0 and train[1] == val[0] and val[1] == test[0] and test[1] == len(corpus.text)
    assert corpus.decode(corpus.split("test")[:50]) == corpus.text[test[0] : test[0] + 50]
    assert len(corpus.split("val")) == val[1] - val[0]
    with pytest.raises(ValueError, match="part"):
        corpus.split("dev")


def test_encode_decode_and_bad_text(corpus):
    assert corpus.decode(corpus.encode("To be, or not")) == "To be, or not"
    with pytest.raises(ValueError, match="vocabulary"):
        corpus.encode("café")
    with pytest.raises(TypeError, match="text"):
        corpus.encode(3)


def test_load_corpus_other_file_and_bad_path(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcdefghij" * 20)
    c = rt.load_corpus(path)
    assert c.vocab_size == 10 and c.name == "t"
    with pytest.raises(ValueError, match="path"):
        rt.load_corpus(tmp_path / "missing.txt")


def test_random_windows_are_shifted_by_one():
    ids = torch.arange(100)
    x, y = rt.random_windows(ids, 10, 3, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (3, 10)
    assert torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="ids"):
        rt.random_windows(ids[:5], 10, 3, generator=torch.Generator())


def test_untrained_model_scores_about_log2_vocab(corpus):
    model = TINY.model("alibi", corpus.vocab_size)
    bpc = rt.evaluate_bpc(model, corpus.split("test")[:129], 16)
    assert abs(bpc - math.log2(65)) < 0.6


@pytest.mark.parametrize("scheme", ["rope", "alibi", "randomized", "sinusoidal"])
def test_sliding_with_full_stride_equals_nonoverlapping(corpus, scheme):
    model = TINY.model(scheme, corpus.vocab_size)
    ids = corpus.split("test")[:97]  # 6 windows of 16 and one more character
    a = rt.evaluate_bpc(model, ids, 16, mode="nonoverlapping")
    b = rt.evaluate_bpc(model, ids, 16, mode="sliding", stride=16)
    assert a == pytest.approx(b, abs=1e-5)


def test_sliding_scores_only_the_last_stride(corpus):
    # a model whose loss depends on the position shows the difference between the modes
    model = TINY.model("learned", corpus.vocab_size)
    ids = corpus.split("test")[:200]
    rt.evaluate_bpc(model, ids, 16, mode="sliding", stride=4)  # runs at the training length
    with pytest.raises(ValueError, match="stride"):
        rt.evaluate_bpc(model, ids, 16, mode="sliding", stride=17)


def test_learned_table_refuses_longer_inputs_with_a_clear_error(corpus):
    model = TINY.model("learned", corpus.vocab_size)
    with pytest.raises(ValueError, match="max_len"):
        rt.evaluate_bpc(model, corpus.split("test")[:200], 32)


def test_bad_arguments_name_themselves(corpus):
    model = TINY.model("rope", corpus.vocab_size)
    ids = corpus.split("test")[:100]
    with pytest.raises(ValueError, match="mode"):
        rt.evaluate_bpc(model, ids, 16, mode="strided")
    with pytest.raises(ValueError, match="ids"):
        rt.evaluate_bpc(model, ids[:10], 16)
    with pytest.raises(ValueError, match="ids"):
        rt.evaluate_bpc(model, ids.float(), 16)
    with pytest.raises(TypeError, match="model"):
        rt.evaluate_bpc("model", ids, 16)
    with pytest.raises(ValueError, match="bin_size"):
        rt.loss_by_position(model, ids, 16, bin_size=5)
    with pytest.raises(ValueError, match="distance"):
        rt.long_range_probe(model, ids, 8, span=16)
    with pytest.raises(ValueError, match="scheme"):
        TINY.model("fire", 65)
    with pytest.raises(ValueError, match="lr"):
        rt.TextConfig(lr=-1.0)


def test_loss_by_position_and_probe_shapes(corpus):
    model = TINY.model("alibi", corpus.vocab_size)
    test = corpus.split("test")
    lbp = rt.loss_by_position(model, test[:257], 64, bin_size=8)
    assert lbp.shape == (8,)
    p = rt.long_range_probe(model, test, 32, span=8, prefix=4, n_probes=4)
    assert p["length"] == 44 and set(p) == {"first", "second", "length"}


def test_extension_scaling_and_swap():
    assert rt.extension_scaling("none", 2, 64) is None
    assert rt.extension_scaling("ntk", 4, 64) == {"type": "ntk", "factor": 4.0}
    assert rt.extension_scaling("yarn", 8, 64)["original_max_position_embeddings"] == 64
    assert rt.extension_scaling("dynamic_ntk", 8, 64)["factor"] == 1.0
    with pytest.raises(ValueError, match="method"):
        rt.extension_scaling("rerope", 2, 64)
    with pytest.raises(ValueError, match="factor"):
        rt.extension_scaling("pi", 0.5, 64)
    model = TINY.model("rope", 65)
    before = model.positional
    x = torch.randint(0, 65, (1, 20))
    with rt.with_rotary_scaling(model, {"type": "linear", "factor": 2.0}):
        changed = model(x)
    assert model.positional is before
    assert not torch.allclose(changed, model(x))
    with pytest.raises(ValueError, match="rope"):
        with rt.with_rotary_scaling(TINY.model("alibi", 65), None):
            pass


def test_training_is_deterministic_and_keeps_the_best_checkpoint(corpus):
    train, val = corpus.split("train")[:5000], corpus.split("val")
    out = []
    for _ in range(2):
        torch.manual_seed(0)
        model = TINY.model("rope", corpus.vocab_size)
        info = rt.train_lm(model, train, val, TINY, seed=3)
        out.append((info["history"], rt.evaluate_bpc(model, val[:65], 16)))
    assert out[0] == out[1]
    history = out[0][0]
    assert [s for s, _ in history] == [3, 6]
    assert info["best_val_bpc"] == min(v for _, v in history)
    with pytest.raises(TypeError, match="config"):
        rt.train_lm(model, train, val, {"steps": 2}, seed=0)


def test_fine_tune_extension_uses_the_scaling(corpus):
    torch.manual_seed(0)
    model = TINY.model("rope", corpus.vocab_size)
    tuned, info = rt.fine_tune_extension(model, "pi", 2, corpus.split("train")[:3000], corpus.split("val"), TINY,
                                         seed=0, steps=2)
    assert tuned.positional.scaling is not None and model.positional.scaling is None
    assert info["best_step"] in (1, 2)


def test_summaries_over_seeds_leave_out_missing_values():
    rows = [
        {"scheme": "alibi", "seed": 0, "train_len": 64, "eval_len": 128, "mode": "sliding", "bpc": 2.0},
        {"scheme": "alibi", "seed": 1, "train_len": 64, "eval_len": 128, "mode": "sliding", "bpc": 2.4},
        {"scheme": "learned", "seed": 0, "train_len": 64, "eval_len": 128, "mode": "sliding", "bpc": None},
        {"scheme": "rope", "seed": 0, "train_len": 64, "eval_len": 128, "mode": "sliding", "bpc": 3.0,
         "extension": "pi", "finetune_len": None},
        {"scheme": "rope", "seed": 0, "train_len": 64, "eval_len": 128, "mode": "sliding", "bpc": 2.5,
         "extension": "pi", "finetune_len": 256},
    ]
    main = rt.bpc_summary({"rows": rows})
    assert set(main) == {("alibi", 128, "sliding")}
    assert main[("alibi", 128, "sliding")][0] == pytest.approx(2.2) and main[("alibi", 128, "sliding")][2] == 2
    assert rt.bpc_summary({"rows": rows}, extension="pi")[("rope", 128, "sliding")][0] == 3.0
    assert rt.bpc_summary({"rows": rows}, extension="pi", finetune_len=256)[("rope", 128, "sliding")][0] == 2.5
    with pytest.raises(ValueError, match="saved"):
        rt.bpc_summary([])


# --------------------------------------------------------------------------- the grid of issue 31

GRID_TINY = rt.GridConfig(d_model=16, n_layers=1, max_steps=6, eval_every=2, warmup=2, val_chars=128)


@pytest.fixture(scope="module")
def scored(corpus):
    return rt.scored_text(corpus)


def test_scored_text_is_the_whole_test_split_in_blocks(corpus, scored):
    val, test = corpus.split("val"), corpus.split("test")
    assert scored.count == 27 * 2048 and scored.count <= test.numel() - 1
    assert scored.start == val.numel() + 1
    assert torch.equal(scored.ids[scored.start - 1 : scored.start + 5], test[:6])
    assert scored.blocks(np.arange(scored.count) % 2, 1) == [0.5] * 27


class _Bigram(nn.Module):
    """Logits from the current character only: it uses one character of context."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, x):
        return self.table[x]


class _Copier(nn.Module):
    """Puts its weight on the character that followed ``distance - 1`` characters back: a model that copies."""

    def __init__(self, distance, vocab=65):
        super().__init__()
        self.distance, self.vocab = distance, vocab

    def forward(self, x):
        logits = torch.zeros(*x.shape, self.vocab)
        d = self.distance
        logits[:, d - 1 :] += 5.0 * nn.functional.one_hot(x[:, : x.shape[1] - d + 1], self.vocab)
        return logits


def test_char_bits_modes_score_the_same_characters_as_evaluate_bpc(corpus, scored):
    torch.manual_seed(0)
    model = GRID_TINY.model("alibi", 65)
    n = 64
    text = rt.ScoredText(scored.ids, scored.start, 4 * 512, 512)
    ids = text.ids[text.start - 1 : text.start + text.count]
    a = rt.char_bits(model, text, n)
    assert a.shape == (text.count,)
    assert a.mean() == pytest.approx(rt.evaluate_bpc(model, ids, n), abs=1e-5)
    b = rt.char_bits(model, text, n, mode="sliding")
    with_ctx = text.ids[text.start - 1 - (n - n // 4) : text.start + text.count]
    assert b.mean() == pytest.approx(rt.evaluate_bpc(model, with_ctx, n, mode="sliding"), abs=1e-5)
    # exact context: the last prediction of a window of k inputs, character by character
    k = 5
    c = rt.char_bits(model, text, 1, mode="exact", context=k, every=256)
    t = text.start + 256
    window = text.ids[t - k : t + 1]
    logits = model(window[None, :-1])
    manual = nn.functional.cross_entropy(logits[0, -1:], window[-1:]).item() * rt.LOG2E
    assert c[1] == pytest.approx(manual, abs=1e-5)
    with pytest.raises(ValueError, match="every"):
        rt.char_bits(model, text, n, every=3)
    with pytest.raises(ValueError, match="length"):
        rt.char_bits(model, text, 48)
    with pytest.raises(TypeError, match="text"):
        rt.char_bits(model, ids, n)


def test_context_use_of_a_bigram_model_is_flat_after_one_character(scored):
    torch.manual_seed(0)
    model = _Bigram(torch.randn(65, 65))
    curve = rt.context_use(model, rt.ScoredText(scored.ids, scored.start, 2048, 2048), (1, 2, 8), every=16)
    assert curve[1].shape == (128,)
    np.testing.assert_allclose(curve[1], curve[8], atol=1e-6)


def test_ngram_floor_is_a_distribution_and_matches_the_review(corpus, scored):
    train = corpus.split("train")
    # a normalised distribution: summed over every next character, probability one
    ctx = scored.ids[scored.start - 4 : scored.start]
    total = 0.0
    for c in range(65):
        text = rt.ScoredText(torch.cat([ctx, torch.tensor([c])]), 4, 1, 1)
        total += 2.0 ** -float(rt.ngram_bits(train, text, 3, vocab_size=65)[0])
    assert total == pytest.approx(1.0, abs=1e-9)
    # the review's numbers on the whole test split (3 characters 2.71, 4 characters 2.59) and on its passage
    assert rt.ngram_bits(train, scored, 3).mean() == pytest.approx(2.71, abs=0.01)
    assert rt.ngram_bits(train, scored, 4).mean() == pytest.approx(2.59, abs=0.01)
    passage = rt.ScoredText(scored.ids, scored.start, 4096, 4096)
    assert rt.ngram_bits(train, passage, 3).mean() == pytest.approx(2.339, abs=0.002)
    with pytest.raises(ValueError, match="discount"):
        rt.ngram_bits(train, passage, 1, discount=1.5)
    with pytest.raises(ValueError, match="order"):
        rt.ngram_bits(train, passage, -1)


def test_copy_probe_sees_copying_and_not_the_splice(corpus):
    test = corpus.split("test")
    torch.manual_seed(0)
    flat = rt.copy_probe(_Bigram(torch.randn(65, 65)), test, 16, n_probes=16)
    assert flat["gain"] == pytest.approx(0.0, abs=1e-6)  # the splice is in both windows
    assert flat["length"] == 32 and len(flat["gains"]) == 16
    copier = rt.copy_probe(_Copier(16), test, 16, n_probes=16)
    assert copier["gain"] > 1.0 and min(copier["gains"]) > 0
    with pytest.raises(ValueError, match="distance"):
        rt.copy_probe(_Copier(16), test, 4)


def test_repeat_spans_copy_a_span_inside_the_window():
    x = torch.arange(1, 33).repeat(4, 1)
    y = x + 1
    x2, y2 = rt.repeat_spans(x, y, 1.0, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(x2[:, 1:], y2[:, :-1])
    full = torch.cat([x2, y2[:, -1:]], 1)
    for row in full:
        # some span of 8 appears twice, at least 8 apart
        spans = {tuple(row[i : i + 8].tolist()): i for i in range(len(row) - 7)}
        assert len(spans) < len(row) - 7
    x3, _ = rt.repeat_spans(x, y, 0.0, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(x3, x)


def test_train_lm_pack_stops_by_its_rule_and_a_trial_does_not_depend_on_its_pack(corpus):
    train, val = corpus.split("train"), corpus.split("val")
    _, alone = rt.train_lm_pack("rope", [0], [2e-3], GRID_TINY, train, val)
    _, pack = rt.train_lm_pack("rope", [0, 1], [2e-3, 1e-3], GRID_TINY, train, val)
    assert alone[0]["history"] == pack[0]["history"] and alone[0]["train_loss"] == pack[0]["train_loss"]
    assert [h[0] for h in alone[0]["history"]] == [2, 4, 6] and alone[0]["stop"] == "budget"
    strict = replace(GRID_TINY, min_delta=10.0, patience=1)  # no evaluation improves by 10 bits
    _, stopped = rt.train_lm_pack("t5", [0], [2e-3], strict, train, val, t5_max_distance=32)
    assert stopped[0]["stop"] == "patience" and stopped[0]["stop_step"] == 4 and stopped[0]["best_step"] == 2
    assert stopped[0]["steps_run"] == 4  # the pack ended when every trial had stopped
    assert rt.grid_first_losses(GRID_TINY.to_dict(), 0, 3, scheme="rope", lr=2e-3) == alone[0]["train_loss"][:3]
    with pytest.raises(ValueError, match="lrs"):
        rt.train_lm_pack("rope", [0, 1], [2e-3], GRID_TINY, train, val)
    with pytest.raises(ValueError, match="t5_max_distance"):
        rt.variant_name("rope", 32)


def test_intervals_and_paired_differences_over_seeds_and_blocks():
    rng = np.random.default_rng(0)
    blocks = rng.normal(2.5, 0.2, 27)
    a = [{"seed": s, "bpc": float(np.mean(blocks + 0.01 * s)), "block_bpc": list(blocks + 0.01 * s)} for s in range(3)]
    b = [{**r, "bpc": r["bpc"] + 0.05, "block_bpc": [v + 0.05 for v in r["block_bpc"]]} for r in a]
    cell = rt.bpc_intervals(a)
    assert cell["n_seeds"] == 3 and cell["n_blocks"] == 27
    assert cell["t95"][0] < cell["mean"] < cell["t95"][1]
    assert cell["bootstrap95"][0] < cell["mean"] < cell["bootstrap95"][1]
    d = rt.paired_bpc(a, b)
    assert d["seeds"]["a_lower"] == 3 and d["seeds"]["mean"] == pytest.approx(-0.05)
    assert not d["indistinguishable"]
    noisy = [{**r, "bpc": r["bpc"] + (0.05 if r["seed"] else -0.05)} for r in a]
    assert rt.paired_bpc(a, noisy, key="bpc")["indistinguishable"]
    with pytest.raises(ValueError, match="share"):
        rt.paired_bpc(a, [{**b[0], "seed": 9}])


def _grid_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "ch7_grid.py"
    spec = importlib.util.spec_from_file_location("ch7_grid_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_grid_script_writes_rows_and_resumes(tmp_path, monkeypatch):
    grid = _grid_module()
    monkeypatch.setattr(grid, "CONFIG", grid.QUICK)
    monkeypatch.setattr(grid, "SEEDS", (0,))
    monkeypatch.setattr(grid, "FACTORS", (1, 2))
    monkeypatch.setattr(grid, "CONTEXTS", (1, 2))
    monkeypatch.setattr(grid, "PROBE_DISTANCES", grid.PROBE_DISTANCES[:2])
    monkeypatch.setattr(grid, "PROBE", {**grid.PROBE, "n_probes": 4})
    t5 = rt.variant_name("t5", grid.L_TRAIN)     # T5 at max distance L
    plan = [("baselines",), ("tune", t5), ("main", t5)]
    exp = grid.Experiment("ch7_test", tmp_path / "grid.json", grid.run_unit, plan, protocol=grid.PROTOCOL,
                          setup=grid.setup)
    assert exp.main(["--quiet", "--max-minutes", "0.0001"]) == 0   # stops after the first unit
    from posenc.book.results import read_results

    saved = read_results(tmp_path / "grid.json")
    assert [u["key"] for u in saved["units"]] == ["baselines"]
    floor = {(r["context"], r["eval_set"]): r["bpc"] for r in saved["baselines"]}
    assert floor[(3, "all")] == pytest.approx(2.71, abs=0.01) and len(saved["baselines"][0]["block_bpc"]) == 27
    assert saved["provenance"]["commit"] and saved["protocol"] == grid.PROTOCOL
    assert exp.main(["--quiet"]) == 0                                # resumes: the other two units
    saved = read_results(tmp_path / "grid.json")
    assert [u["key"] for u in saved["units"]] == ["baselines", f"tune:{t5}", f"main:{t5}"]
    assert len(saved["baselines"]) == 12 and len(saved["tune"]) == 3
    row = saved["rows"][0]
    assert {"scheme", "seed", "train_len", "eval_len", "mode", "bpc", "eval_chars", "t5_max_distance",
            "block_bpc"} <= set(row) and row["t5_max_distance"] == grid.L_TRAIN
    # the whole-split scorer: every mode and length scores the same 55,296 test characters
    assert {(r["mode"], r["eval_chars"]) for r in saved["rows"]} == {(m, 55296) for m in rt.EVAL_MODES}
    assert {r["context"] for r in saved["context_use"]} == {1, 2}
    assert {r["condition"] for r in saved["copy_probe"]} == {"text"}
    assert grid.chosen_lr(saved, t5) == saved["rows"][0]["lr"]
    assert exp.main(["--quiet"]) == 0                                # nothing left: nothing rerun
    assert len(read_results(tmp_path / "grid.json")["units"]) == 3


def test_lr_rule_prefers_the_smaller_rate_within_the_tie():
    grid = _grid_module()
    saved = {"tune": [{"variant": "rope", "lr": 1e-3, "best_val_bpc": 2.403},
                      {"variant": "rope", "lr": 2e-3, "best_val_bpc": 2.400},
                      {"variant": "rope", "lr": 4e-3, "best_val_bpc": 2.300}]}
    assert grid.chosen_lr(saved, "rope") == 4e-3
    saved["tune"][2]["best_val_bpc"] = 2.41
    assert grid.chosen_lr(saved, "rope") == 1e-3
    assert grid.chosen_lr(saved, "alibi") is None
    saved["tune"].append({"variant": "rope", "lr": 8e-3, "best_val_bpc": None, "stop": "diverged"})
    assert grid.chosen_lr(saved, "rope") == 1e-3  # a diverged rate is never chosen
    units = grid.plan(saved)
    assert units[:3] == [("baselines",), ("tune", "rope"), ("main", "rope")] and ("ext", 0) in units


def test_grid_defaults_are_the_protocol_its_predictions_were_computed_for():
    """``GridConfig()`` is the protocol of experiments/README.md's chapter-7 predictions (L = 8, written before the data)."""
    from posenc.rope.scaling import extension

    cfg = rt.GridConfig()
    L = cfg.train_len
    assert (L, cfg.batch_size * L, cfg.d_model, cfg.n_heads, cfg.n_layers) == (8, 1024, 64, 8, 2)
    assert cfg.randomized_max_len == 16 * L and 2 * cfg.repeat_span + 1 <= L
    assert ("t5", L) in rt.GRID_VARIANTS and ("t5", 128) in rt.GRID_VARIANTS
    assert cfg.model("t5", 65, L).positional.num_buckets == L
    assert cfg.model("t5", 65, 128).positional.num_buckets == 32
    head = cfg.d_model // cfg.n_heads
    pair, at = rt.rope_break(L, head)
    assert head == 8 and pair == 1 and at == pytest.approx(31.42, abs=0.01)     # pi / 0.1: about 4L
    ntk = [rt.rope_break(L, head, scaling=extension("ntk", s, L))[1] for s in (2, 4, 8, 16)]
    assert ntk == pytest.approx([39.6, 49.9, 62.8, 79.2], abs=0.05)
    assert rt.rope_break(L, 16)[1] == pytest.approx(9.93, abs=0.01)             # four heads of 16: L + 2
    assert rt.t5_first_untrained(L, 128) == L and rt.t5_first_untrained(L, L) is None
    # the rule at the earlier lengths and in Press et al.'s setting (head size 128)
    assert [rt.rope_break(n, 16)[0] for n in (16, 32, 64)] == [2, 2, 3]
    assert round(rt.rope_break(64, 16)[1]) == 99 and rt.t5_first_untrained(32, 128) == 35
    assert [round(rt.rope_break(n, 128)[1]) - n for n in (512, 1024)] == [47, 123]
    with pytest.raises(ValueError, match="train_len"):
        rt.rope_break(1, 16)
    with pytest.raises(ValueError, match="train_len"):
        rt.rope_break(100_000, 4)
    with pytest.raises(ValueError, match="max_distance"):
        rt.t5_first_untrained(8, 0)


def test_grid_config_accepts_the_lists_a_json_protocol_holds():
    """``GridConfig(**protocol["config"])`` on a config read back from JSON: lists stored as the same tuples."""
    import json

    stored = json.loads(json.dumps(rt.GridConfig().to_dict()))
    assert isinstance(stored["lrs"], list) and isinstance(stored["betas"], list)
    cfg = rt.GridConfig(**stored)
    assert cfg == rt.GridConfig() == rt.GridConfig.from_dict(stored) and hash(cfg) == hash(rt.GridConfig())
    assert cfg.lrs == (2e-3, 4e-3, 8e-3) and cfg.betas == (0.9, 0.99)
    assert cfg.to_dict() == stored                      # the protocol dict (and so the fingerprint) is unchanged
    assert rt.GridConfig(lrs=[1e-3]).lrs == (1e-3,)
    with pytest.raises(ValueError, match="lrs"):
        rt.GridConfig(lrs=[])
    with pytest.raises(ValueError, match="lrs"):
        rt.GridConfig(lrs="0.1")
    with pytest.raises(ValueError, match="betas"):
        rt.GridConfig(betas=[0.9])


def test_train_grid_slice_is_one_float64_trial_of_the_grid_recipe(corpus):
    """Chapter 7's live run: ``train_lm_pack``'s trial (its weights and batches), in float64."""
    train, val = corpus.split("train"), corpus.split("val")
    model, info = rt.train_grid_slice("sinusoidal", GRID_TINY, corpus, seed=0, lr=2e-3)
    assert all(p.dtype == torch.float64 for p in model.parameters()) and not model.training
    assert [h[0] for h in info["history"]] == [2, 4, 6] and info["seed"] == 0 and info["lr"] == 2e-3
    # the same trial as the grid's entry point, in float32 (same seed, same batches)
    model32, info32 = rt.train_grid_slice("sinusoidal", GRID_TINY, corpus, lr=2e-3, dtype=torch.float32)
    _, grid = rt.train_lm_pack("sinusoidal", [0], [2e-3], GRID_TINY, train, val)
    assert info32["train_loss"] == grid[0]["train_loss"] and next(model32.parameters()).dtype == torch.float32
    # float64 starts from the grid's float32 weights: the first loss agrees to float32 rounding
    assert info["train_loss"][0] == pytest.approx(grid[0]["train_loss"][0], abs=1e-5)
    assert info["train_loss"] == pytest.approx(grid[0]["train_loss"], abs=1e-3)
    with pytest.raises(TypeError, match="config"):
        rt.train_grid_slice("alibi", TINY, corpus)
    with pytest.raises(TypeError, match="corpus"):
        rt.train_grid_slice("alibi", GRID_TINY, corpus.text)
    with pytest.raises(ValueError, match="dtype"):
        rt.train_grid_slice("alibi", GRID_TINY, corpus, dtype=torch.float16)
    with pytest.raises(ValueError, match="lr"):
        rt.train_grid_slice("alibi", GRID_TINY, corpus, lr=0.0)
    with pytest.raises(ValueError, match="seed"):
        rt.train_grid_slice("alibi", GRID_TINY, corpus, seed=-1)
    with pytest.raises(ValueError, match="scheme"):
        rt.train_grid_slice("alibi-ish", GRID_TINY, corpus)
