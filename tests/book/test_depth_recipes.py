"""posenc.book.depth and posenc.book.recipes: chapter 1-3 measurements of depth, normalisation and recipes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import posenc
from posenc.book import depth, recipes
from posenc.book.models import PositionalTransformer
from posenc.book.probes import first_sign_change


def test_depth_net_shapes_and_residual_switch():
    torch.manual_seed(0)
    net = depth.DepthNet(8, 6, d_model=16, n_heads=2, n_layers=2, residual=False)
    logits, states = net(torch.zeros(3, 6, dtype=torch.long), hidden=True)
    assert logits.shape == (3, 6, 8) and len(states) == 3
    torch.testing.assert_close(states[0], net.embed(torch.zeros(3, 6, dtype=torch.long)) * 4.0 + net.pe)


def test_depth_net_refuses_bad_input():
    with pytest.raises(TypeError, match="residual"):
        depth.DepthNet(8, 6, residual=1)
    with pytest.raises(ValueError, match="length"):
        depth.DepthNet(8, 0)
    net = depth.DepthNet(8, 6, d_model=16, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match="tokens"):
        net(torch.zeros(2, 5, dtype=torch.long))


def test_reversal_and_training_are_reproducible():
    x, y = depth.reversal_batch(4, 5, 7, torch.Generator().manual_seed(1))
    assert torch.equal(y, x.flip(1))
    config = {"steps": 5, "d_model": 16, "n_heads": 2, "n_layers": 1, "length": 6, "vocab": 6, "batch": 4}
    a = depth.first_losses(config, 0, 3, residual=True)
    b = depth.first_losses(config, 0, 3, residual=True)
    assert a == b and len(a) == 3


def test_probe_accuracy_reads_a_linear_code_and_refuses_bad_input():
    y = np.arange(300) % 10
    X = np.eye(10)[y] @ np.random.default_rng(0).normal(size=(10, 20))
    assert depth.probe_accuracy(X, y, train=np.arange(300) < 150) == 1.0
    noise = np.random.default_rng(1).normal(size=(300, 20))
    assert depth.probe_accuracy(noise, y, train=np.arange(300) < 150) < 0.3
    with pytest.raises(ValueError, match="train"):
        depth.probe_accuracy(X, y, train=np.ones(300, bool))
    with pytest.raises(ValueError, match="features"):
        depth.probe_accuracy(X[:, 0], y, train=np.arange(300) < 150)


def test_layer_probe_at_the_input_is_exact():
    torch.manual_seed(0)
    net = depth.DepthNet(8, 6, d_model=16, n_heads=2, n_layers=2)
    out = depth.layer_probe(net, sequences=256)
    assert out["probe"][0] == 1.0 and len(out["probe"]) == 3 and 0 <= out["task"] <= 1
    with pytest.raises(TypeError, match="model"):
        depth.layer_probe(torch.nn.Linear(2, 2))


def test_norm_share_layer_norm_removes_the_mean_and_rms_keeps_the_share():
    pe = torch.as_tensor(posenc.sinusoidal_encoding(64, 32))
    tokens = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    plain, rms, layer = (depth.norm_share(tokens, pe, n) for n in ("none", "rms", "layer"))
    assert rms == pytest.approx(plain) and layer < plain
    # a code with zero mean in every row loses nothing to the centring
    centred = pe - pe.mean(-1, keepdim=True)
    assert depth.norm_share(tokens - tokens.mean(-1, keepdim=True), centred, "layer") == pytest.approx(
        depth.norm_share(tokens - tokens.mean(-1, keepdim=True), centred, "none"))
    with pytest.raises(ValueError, match="norm"):
        depth.norm_share(tokens, pe, "batch")
    with pytest.raises(ValueError, match="last dimension"):
        depth.norm_share(tokens, pe[:, :8], "none")


def _learned():
    torch.manual_seed(0)
    return PositionalTransformer(10, scheme="learned", max_len=8, d_model=8, n_heads=2, n_layers=1)


@pytest.mark.parametrize("init", recipes.TABLE_INITS)
def test_extend_learned_table_keeps_the_trained_rows_and_runs_longer(init):
    m = _learned()
    big = recipes.extend_learned_table(m, 20, init)
    old, new = m.positional.weight, big.positional.weight
    assert new.shape == (20, 8) and big.max_len == 20
    torch.testing.assert_close(new[0], old[0])
    if init == "tile":
        torch.testing.assert_close(new[:8], old) and torch.testing.assert_close(new[8:16], old)
    else:
        torch.testing.assert_close(new[-1], old[-1])
    assert big(torch.zeros(2, 20, dtype=torch.long)).shape == (2, 20, 10)
    assert m.positional.weight.shape == (8, 8)  # the original is untouched


def test_extend_learned_table_refuses_bad_input():
    with pytest.raises(TypeError, match="model"):
        recipes.extend_learned_table(PositionalTransformer(10, scheme="none", d_model=8, n_heads=2, n_layers=1), 20)
    with pytest.raises(ValueError, match="new_len"):
        recipes.extend_learned_table(_learned(), 8)
    with pytest.raises(ValueError, match="init"):
        recipes.extend_learned_table(_learned(), 20, "random")


def test_base_for_length_is_monotone_in_the_length():
    lengths = [256, 512, 1024, 2048]
    wave = [recipes.base_for_length(n) for n in lengths]
    assert wave == sorted(wave)
    assert 2 * math.pi * wave[-1] ** (126 / 128) == pytest.approx(2048)
    grid = 10 ** np.arange(2, 6.01, 0.1)
    safe = [recipes.base_for_length(n, criterion="decay", grid=grid) for n in lengths]
    first = [recipes.base_for_length(n, criterion="decay_first", grid=grid) for n in lengths]
    assert safe == sorted(safe) and first == sorted(first)
    assert all(f <= s for f, s in zip(first, safe))
    # every grid base from the "decay" answer up passes; the one below fails
    k = int(np.searchsorted(grid, safe[-1]))
    assert all(first_sign_change(float(b), 128, 2048)["distance"] in (0,) or
               first_sign_change(float(b), 128, 2048)["distance"] > 2048 for b in grid[k:])
    assert 0 < first_sign_change(float(grid[k - 1]), 128, 2048)["distance"] <= 2048


def test_base_for_length_refuses_bad_input():
    with pytest.raises(ValueError, match="head_dim"):
        recipes.base_for_length(100, head_dim=7)
    with pytest.raises(ValueError, match="criterion"):
        recipes.base_for_length(100, criterion="vibes")
    with pytest.raises(ValueError, match="grid"):
        recipes.base_for_length(100, criterion="decay", grid=[10.0, 5.0])


def test_a_one_number_code_caps_the_previous_token_weight_at_a_quarter():
    assert recipes.scalar_previous_token_bound(256) == pytest.approx(0.25, abs=0.005)
    frac = (np.arange(256) / 256.0)[:, None]
    code = np.hstack([np.ones_like(frac), frac])  # [1, p / L_max]: any bilinear score
    assert max(recipes.previous_token_weight(code, s) for s in (1.0, 100.0, 1e4)) < 0.26
    sin = posenc.sinusoidal_encoding(256, 16)
    assert recipes.previous_token_weight(sin, 50.0) > 0.99


def test_nearest_code_accuracy():
    sin = posenc.sinusoidal_encoding(128, 16)
    frac = np.repeat((np.arange(128) / 128.0)[:, None], 16, axis=1)
    assert recipes.nearest_code_accuracy(sin, 0.1) == 1.0
    assert recipes.nearest_code_accuracy(frac, 0.1) < 0.5
    with pytest.raises(ValueError, match="noise"):
        recipes.nearest_code_accuracy(sin, -1.0)
