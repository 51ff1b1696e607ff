"""Chapter 7's laboratory: the shipped corpus, its split, training and bits-per-character evaluation."""

from __future__ import annotations

import math

import pytest
import torch

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
