"""Chapter 4's probes: the fair RoPE-versus-additive head, the E[score] = 0 argument, the hybrid RoPE/NoPE decoder."""

from __future__ import annotations

import pytest
import torch

from posenc.book import probes
from posenc.book.probes import HybridRopeNope, mean_score_by_offset, previous_token_chance, train_position_head


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_rope_with_bias_is_train_rope_heads_previous_task():
    """With bias and no shared direction, train_position_head('rope') is train_rope_head('previous')."""
    a = train_position_head("rope", bias=True, steps=20)
    w_q, w_k, _ = probes.train_rope_head("previous", steps=20)
    torch.testing.assert_close(a["w_q"].weight, w_q.weight, rtol=0, atol=0)
    torch.testing.assert_close(a["w_k"].bias, w_k.bias, rtol=0, atol=0)


def test_bias_free_rope_head_cannot_prefer_an_offset_but_a_shared_direction_restores_it():
    no_bias = train_position_head("rope", bias=False, steps=150)
    shared = train_position_head("rope", bias=False, shared=1.0, steps=150)
    with_bias = train_position_head("rope", bias=True, steps=150)
    assert no_bias["accuracy"] < 0.3 < 0.8 < min(shared["accuracy"], with_bias["accuracy"])
    assert no_bias["w_q"].bias is None and with_bias["w_q"].bias is not None
    # E[score] = 0 at every offset != 0 for the bias-free head on zero-mean content
    x = torch.randn(256, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    s_free = mean_score_by_offset(no_bias["w_q"], no_bias["w_k"], x)
    s_bias = mean_score_by_offset(with_bias["w_q"], with_bias["w_k"], x)
    assert s_free[1:].abs().max() < 0.2 * s_bias[1:].abs().max()
    assert int(s_bias[1:].argmax()) == 0  # offset 1 scores highest


def test_additive_head_and_chance():
    add = train_position_head("additive", bias=False, steps=60)
    assert 0.0 <= add["accuracy"] <= 1.0 and add["heldout_loss"] is None
    assert previous_token_chance(32) == pytest.approx(sum(1 / (m + 1) for m in range(1, 32)) / 31)
    none = train_position_head("none", bias=False, steps=30)
    assert none["accuracy"] < 0.2


def test_early_stopping_keeps_the_best_heldout_loss():
    out = train_position_head("rope", bias=False, steps=400, eval_every=50, patience=2)
    assert out["heldout_loss"] is not None and out["best_step"] <= out["steps_run"] <= 400
    assert out["best_step"] % 50 == 0


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"encoding": "alibi"}, ValueError),
        ({"encoding": "rope", "bias": 1}, TypeError),
        ({"encoding": "rope", "shared": -1.0}, ValueError),
        ({"encoding": "rope", "content_scale": "1"}, TypeError),
        ({"encoding": "rope", "head_dim": 7}, ValueError),
        ({"encoding": "rope", "steps": 0}, ValueError),
        ({"encoding": "rope", "eval_every": 0}, ValueError),
        ({"encoding": "rope", "lr": -1.0}, ValueError),
        ({"encoding": "rope", "base": 1.0}, ValueError),
    ],
)
def test_train_position_head_rejects_bad_input(kwargs, exc):
    encoding = kwargs.pop("encoding")
    with pytest.raises(exc):
        train_position_head(encoding, steps=kwargs.pop("steps", 1), **kwargs)


def test_hybrid_model_is_relative_and_its_flags_matter():
    torch.manual_seed(0)
    flags = [1, 1, 1, 0] * 2
    model = HybridRopeNope(16, flags).double()
    tokens = torch.randint(0, 16, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(tokens)
        # RoPE layers depend on offsets only, NoPE layers on none: a common shift changes nothing
        torch.testing.assert_close(model(tokens, offset=5000), logits, rtol=0, atol=1e-10)
        inverted = HybridRopeNope(16, [1 - f for f in flags]).double()
        inverted.load_state_dict(model.state_dict())
        assert (inverted(tokens) - logits).abs().max() > 1e-3  # same weights, other flags: other model
        nope = HybridRopeNope(16, [0] * 8).double()
        nope.load_state_dict(model.state_dict())
        # an all-NoPE causal model: the first position's output ignores where it sits
        torch.testing.assert_close(nope(tokens[:, :1]), nope(tokens)[:, :1], rtol=0, atol=1e-12)
    assert model.rope_layers == tuple(flags)


@pytest.mark.parametrize(
    "flags, exc",
    [([], ValueError), ([1, 2], ValueError), ([True, False], ValueError), ("1110", TypeError), (4, TypeError)],
)
def test_hybrid_model_rejects_bad_flags(flags, exc):
    with pytest.raises(exc):
        HybridRopeNope(8, flags)


def test_hybrid_model_rejects_bad_tokens_and_offset():
    m = HybridRopeNope(8, [1, 0])
    with pytest.raises(ValueError):
        m(torch.zeros(2, 3))
    with pytest.raises(ValueError):
        m(torch.full((1, 3), 8))
    with pytest.raises(ValueError):
        m(torch.zeros(1, 3, dtype=torch.long), offset=-1)


def test_position_head_unit_trains_the_variant_at_the_chosen_rate():
    from posenc.book.results import Context

    variants = {"v": {"encoding": "rope", "bias": True, "shared": 0.0}}
    protocol = {"steps": 4, "eval_every": 2, "patience": 5, "batch": 4}
    saved = {"rows": [{"variant": "v", "role": "tune", "lr": lr, "heldout_loss": v} for lr, v in ((0.01, 0.5), (0.03, 0.4))]}
    row = probes.position_head_unit(("main", "v", 1), Context(False, saved, lambda m: None), variants=variants,
                                    lrs=(0.01, 0.03), tune_seed=100, protocol=protocol, quick_protocol={})["rows"][0]
    direct = probes.train_position_head("rope", bias=True, shared=0.0, lr=0.03, seed=1, **protocol)
    assert row["lr"] == 0.03 and row["seed"] == 1 and row["role"] == "main" and row["stop"] == "budget"
    assert row["accuracy"] == round(direct["accuracy"], 6) and row["heldout_loss"] == round(direct["heldout_loss"], 6)
    assert list(row)[:4] == ["variant", "encoding", "bias", "shared"] and list(row)[-1] == "seconds"
    with pytest.raises(ValueError, match="variant"):
        probes.position_head_unit(("main", "w", 1), Context(False, saved, print), variants=variants, lrs=(0.01,),
                                  tune_seed=0, protocol=protocol, quick_protocol={})
