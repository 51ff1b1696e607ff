"""Claims of chapter 1 (motivation), asserted against ``posenc``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import posenc


def _tokens(batch=256, n=64, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, d, generator=g, dtype=torch.float64)


def test_self_attention_is_permutation_equivariant_without_positions():
    torch.manual_seed(0)
    attn = posenc.SelfAttention(16, n_heads=2).double()
    x = torch.randn(1, 7, 16, dtype=torch.float64)
    perm = torch.randperm(7)
    with torch.no_grad():
        assert torch.allclose(attn(x[:, perm]), attn(x)[:, perm], atol=1e-12, rtol=0)


def test_uniform_causal_attention_shrinks_like_one_over_sqrt_t():
    # chapter 1: norm at position 0 / position n-1 is close to sqrt(n) = 8 for n = 64
    torch.manual_seed(1)
    x = _tokens()
    attn = posenc.SelfAttention(32).double()
    nn.init.zeros_(attn.w_q.weight)
    nn.init.zeros_(attn.w_k.weight)
    with torch.no_grad():
        causal = attn(x, mask=posenc.causal_mask(64)).norm(dim=-1).mean(dim=0)
        bidirectional = attn(x).norm(dim=-1).mean(dim=0)
    assert 6.5 < (causal[0] / causal[-1]).item() < 9.5
    assert 0.9 < (bidirectional[0] / bidirectional[-1]).item() < 1.1


def test_a_symmetric_distance_bias_cannot_see_a_reversal():
    # the design exercise: a bias -|j - i| separates a permutation but not the reversal
    torch.manual_seed(2)
    attn = posenc.SelfAttention(16).double()
    t = torch.arange(5)
    bias = -(t[None, :] - t[:, None]).abs().double()
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    swapped = x[:, [0, 4, 2, 3, 1]]
    with torch.no_grad():
        pooled = attn(x, bias=bias).mean(dim=1)
        assert (pooled - attn(swapped, bias=bias).mean(dim=1)).abs().max() > 1e-4
        assert torch.allclose(pooled, attn(torch.flip(x, dims=[1]), bias=bias).mean(dim=1), atol=1e-12, rtol=0)


def test_pooling_design_exercise_weighted_pooling_separates_but_layer_stays_blind():
    """A position-weighted pooling separates the two sentences; the layer's outputs are still permuted copies."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                       batch_first=True).double().eval()
    embed = nn.Embedding(4, 16).double()
    a = torch.tensor([[0, 1, 2, 0, 3]])  # the cat chased the mouse
    b = torch.tensor([[0, 3, 2, 0, 1]])  # the mouse chased the cat
    w = torch.linspace(1.0, 2.0, 5, dtype=torch.float64)
    with torch.no_grad():
        y_a, y_b = layer(embed(a))[0], layer(embed(b))[0]
    assert ((w[:, None] * y_a).sum(0) - (w[:, None] * y_b).sum(0)).abs().max() > 0.1
    assert torch.allclose(y_a.mean(0), y_b.mean(0), atol=1e-12, rtol=0)
    assert torch.allclose(y_a[1], y_b[4], atol=1e-12, rtol=0)


def test_the_two_entry_points_of_the_positional_signal():
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    added = posenc.SinusoidalPositionalEncoding(16, max_len=8).double()(x)
    pe = torch.from_numpy(posenc.sinusoidal_encoding(5, 16))
    assert torch.allclose(added - x, pe[None], atol=1e-6, rtol=0)
    attn = posenc.SelfAttention(16).double()
    t = torch.arange(5)
    bias = -(t[None, :] - t[:, None]).abs().double()
    with torch.no_grad():
        assert (attn(x, bias=bias) - attn(x)).abs().max() > 1e-3


@pytest.mark.parametrize(
    "notebook, core, optional, exercises, words, code_lines",
    [  # as stated under "Reading time" in each chapter's introduction
        ("01_motivation", 45, 0, 10, 3500, 190),
        ("02_sinusoidal", 60, 25, 10, 4700, 200),
        ("03_periodicity", 50, 20, 15, 4200, 210),
    ],
)
def test_reading_time_as_stated(notebook, core, optional, exercises, words, code_lines):
    """Chapters 1-3: words and code lines of each part at 100 words and 20 lines a minute."""
    from posenc.book.analysis import reading_time

    t = reading_time(Path(__file__).resolve().parents[2] / "notebooks" / f"{notebook}.ipynb")
    assert abs(t["core"]["words"] - words) <= 150 and abs(t["core"]["code_lines"] - code_lines) <= 10
    for part, minutes in (("core", core), ("optional", optional), ("exercises", exercises)):
        assert abs(t[part]["minutes"] - minutes) <= 5, part


# --- positions through depth and normalisation (sec-motivation-depth, sec-motivation-norm)


def _depth_rows():
    from posenc.book.results import read_results

    return read_results("position_depth.json")["rows"]


def test_position_survives_depth_only_with_residual_connections():
    rows = _depth_rows()
    trained = {(r["residual"], r["seed"]): r for r in rows if r["role"] == "trained"}
    assert len(trained) == 6
    for seed in (0, 1, 2):
        res, plain = trained[(True, seed)], trained[(False, seed)]
        assert res["task_accuracy"] > 0.98 and plain["task_accuracy"] < 0.5
        assert res["probe"][0] == plain["probe"][0] == 1.0
        assert min(res["probe"][1:]) > 0.7  # every block, every seed
        assert max(plain["probe"][1:]) < 0.15  # chance is 0.1
    init_plain = [r for r in rows if r["role"] == "init" and not r["residual"]]
    assert max(max(r["probe"][1:]) for r in init_plain) < 0.15


def test_layernorm_removes_part_of_the_sinusoidal_encoding_and_rmsnorm_does_not():
    from posenc.book.depth import norm_share

    pe = torch.from_numpy(posenc.sinusoidal_encoding(512, 512))
    assert torch.allclose(pe.norm(dim=1), torch.full((512,), 16.0, dtype=torch.float64))
    assert pe[0].mean().item() == pytest.approx(0.5)
    tokens = torch.randn(512, 512, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    none, rms, layer = (norm_share(tokens, pe, n) for n in ("none", "rms", "layer"))
    assert none == pytest.approx(rms, rel=1e-12) and none == pytest.approx(1 / 3, abs=0.005)
    assert layer == pytest.approx(0.30, abs=0.005)
    mean = pe.mean(dim=1)
    assert (512 * mean**2 / 256).mean().item() == pytest.approx(0.149, abs=0.002)


# --- a learned table past its length (sec-motivation-past-table)


def test_learned_table_past_its_length_sliding_wins_at_a_small_fine_tuning_budget():
    from posenc.book.results import read_results

    saved = read_results("learned_table.json")
    seeds = sorted({r["seed"] for r in saved["rows"]})
    assert seeds and seeds[0] == 0
    for seed in seeds:
        bpc = {r["method"]: r["bpc"] for r in saved["rows"] if r["seed"] == seed}
        assert bpc["slide"] < bpc["truncate"] and bpc["more training, slide"] < bpc["more training, truncate"]
        assert bpc["more training, slide"] < bpc["slide"]
        for init in ("tile", "interpolate"):
            assert bpc[f"extend ({init}), fine-tuned"] < bpc[f"extend ({init}), zero-shot"]
            assert bpc[f"extend ({init}), fine-tuned"] > bpc["truncate"]  # "still worse than truncating"
        assert bpc["extend (tile), zero-shot"] == max(bpc.values())
    for run in saved["runs"]:  # "the best checkpoint was the last"
        assert run["fine_tune"]["tile"]["best_step"] == run["fine_tune"]["interpolate"]["best_step"] == 200
