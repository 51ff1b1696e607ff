"""Rotary embeddings (chapter 4): properties and engineering of ``posenc.rotary``.

* Properties: scores depend on m - n only, norms are preserved, the weight permutation
  makes the two layouts agree; angles never formed in 16-bit floats; the same for the
  paths added for models (partial rotary, precomputed tables, a ``seq_dim`` axis).
* Frequencies: bit-identical to ``posenc.sinusoidal_frequencies``; one function per
  scaling type in a registry.
* Engineering: no host-device synchronisation in ``forward`` (runs on the meta device,
  under ``torch.compile(fullgraph=True)`` and ``torch.export``), tables computed once and
  applied many times, ``reset_parameters`` after meta-device initialisation, a bounded
  cache, Hugging Face dicts that need the model's maximum length.
* Bad input of every kind raises ValueError/TypeError naming the argument
  (``BAD_INPUTS``, counted by kind, and hypothesis-generated cases).
* CUDA only (skipped elsewhere): the fused Triton kernel against the eager path, and
  CUDA-graph capture of a call with position ids.

The cross-checks against ``transformers`` are in ``test_rotary_vs_transformers.py``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.rotary
from posenc.rotary import ROTARY_LAYOUTS, SCALING_TYPES

HEAD_DIM = 64


def test_meta_checkpoint_permutation_reproduces_hf_conversion():
    # transformers' conversion script permutes Meta's wq/wk rows per head as
    # w.view(h, d//h//2, 2, dim).transpose(1, 2).reshape(d, dim); ours must be that.
    n_heads, hd, dim = 3, 8, 5
    w = torch.randn(n_heads * hd, dim)
    hf_style = w.view(n_heads, hd // 2, 2, dim).transpose(1, 2).reshape(n_heads * hd, dim)
    assert torch.equal(w[posenc.rotary_permutation(hd, n_heads)], hf_style)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(-5000, 5000),
    n=st.integers(-5000, 5000),
    shift=st.integers(-20000, 20000),
    layout=st.sampled_from(posenc.rotary.ROTARY_LAYOUTS),
    seed=st.integers(0, 2**16),
)
def test_score_depends_only_on_offset(m, n, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = (
        torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64),
        torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64),
    )

    def score(a, b):
        qa = posenc.apply_rotary(q, [a], layout=layout)
        kb = posenc.apply_rotary(k, [b], layout=layout)
        return float((qa * kb).sum())

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)
    # and it is the plain score rotated by the offset only
    assert score(m, n) == pytest.approx(score(m - n, 0), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(
    p=st.floats(-1e5, 1e5, allow_nan=False),
    layout=st.sampled_from(posenc.rotary.ROTARY_LAYOUTS),
    scaling=st.sampled_from([None, {"type": "ntk", "factor": 4}, {"type": "linear", "factor": 2}]),
)
def test_norm_is_preserved(p, layout, scaling):
    x = torch.randn(3, 5, HEAD_DIM, dtype=torch.float64)
    y = posenc.apply_rotary(x, [p] * 5, layout=layout, scaling=scaling)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)
    # the pairs keep their norms too
    torch.testing.assert_close(posenc.apply_rotary(x, torch.zeros(5), layout=layout), x, rtol=0, atol=0)


@settings(max_examples=15, deadline=None)
@given(n_heads=st.integers(1, 4), half_dim=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_permuted_weights_make_the_layouts_agree(n_heads, half_dim, seed):
    hd, d_model, seq = 2 * half_dim, 12, 7
    g = torch.Generator().manual_seed(seed)
    w_q = torch.randn(n_heads * hd, d_model, generator=g, dtype=torch.float64)
    w_k = torch.randn(n_heads * hd, d_model, generator=g, dtype=torch.float64)
    tokens = torch.randn(seq, d_model, generator=g, dtype=torch.float64)
    perm = posenc.rotary_permutation(hd, n_heads)

    def scores(wq, wk, layout):
        q = (tokens @ wq.T).view(seq, n_heads, hd).transpose(0, 1)
        k = (tokens @ wk.T).view(seq, n_heads, hd).transpose(0, 1)
        rope = posenc.RotaryEmbedding(hd, layout=layout)
        return rope(q) @ rope(k).transpose(-1, -2)

    reference = scores(w_q, w_k, "interleaved")
    torch.testing.assert_close(scores(w_q[perm], w_k[perm], "half"), reference, rtol=1e-12, atol=1e-10)
    # and back
    inverse = np.argsort(perm)
    torch.testing.assert_close(scores(w_q[perm][inverse], w_k[perm][inverse], "interleaved"), reference, rtol=0, atol=0)


def test_mixing_layouts_without_permutation_is_silently_wrong():
    torch.manual_seed(3)
    q, k = torch.randn(1, 1, 32, HEAD_DIM), torch.randn(1, 1, 32, HEAD_DIM)
    good = posenc.apply_rotary(q, torch.arange(32), layout="interleaved") @ posenc.apply_rotary(
        k, torch.arange(32), layout="interleaved"
    ).transpose(-1, -2)
    mixed = posenc.apply_rotary(q, torch.arange(32), layout="half") @ posenc.apply_rotary(
        k, torch.arange(32), layout="half"
    ).transpose(-1, -2)
    assert torch.isfinite(mixed).all()  # no error, no NaN ...
    assert (mixed - good).abs().max() > 1.0  # ... just different scores
    torch.testing.assert_close(mixed.diagonal(dim1=-2, dim2=-1), good.diagonal(dim1=-2, dim2=-1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_low_precision_input_gets_the_float32_rotation(dtype, layout):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 1, HEAD_DIM).to(dtype)
    rope = posenc.RotaryEmbedding(HEAD_DIM, layout=layout)
    low = rope(x, positions=torch.tensor([10_000]))
    full = rope(x.float(), positions=torch.tensor([10_000]))
    assert low.dtype == dtype
    assert torch.equal(low, full.to(dtype))
    assert torch.equal(rope(x, offset=10_000), low)
    # forming the position in bf16 would have rotated to position 9984 instead
    assert torch.tensor(10_000.0, dtype=torch.bfloat16).item() == 9984.0
    wrong = posenc.apply_rotary(x.float(), [9984], layout=layout).to(dtype)
    assert not torch.equal(wrong, low)


def test_module_cast_to_half_does_not_lower_angle_precision():
    torch.manual_seed(5)
    x = torch.randn(1, 1, 4, HEAD_DIM, dtype=torch.float16)
    rope = posenc.RotaryEmbedding(HEAD_DIM).half()
    assert rope.cos.dtype == torch.float32  # the cast leaves the tables in float32
    out = rope(x, offset=10_000)
    assert torch.equal(out, posenc.RotaryEmbedding(HEAD_DIM)(x.float(), offset=10_000).half())


def test_float64_input_is_rotated_in_float64():
    x = torch.randn(1, 3, HEAD_DIM, dtype=torch.float64)
    y = posenc.RotaryEmbedding(HEAD_DIM)(x, offset=123_456)
    angles = torch.tensor(123_456 + np.arange(3.0))[:, None] * torch.from_numpy(posenc.rotary_frequencies(HEAD_DIM))
    x1, x2 = x[..., :32], x[..., 32:]
    expected = torch.cat([x1 * angles.cos() - x2 * angles.sin(), x2 * angles.cos() + x1 * angles.sin()], -1)
    torch.testing.assert_close(y, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_cached_decoding_matches_full_sequence(layout):
    torch.manual_seed(6)
    rope = posenc.RotaryEmbedding(16, layout=layout, max_len=4)  # the cache has to grow
    x = torch.randn(2, 3, 10, 16)
    full = rope(x)
    steps = torch.cat([rope(x[:, :, t : t + 1], offset=t) for t in range(10)], dim=2)
    torch.testing.assert_close(steps, full, rtol=0, atol=0)
    torch.testing.assert_close(rope(x, positions=torch.arange(10)), full, rtol=0, atol=0)
    assert "cos" not in rope.state_dict()


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_layouts_and_shapes(layout):
    torch.manual_seed(7)
    x = torch.randn(2, 6, 4, 16)  # (batch, seq, heads, head_dim) ...
    xt = x.transpose(1, 2)  # ... viewed as (batch, heads, seq, head_dim): not contiguous
    ours = posenc.apply_rotary(xt, torch.arange(6), layout=layout)
    torch.testing.assert_close(ours, posenc.apply_rotary(xt.contiguous(), torch.arange(6), layout=layout))
    # 2-D and 3-D inputs
    torch.testing.assert_close(posenc.apply_rotary(xt[0, 0], torch.arange(6), layout=layout), ours[0, 0])
    torch.testing.assert_close(posenc.apply_rotary(xt[:, 0], torch.arange(6), layout=layout), ours[:, 0])
    # the input is not modified
    assert torch.equal(xt, x.transpose(1, 2))


def test_fractional_and_negative_positions():
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    a = posenc.apply_rotary(x, [-2.5, 0.0, 7.25])
    b = posenc.apply_rotary(posenc.apply_rotary(x, [-2.0, 1.0, 7.0]), [-0.5, -1.0, 0.25])
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)  # rotations add up


def test_yarn_attention_factor_scales_cos_and_sin():
    sc = {"type": "yarn", "factor": 16, "original_max_position_embeddings": 4096}
    assert posenc.rotary_attention_factor(sc) == pytest.approx(0.1 * math.log(16) + 1)
    x = torch.randn(1, 5, HEAD_DIM)
    y = posenc.RotaryEmbedding(HEAD_DIM, scaling=sc)(x)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1) * (0.1 * math.log(16) + 1))


def test_scaling_normalisation_and_ntk_base():
    assert posenc.normalize_scaling(None) is None
    assert posenc.normalize_scaling({"rope_type": "default", "rope_theta": 1e4}) is None
    ntk = posenc.rotary_frequencies(HEAD_DIM, scaling={"type": "ntk", "factor": 8})
    new_base = 10000.0 * 8 ** (HEAD_DIM / (HEAD_DIM - 2))
    np.testing.assert_allclose(ntk, new_base ** -(np.arange(0, HEAD_DIM, 2) / HEAD_DIM), rtol=1e-14)
    # NTK keeps the highest frequency and divides the lowest one by exactly the factor
    plain = posenc.rotary_frequencies(HEAD_DIM)
    assert ntk[0] == plain[0] and ntk[-1] == pytest.approx(plain[-1] / 8, rel=1e-12)


@pytest.mark.parametrize("head_dim", [7, 1, 0])
def test_odd_or_tiny_head_dim(head_dim):
    with pytest.raises(ValueError, match="head_dim"):
        posenc.RotaryEmbedding(head_dim)
    if head_dim:
        with pytest.raises(ValueError, match="head_dim"):
            posenc.apply_rotary(torch.randn(2, head_dim), torch.arange(2))


def test_bad_positions():
    x = torch.randn(2, 3, 5, 8)
    rope = posenc.RotaryEmbedding(8)
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.arange(4))
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.zeros(3, 5, dtype=torch.long))  # batch 3 for x's batch 2
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.zeros(2, 3, 5, dtype=torch.long))
    for bad in (
        torch.arange(5).bool(),
        torch.arange(5).bfloat16(),
        torch.arange(5).half(),
        torch.zeros(5, dtype=torch.complex64),
    ):
        with pytest.raises(TypeError, match="positions"):
            rope(x, positions=bad)
    with pytest.raises(TypeError, match="positions"):
        posenc.apply_rotary(x, ["a"] * 5)
    with pytest.raises(TypeError, match="positions"):
        posenc.apply_rotary(x, 3)
    with pytest.raises(ValueError, match="positions"):
        posenc.apply_rotary(x, [0, 1, float("nan"), 3, 4])
    with pytest.raises(ValueError, match="either positions"):
        rope(x, positions=torch.arange(5), offset=2)
    with pytest.raises(ValueError, match="offset"):
        rope(x, offset=-1)


def test_hf_rope_parameters_are_honoured_or_refused():
    """rope_theta is the base: a mismatch must not be ignored silently; partial RoPE is honoured."""
    params = {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0}
    assert posenc.RotaryEmbedding(HEAD_DIM, scaling=params).base == 500000.0  # base=None: rope_theta
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.RotaryEmbedding(HEAD_DIM, base=10000.0, scaling=params)
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.apply_rotary(torch.randn(3, HEAD_DIM), torch.arange(3), base=10000.0, scaling=params)
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.rotary_frequencies(HEAD_DIM, base=10000.0, scaling=params)
    ok = posenc.RotaryEmbedding(HEAD_DIM, base=500000.0, scaling=params)
    np.testing.assert_allclose(ok.inv_freq, posenc.rotary_frequencies(HEAD_DIM, base=500000.0) / 4, rtol=1e-7)
    # partial_rotary_factor is the rotated width, not a scaling: validated, then left out
    assert posenc.normalize_scaling({"rope_type": "default", "partial_rotary_factor": 0.25}) is None
    assert posenc.normalize_scaling({"rope_type": "default", "partial_rotary_factor": 1.0}) is None
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        posenc.normalize_scaling({"rope_type": "default", "partial_rotary_factor": 1.5})
    assert posenc.RotaryEmbedding(HEAD_DIM, scaling={"rope_type": "default", "partial_rotary_factor": 0.25}).rotary_dim == 16


def test_bad_layout_scaling_and_x():
    with pytest.raises(ValueError, match="layout.*'half', 'interleaved'"):
        posenc.RotaryEmbedding(8, layout="neox")
    with pytest.raises(ValueError, match="layout"):
        posenc.apply_rotary(torch.randn(2, 8), torch.arange(2), layout="complex")
    with pytest.raises(ValueError, match=r"scaling\['rope_type'\].*'linear'"):
        posenc.RotaryEmbedding(8, scaling={"type": "xpos", "factor": 2})
    with pytest.raises(ValueError, match="needs the key"):
        posenc.RotaryEmbedding(8, scaling={"type": "yarn", "factor": 2})
    with pytest.raises(ValueError, match="does not take"):
        posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 2, "beta_fast": 3})
    with pytest.raises(TypeError, match="scaling"):
        posenc.RotaryEmbedding(8, scaling="linear")
    with pytest.raises(ValueError, match="factor"):
        posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 0})
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        posenc.RotaryEmbedding(8)(np.zeros((2, 8)))
    with pytest.raises(TypeError, match="floating-point"):
        posenc.RotaryEmbedding(8)(torch.zeros(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(\.\.\., seq, 8\)"):
        posenc.RotaryEmbedding(8)(torch.zeros(2, 6))


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_gradients_flow_through_both_layouts(layout):
    rope = posenc.RotaryEmbedding(8, layout=layout)
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: rope(t, offset=5), (x,))
    # the rotation is orthogonal, so the gradient of sum(y**2)/2 is x itself
    y = rope(x, offset=7)
    (0.5 * (y**2).sum()).backward()
    torch.testing.assert_close(x.grad, x.detach(), rtol=1e-12, atol=1e-12)


def test_half_kernel_is_quiet_thread_safe_and_deterministic():
    """No warning; concurrent callers get bit-identical results."""
    import threading
    import warnings

    torch.manual_seed(9)
    x = torch.randn(2, 4, 256, 64)
    rope = posenc.RotaryEmbedding(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            first = rope(x)
    assert [str(w.message) for w in caught] == []
    results: list[torch.Tensor] = []

    def work() -> None:
        with torch.no_grad():
            for _ in range(5):
                results.append(rope(x))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(torch.equal(r, first) for r in results)


# ------------------------------------------------------------ frequencies and registry


@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6, 2.5])
def test_frequencies_are_bit_identical_to_sinusoidal_frequencies(base):
    for head_dim in range(2, 514, 2):  # 512 included: numpy's vectorised power differed there
        ours = posenc.rotary_frequencies(head_dim, base=base)
        theirs = posenc.sinusoidal_frequencies(head_dim, base=base)
        assert ours.dtype == np.float64 and ours.tobytes() == theirs.tobytes(), head_dim
    rope = posenc.RotaryEmbedding(512, base=base)
    assert rope.inv_freq.dtype == torch.float32  # no float64 tensor in the module
    assert rope.inv_freq.numpy().tobytes() == posenc.sinusoidal_frequencies(512, base=base).astype(np.float32).tobytes()


def test_one_frozen_dataclass_per_scaling_type():
    from posenc.rope import scaling as sc

    assert set(SCALING_TYPES) == {"linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional"}
    specs = {
        "linear": {"type": "linear", "factor": 4},
        "ntk": {"type": "ntk", "factor": 4},
        "dynamic": {"type": "dynamic", "factor": 4, "original_max_position_embeddings": 64},
        "yarn": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 64},
        "llama3": {"type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64},
    }
    for kind, spec in specs.items():
        _, _, obj = sc.from_hf(spec)
        assert type(obj) is sc.SCALINGS[kind] and obj.type == kind
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.factor = 2.0
        inv_freq = np.array(obj.frequencies(32, 10000.0))
        assert np.array_equal(posenc.rotary_frequencies(32, scaling=spec), inv_freq)
        assert np.array_equal(posenc.rotary_frequencies(32, scaling=obj), inv_freq)  # the dataclass itself
        assert posenc.rotary_attention_factor(spec) == obj.attention_scaling()
        rope = posenc.RotaryEmbedding(32, scaling=obj)
        assert np.array_equal(rope.inv_freq.numpy(), inv_freq.astype(np.float32)) and rope.attention_factor == obj.attention_scaling()


@pytest.mark.parametrize("head_dim", [2, 4, 6, 64, 128])
def test_rotary_permutation_is_layout_permutation_per_head(head_dim):
    perm = posenc.rotary_permutation(head_dim, 3)
    per_head = posenc.layout_permutation(head_dim)
    np.testing.assert_array_equal(perm.reshape(3, head_dim) - head_dim * np.arange(3)[:, None], np.tile(per_head, (3, 1)))


# ---------------------------------------------------------------- no synchronisation

_SYNC_METHODS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
@pytest.mark.parametrize(
    "scaling",
    [None, {"type": "dynamic", "factor": 2, "original_max_position_embeddings": 8}, {"type": "yarn", "factor": 4, "original_max_position_embeddings": 8}],
)
def test_forward_with_position_ids_reads_no_tensor_value(layout, scaling):
    rope = posenc.RotaryEmbedding(16, layout=layout, scaling=scaling, rotary_dim=12)
    x = torch.randn(2, 3, 5, 16)
    pos = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    expected = rope(x, positions=pos)  # on the CPU: gathered from the table after reading the range
    cos, sin, *_ = rope.tables(pos)
    # what an accelerator runs by default: no value read, the same numbers
    rope = posenc.RotaryEmbedding(16, layout=layout, scaling=scaling, rotary_dim=12, check_values=False)
    def forbidden(name):
        def raiser(self, *args, **kwargs):
            raise AssertionError(f"Tensor.{name} called in the hot path (a host-device sync on a GPU)")

        return raiser

    with pytest.MonkeyPatch.context() as mp:
        for name in _SYNC_METHODS:
            mp.setattr(torch.Tensor, name, forbidden(name))
        out = rope(x, positions=pos)
        q, k = posenc.apply_rotary_tables(x, x[:, :1], cos, sin, layout=layout, check_values=False)
        again = rope.tables(pos)[:2]
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(q, expected, rtol=0, atol=0)
    torch.testing.assert_close(k, expected[:, :1], rtol=0, atol=0)
    torch.testing.assert_close(again, (cos, sin), rtol=0, atol=0)
    assert "posenc._rotary_triton" not in sys.modules  # CPU tensors never load Triton


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
def test_forward_runs_on_the_meta_device(layout):
    """No value of a meta tensor can be read: a forward that runs there never syncs."""
    sc = {"rope_type": "dynamic", "factor": 2}
    rope = posenc.RotaryEmbedding(16, layout=layout, scaling=sc, max_position_embeddings=8, check_values=False).to("meta")
    x = torch.empty(2, 4, 6, 16, device="meta", dtype=torch.bfloat16)
    for pos in (torch.empty(2, 6, dtype=torch.long, device="meta"), torch.empty(6, dtype=torch.float64, device="meta")):
        out = rope(x, positions=pos)
        assert out.shape == x.shape and out.dtype == x.dtype and out.device.type == "meta"
    assert rope(x, offset=100).device.type == "meta"


class _TinyAttention(torch.nn.Module):
    """A small causal attention that calls the rotary module with position ids."""

    def __init__(self, layout: str, scaling=None, tables: bool = False, rotary_dim=None) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.rope = posenc.RotaryEmbedding(8, layout=layout, scaling=scaling, rotary_dim=rotary_dim, max_position_embeddings=4)
        self.use_tables = tables

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
        if self.use_tables:
            cos, sin, *_ = self.rope.tables(position_ids)
            q, k = posenc.apply_rotary_tables(q, k, cos, sin, layout=self.rope.layout)
        else:
            q, k = self.rope(q, positions=position_ids), self.rope(k, positions=position_ids)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


_COMPILE_CASES = [
    ("half", None, False, None),
    ("interleaved", None, False, None),
    ("half", {"rope_type": "dynamic", "factor": 2}, True, None),
    ("interleaved", {"type": "yarn", "factor": 4, "original_max_position_embeddings": 4}, True, 6),
]


@pytest.mark.parametrize(("layout", "scaling", "tables", "rotary_dim"), _COMPILE_CASES)
def test_compile_fullgraph_with_position_ids(layout, scaling, tables, rotary_dim):
    torch._dynamo.reset()
    model = _TinyAttention(layout, scaling, tables, rotary_dim)
    x = torch.randn(2, 5, 32)
    pos = torch.arange(5).expand(2, 5) + torch.tensor([[0], [3]])
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, pos), model(x, pos), rtol=1e-5, atol=1e-6)
    # other positions, same shapes: no recompilation needed for new values
    torch.testing.assert_close(compiled(x, pos + 7), model(x, pos + 7), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("layout", "scaling", "tables", "rotary_dim"), _COMPILE_CASES)
def test_export_with_position_ids(layout, scaling, tables, rotary_dim):
    model = _TinyAttention(layout, scaling, tables, rotary_dim)
    x = torch.randn(2, 5, 32)
    pos = torch.arange(5).expand(2, 5) + torch.tensor([[0], [3]])
    exported = torch.export.export(model, (x, pos))
    assert "_local_scalar_dense" not in str(exported.graph)  # no .item() in the graph
    for p in (pos, pos + 11):
        torch.testing.assert_close(exported.module()(x, p), model(x, p), rtol=1e-5, atol=1e-6)
    floats = torch.export.export(model, (x, pos.double() + 0.5))
    torch.testing.assert_close(floats.module()(x, pos.double() + 0.5), model(x, pos.double() + 0.5), rtol=1e-5, atol=1e-6)


def test_nan_positions_are_caught_on_cpu_and_with_debug_only_elsewhere():
    x = torch.randn(1, 3, 8)
    bad = torch.tensor([0.0, float("nan"), 2.0])
    for check in (None, True):
        with pytest.raises(ValueError, match="positions must be finite"):
            posenc.RotaryEmbedding(8, check_values=check)(x, positions=bad)
    with pytest.raises(ValueError, match="positions must be finite"):
        posenc.RotaryEmbedding(8).tables(torch.tensor([float("inf")]))
    # on the meta device (standing for an accelerator) the check costs a sync: only with debug
    rope = posenc.RotaryEmbedding(8).to("meta")
    assert rope(x.to("meta"), positions=bad.to("meta")).device.type == "meta"


# ----------------------------------------------------------- tables once, applied many


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_tables_applied_to_q_and_k_equal_forward(layout, dtype):
    rope = posenc.RotaryEmbedding(16, layout=layout, scaling={"type": "yarn", "factor": 4, "original_max_position_embeddings": 8})
    q = torch.randn(2, 4, 6, 16).to(dtype)
    k = torch.randn(2, 2, 6, 16).to(dtype)  # grouped queries: fewer key heads
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    for pos in (torch.arange(6) + 3, torch.stack([torch.arange(6), torch.arange(6) + 40])):
        cos, sin, *_ = rope.tables(pos, dtype=table_dtype)
        assert cos.shape == (*pos.shape, 8) and cos.dtype == table_dtype
        q_rot, k_rot = posenc.apply_rotary_tables(q, k, cos, sin, layout=layout)
        assert q_rot.dtype == dtype and k_rot.shape == k.shape
        assert torch.equal(q_rot, rope(q, positions=pos)) and torch.equal(k_rot, rope(k, positions=pos))
    # default positions: seq_len and offset
    cos, sin, *_ = rope.tables(seq_len=6, offset=3, dtype=table_dtype)
    assert torch.equal(cos, rope.tables(torch.arange(6) + 3, dtype=table_dtype)[0])
    q_rot, _ = posenc.apply_rotary_tables(q, k, cos, sin, layout=layout)
    torch.testing.assert_close(q_rot, rope(q, offset=3), rtol=0, atol=0)


def test_tables_are_new_tensors_and_leave_the_cache_alone():
    rope = posenc.RotaryEmbedding(8)
    cos, sin, *_ = rope.tables(seq_len=4)
    cos.zero_()
    assert rope.cos[1].abs().sum() > 0
    with pytest.raises(ValueError, match="seq_len"):
        rope.tables()
    with pytest.raises(ValueError, match="either positions"):
        rope.tables(torch.arange(3), seq_len=3)
    with pytest.raises(TypeError, match="dtype"):
        rope.tables(seq_len=3, dtype=torch.bfloat16)


# ---------------------------------------------------------- partial rotary and seq_dim


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
def test_partial_rotary_rotates_the_first_coordinates_only(layout):
    x = torch.randn(2, 3, 7, 20, dtype=torch.float64)
    pos = torch.arange(7) + 5
    rope = posenc.RotaryEmbedding(20, rotary_dim=8, layout=layout)
    y = rope(x, positions=pos)
    torch.testing.assert_close(y[..., :8], posenc.RotaryEmbedding(8, layout=layout)(x[..., :8], positions=pos), rtol=0, atol=0)
    assert torch.equal(y[..., 8:], x[..., 8:])
    torch.testing.assert_close(rope(x, offset=5), y, rtol=0, atol=1e-12)
    torch.testing.assert_close(posenc.apply_rotary(x, pos, layout=layout, rotary_dim=8), y, rtol=0, atol=1e-12)
    # Hugging Face's spelling, as an argument and in a rope_parameters dict
    assert posenc.RotaryEmbedding(20, partial_rotary_factor=0.4).rotary_dim == 8
    in_dict = posenc.RotaryEmbedding(20, layout=layout, scaling={"rope_type": "default", "partial_rotary_factor": 0.4})
    assert in_dict.rotary_dim == 8 and torch.equal(in_dict(x, positions=pos), y)
    np.testing.assert_array_equal(
        posenc.rotary_frequencies(20, scaling={"rope_type": "default", "partial_rotary_factor": 0.4}),
        posenc.rotary_frequencies(8),
    )
    # odd head widths are fine when the rotated part is even
    assert posenc.RotaryEmbedding(9, rotary_dim=4)(torch.randn(2, 9)).shape == (2, 9)
    assert "rotary_dim=8" in repr(rope)


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
def test_seq_dim_for_batch_seq_heads_layout(layout):
    x = torch.randn(2, 6, 4, 16)  # (batch, seq, heads, head_dim)
    heads_first = x.transpose(1, 2)
    rope = posenc.RotaryEmbedding(16, layout=layout)
    rope_bshd = posenc.RotaryEmbedding(16, layout=layout, seq_dim=1)
    expected = rope(heads_first).transpose(1, 2)
    torch.testing.assert_close(rope_bshd(x), expected, rtol=0, atol=0)
    assert not torch.allclose(rope(x), expected)  # without seq_dim the heads are taken for positions
    pos = torch.stack([torch.arange(6), torch.arange(6) + 9])
    torch.testing.assert_close(rope_bshd(x, positions=pos), rope(heads_first, positions=pos).transpose(1, 2), rtol=0, atol=0)
    torch.testing.assert_close(posenc.apply_rotary(x, pos, layout=layout, seq_dim=-3), rope(heads_first, positions=pos).transpose(1, 2), rtol=0, atol=2e-6)
    cos, sin, *_ = rope.tables(pos)
    q, k = posenc.apply_rotary_tables(x, x[:, :, :1], cos, sin, layout=layout, seq_dim=1)
    torch.testing.assert_close(q, rope(heads_first, positions=pos).transpose(1, 2), rtol=0, atol=0)
    assert k.shape == (2, 6, 1, 16)
    assert "seq_dim=1" in repr(rope_bshd)


def _rotated_pair(q, k, m, n, layout, rotary_dim, seq_dim, via_tables):
    """Rotate q at position m and k at position n through one of the new paths."""
    head_dim = q.shape[-1]
    rope = posenc.RotaryEmbedding(head_dim, layout=layout, rotary_dim=rotary_dim, seq_dim=seq_dim)
    pos_q, pos_k = torch.tensor([m]), torch.tensor([n])
    shape = (1, 1, 1, head_dim)  # (batch, seq, heads, head_dim) and (batch, heads, seq, head_dim) alike
    qq, kk = q.reshape(shape), k.reshape(shape)
    if via_tables:
        cq, sq, *_ = rope.tables(pos_q, dtype=torch.float64)
        ck, sk, *_ = rope.tables(pos_k, dtype=torch.float64)
        qr, _ = posenc.apply_rotary_tables(qq, qq, cq, sq, layout=layout, seq_dim=seq_dim)
        kr, _ = posenc.apply_rotary_tables(kk, kk, ck, sk, layout=layout, seq_dim=seq_dim)
    else:
        qr, kr = rope(qq, positions=pos_q), rope(kk, positions=pos_k)
    return qr.reshape(-1), kr.reshape(-1)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(-3000, 3000),
    n=st.integers(-3000, 3000),
    shift=st.integers(-10000, 10000),
    layout=st.sampled_from(ROTARY_LAYOUTS),
    half_rotary=st.integers(1, 8),
    seq_dim=st.sampled_from([-2, 1, -3]),
    via_tables=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_new_paths_keep_offset_only_scores_and_norms(m, n, shift, layout, half_rotary, seq_dim, via_tables, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g, dtype=torch.float64)
    r = 2 * half_rotary

    def score(a, b):
        qa, kb = _rotated_pair(q, k, a, b, layout, r, seq_dim, via_tables)
        return float(qa @ kb)

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)
    assert score(m, n) == pytest.approx(score(m - n, 0), abs=1e-9)
    qa, kb = _rotated_pair(q, k, m, n, layout, r, seq_dim, via_tables)
    assert float(qa.norm()) == pytest.approx(float(q.norm()), rel=1e-12)
    assert torch.equal(qa[r:], q[r:])


# ------------------------------------------------- meta-device init and bounded cache


@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
@pytest.mark.parametrize("scaling", [None, {"type": "yarn", "factor": 4, "original_max_position_embeddings": 32}])
def test_reset_parameters_after_meta_device_init(layout, scaling):
    kwargs = {"layout": layout, "scaling": scaling, "rotary_dim": 12, "max_len": 64}
    with torch.device("meta"):
        rope = posenc.RotaryEmbedding(16, **kwargs)
    assert all(b.device.type == "meta" for b in rope.buffers())
    rope.to_empty(device="cpu")
    for b in rope.buffers():  # what to_empty leaves: uninitialised memory (made obvious here)
        b.data.copy_(torch.full_like(b, 1e35 if b.is_floating_point() else -(2**62)))
    rope.reset_parameters()
    fresh = posenc.RotaryEmbedding(16, **kwargs)
    for (name, ours), (_, theirs) in zip(rope.named_buffers(), fresh.named_buffers()):
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), name
    x = torch.randn(2, 3, 40, 16)
    assert torch.equal(rope(x), fresh(x)) and torch.equal(rope(x, positions=torch.arange(40) * 3), fresh(x, positions=torch.arange(40) * 3))
    assert rope.state_dict() == {}  # nothing to load: every buffer is non-persistent


def test_forward_keeps_no_state_and_positions_beyond_the_table_are_exact():
    rope = posenc.RotaryEmbedding(128, max_len=16)
    before = {k: v.clone() for k, v in rope.named_buffers()}
    x = torch.randn(1, 1, 300, 128, dtype=torch.float64)
    got = rope(x.float(), offset=5000).double()
    want = posenc.RotaryEmbedding(128, max_len=16)(x, offset=5000)  # float64 throughout
    assert (got - want).abs().max() < 2e-6
    assert all(torch.equal(before[k], v) for k, v in rope.named_buffers())
    assert rope.cos.shape == (16, 64)


# ----------------------------------------------- Hugging Face dicts and degenerate sizes


def test_hf_dynamic_dict_needs_the_models_maximum_length():
    hf = {"rope_type": "dynamic", "factor": 2.0}
    with pytest.raises(ValueError, match="max_position_embeddings"):
        posenc.RotaryEmbedding(64, scaling=hf)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        posenc.apply_rotary(torch.randn(3, 64), torch.arange(3), scaling=hf)
    rope = posenc.RotaryEmbedding(64, scaling=hf, max_position_embeddings=128)
    assert posenc.normalize_scaling(rope.scaling) == {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 128}
    explicit = posenc.RotaryEmbedding(64, scaling={**hf, "original_max_position_embeddings": 128})
    x = torch.randn(1, 300, 64)
    torch.testing.assert_close(rope(x), explicit(x), rtol=0, atol=0)
    np.testing.assert_array_equal(
        posenc.rotary_frequencies(64, scaling=hf, max_position_embeddings=128, seq_len=300),
        posenc.rotary_frequencies(64, scaling={**hf, "original_max_position_embeddings": 128}, seq_len=300),
    )
    # transformers takes dynamic NTK's length from max_position_embeddings even when the dict has its own
    assert posenc.normalize_scaling({**hf, "original_max_position_embeddings": 64}, max_position_embeddings=128)[
        "original_max_position_embeddings"
    ] == 128


def test_dynamic_frequencies_on_the_device_match_the_numpy_ones():
    sc = {"type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 16}
    rope = posenc.RotaryEmbedding(32, scaling=sc)
    x = torch.randn(1, 1, 40, 32, dtype=torch.float64)
    pos = torch.arange(40) + 60  # largest position 99: length 100
    w = torch.from_numpy(posenc.rotary_frequencies(32, scaling=sc, seq_len=100))
    angles = pos.double()[:, None] * w
    x1, x2 = x[..., :16], x[..., 16:]
    expected = torch.cat([x1 * angles.cos() - x2 * angles.sin(), x2 * angles.cos() + x1 * angles.sin()], -1)
    torch.testing.assert_close(rope(x, positions=pos), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(rope(x, offset=60), expected, rtol=0, atol=1e-12)
    # short calls keep the unscaled frequencies exactly
    short = torch.arange(10)
    torch.testing.assert_close(rope(x[..., :10, :], positions=short), posenc.apply_rotary(x[..., :10, :], short), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["ntk", "dynamic"])
def test_degenerate_widths_are_refused(kind):
    sc = {"type": kind, "factor": 2}
    if kind == "dynamic":
        sc["original_max_position_embeddings"] = 8
    for call in (
        lambda: posenc.RotaryEmbedding(2, scaling=sc),
        lambda: posenc.rotary_frequencies(2, scaling=sc),
        lambda: posenc.apply_rotary(torch.randn(3, 2), torch.arange(3), scaling=sc),
        lambda: posenc.RotaryEmbedding(8, rotary_dim=2, scaling=sc),
    ):
        with pytest.raises(ValueError, match="at least 4 rotated coordinates"):
            call()
    assert posenc.RotaryEmbedding(4, scaling=sc).inv_freq.shape == (2,)


# ------------------------------------------------------------------- CUDA (skipped here)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _eager_only(monkeypatch):
    """Switch the fused Triton kernel off: :func:`posenc.rope.kernels.rotate_fast` asks ``_triton()``."""
    monkeypatch.setattr(posenc.rope.kernels, "_triton", lambda: None)


def test_the_cuda_tests_switch_the_kernel_off_through_todays_api(monkeypatch):
    # runs on the CPU too, so that a rename cannot leave the CUDA tests pointing at nothing
    import posenc.rope.kernels

    _eager_only(monkeypatch)
    assert posenc.rope.kernels._triton() is None
    x = torch.randn(1, 2, 5, 8)
    torch.testing.assert_close(posenc.RotaryEmbedding(8)(x), posenc.apply_rotary(x, torch.arange(5)), rtol=0, atol=1e-6)


@cuda
@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape_case", ["bhsd", "bshd", "positions_1d", "head_dim_48"])
def test_fused_kernel_matches_the_eager_path(layout, dtype, shape_case, monkeypatch):
    pytest.importorskip("triton")
    assert posenc.rope.kernels._triton() is not None
    g = torch.Generator(device="cuda").manual_seed(0)
    seq_dim = 1 if shape_case == "bshd" else -2
    hd = 48 if shape_case == "head_dim_48" else 64  # 24 pairs: not a power of two
    shape = (3, 37, 5, hd) if shape_case == "bshd" else (3, 5, 37, hd)
    x = torch.randn(shape, device="cuda", generator=g).to(dtype)
    pos = torch.randint(0, 100_000, (37,) if shape_case == "positions_1d" else (3, 37), device="cuda", generator=g)
    rope = posenc.RotaryEmbedding(hd, layout=layout, seq_dim=seq_dim, scaling={"type": "yarn", "factor": 4, "original_max_position_embeddings": 64}).cuda()
    fused = rope(x, positions=pos)
    default = rope(x, offset=7)
    cos, sin, *_ = rope.tables(pos)
    fused_tables, _ = posenc.apply_rotary_tables(x, x, cos, sin, layout=layout, seq_dim=seq_dim)
    _eager_only(monkeypatch)
    eager, eager_default = rope(x, positions=pos), rope(x, offset=7)
    assert fused.dtype == dtype and torch.equal(fused, fused_tables)
    # both rotate in float32; they may differ by the rounding of the float32 arithmetic,
    # which after the cast to 16 bits is at most one unit in the last place
    ulp = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10, torch.float32: 2.0**-22}[dtype]
    for a, b in ((fused, eager), (default, eager_default)):
        diff = (a.float() - b.float()).abs()
        assert bool((diff <= ulp * b.float().abs().clamp_min(1e-3) + 1e-6).all()), float(diff.max())


@cuda
@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
def test_fused_kernel_gradients(layout, monkeypatch):
    pytest.importorskip("triton")
    rope = posenc.RotaryEmbedding(32, layout=layout).cuda()
    x = torch.randn(2, 3, 9, 32, device="cuda", requires_grad=True)
    pos = torch.arange(9, device="cuda") * 100
    g = torch.randn(2, 3, 9, 32, device="cuda")
    (rope(x, positions=pos) * g).sum().backward()
    fused_grad = x.grad.clone()
    x.grad = None
    _eager_only(monkeypatch)
    (rope(x, positions=pos) * g).sum().backward()
    torch.testing.assert_close(fused_grad, x.grad, rtol=1e-5, atol=1e-5)


@cuda
@pytest.mark.parametrize("layout", ROTARY_LAYOUTS)
def test_cuda_graph_capture_with_position_ids(layout):
    """Capture fails on any host-device synchronisation: the call with position ids has none."""
    rope = posenc.RotaryEmbedding(64, layout=layout, scaling={"rope_type": "dynamic", "factor": 2}, max_position_embeddings=64).cuda()
    x = torch.randn(2, 4, 16, 64, device="cuda", dtype=torch.bfloat16)
    pos = torch.arange(16, device="cuda").expand(2, 16).contiguous()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture, as CUDA graphs require
        rope(x, positions=pos)
        cos, sin, *_ = rope.tables(pos)
        posenc.apply_rotary_tables(x, x, cos, sin, layout=layout)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = rope(x, positions=pos)
        cos, sin, *_ = rope.tables(pos)
        out_tables, _ = posenc.apply_rotary_tables(x, x, cos, sin, layout=layout)
    pos.add_(500)  # new position ids in place, replayed without Python
    graph.replay()
    torch.cuda.synchronize()
    expected = rope(x, positions=pos)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(out_tables, expected, rtol=0, atol=0)


@cuda
def test_debug_checks_positions_on_the_gpu():
    x = torch.randn(1, 3, 8, device="cuda")
    bad = torch.tensor([0.0, float("nan"), 1.0], device="cuda")
    assert posenc.RotaryEmbedding(8).cuda()(x, positions=bad).shape == x.shape  # no check, no sync
    with pytest.raises(ValueError, match="finite"):
        posenc.RotaryEmbedding(8, check_values=True).cuda()(x, positions=bad)
    with pytest.raises(ValueError, match="positions are on cpu"):
        posenc.RotaryEmbedding(8).cuda()(x, positions=bad.cpu())


# --------------------------------------------------------------------------- bad input

_X = torch.randn(2, 3, 5, 8)
_ROPE = posenc.RotaryEmbedding(8)
_COS, _SIN, *_ = _ROPE.tables(torch.arange(5))
_META = torch.device("meta")


def _bad(kind, name, call, exc, match):
    return pytest.param(kind, call, exc, match, id=f"{kind}-{name}")


# (kind, what, call, exception, a regex naming the argument)
BAD_INPUTS = [
    # wrong types
    _bad("type", "head_dim-str", lambda: posenc.RotaryEmbedding("64"), TypeError, "head_dim"),
    _bad("type", "head_dim-float", lambda: posenc.RotaryEmbedding(64.0), TypeError, "head_dim"),
    _bad("type", "head_dim-bool", lambda: posenc.RotaryEmbedding(True), TypeError, "head_dim"),
    _bad("type", "base-str", lambda: posenc.RotaryEmbedding(8, base="1e4"), TypeError, "base"),
    _bad("type", "x-numpy", lambda: _ROPE(np.zeros((2, 8))), TypeError, "x must be a torch.Tensor"),
    _bad("type", "x-list", lambda: posenc.apply_rotary([[0.0] * 8], [0]), TypeError, "x must be a torch.Tensor"),
    _bad("type", "positions-scalar", lambda: posenc.apply_rotary(_X, 3), TypeError, "positions"),
    _bad("type", "positions-str", lambda: posenc.apply_rotary(_X, "abcde"), TypeError, "positions"),
    _bad("type", "positions-strings", lambda: posenc.apply_rotary(_X, ["a"] * 5), TypeError, "positions"),
    _bad("type", "positions-ragged", lambda: posenc.apply_rotary(_X, [[0, 1], [2]]), TypeError, "positions"),
    _bad("type", "positions-none", lambda: posenc.apply_rotary(_X, None), TypeError, "positions"),
    _bad("type", "positions-dict", lambda: _ROPE(_X, positions={0: 1}), TypeError, "positions"),
    _bad("type", "scaling-str", lambda: posenc.RotaryEmbedding(8, scaling="linear"), TypeError, "scaling"),
    _bad("type", "factor-str", lambda: posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": "2"}), TypeError, "factor"),
    _bad("type", "rope_theta-str", lambda: posenc.RotaryEmbedding(8, scaling={"rope_type": "default", "rope_theta": "x"}), TypeError, "rope_theta"),
    _bad("type", "truncate-str", lambda: posenc.normalize_scaling({"type": "yarn", "factor": 2, "original_max_position_embeddings": 8, "truncate": "yes"}), TypeError, "truncate"),
    _bad("type", "original-float", lambda: posenc.normalize_scaling({"type": "yarn", "factor": 2, "original_max_position_embeddings": 8.5}), TypeError, "original_max_position_embeddings"),
    _bad("type", "rotary_dim-float", lambda: posenc.RotaryEmbedding(8, rotary_dim=4.0), TypeError, "rotary_dim"),
    _bad("type", "partial-str", lambda: posenc.RotaryEmbedding(8, partial_rotary_factor="0.5"), TypeError, "partial_rotary_factor"),
    _bad("type", "seq_dim-float", lambda: posenc.RotaryEmbedding(8, seq_dim=1.0), TypeError, "seq_dim"),
    _bad("type", "seq_dim-bool", lambda: posenc.apply_rotary(_X, torch.arange(5), seq_dim=True), TypeError, "seq_dim"),
    _bad("type", "check_values-int", lambda: posenc.RotaryEmbedding(8, check_values=1), TypeError, "check_values"),
    _bad("type", "offset-float", lambda: _ROPE(_X, offset=1.5), TypeError, "offset"),
    _bad("type", "max_len-str", lambda: posenc.RotaryEmbedding(8, max_len="2048"), TypeError, "max_len"),
    _bad("type", "max_position_embeddings-float", lambda: posenc.RotaryEmbedding(8, max_position_embeddings=4096.0), TypeError, "max_position_embeddings"),
    _bad("type", "seq_len-float", lambda: posenc.rotary_frequencies(8, seq_len=3.5), TypeError, "seq_len"),
    _bad("type", "n_heads-float", lambda: posenc.rotary_permutation(8, 2.0), TypeError, "n_heads"),
    _bad("type", "cos-numpy", lambda: posenc.apply_rotary_tables(_X, _X, _COS.numpy(), _SIN), TypeError, "cos"),
    _bad("type", "k-none", lambda: posenc.apply_rotary_tables(_X, None, _COS, _SIN), TypeError, "k must be a torch.Tensor"),
    _bad("type", "tables-device-int", lambda: _ROPE.tables(seq_len=3, device=3.5), TypeError, "device"),
    _bad("type", "tables-seq_len-str", lambda: _ROPE.tables(seq_len="3"), TypeError, "seq_len"),
    # sizes and values out of range
    _bad("size", "head_dim-0", lambda: posenc.RotaryEmbedding(0), ValueError, "head_dim"),
    _bad("size", "head_dim-1", lambda: posenc.RotaryEmbedding(1), ValueError, "head_dim"),
    _bad("size", "head_dim-odd", lambda: posenc.RotaryEmbedding(7), ValueError, "head_dim"),
    _bad("size", "head_dim-huge", lambda: posenc.RotaryEmbedding(1 << 40), ValueError, "head_dim"),
    _bad("size", "head_dim-huge-frequencies", lambda: posenc.rotary_frequencies(10**12), ValueError, "head_dim"),
    _bad("size", "x-odd-width", lambda: posenc.apply_rotary(torch.randn(2, 7), torch.arange(2)), ValueError, "head_dim"),
    _bad("size", "rotary_dim-0", lambda: posenc.RotaryEmbedding(8, rotary_dim=0), ValueError, "rotary_dim"),
    _bad("size", "rotary_dim-odd", lambda: posenc.RotaryEmbedding(8, rotary_dim=5), ValueError, "rotary_dim"),
    _bad("size", "rotary_dim-too-wide", lambda: posenc.RotaryEmbedding(8, rotary_dim=10), ValueError, "rotary_dim"),
    _bad("size", "partial-0", lambda: posenc.RotaryEmbedding(8, partial_rotary_factor=0), ValueError, "partial_rotary_factor"),
    _bad("size", "partial-above-1", lambda: posenc.RotaryEmbedding(8, partial_rotary_factor=1.5), ValueError, "partial_rotary_factor"),
    _bad("size", "partial-odd-width", lambda: posenc.RotaryEmbedding(10, partial_rotary_factor=0.3), ValueError, "partial_rotary_factor"),
    _bad("size", "partial-disagrees", lambda: posenc.RotaryEmbedding(8, rotary_dim=4, partial_rotary_factor=0.25), ValueError, "rotary_dim"),
    _bad("size", "partial-arg-vs-dict", lambda: posenc.RotaryEmbedding(8, partial_rotary_factor=0.5, scaling={"rope_type": "default", "partial_rotary_factor": 0.25}), ValueError, "partial_rotary_factor"),
    _bad("size", "base-0", lambda: posenc.RotaryEmbedding(8, base=0), ValueError, "base"),
    _bad("size", "base-1", lambda: posenc.RotaryEmbedding(8, base=1.0), ValueError, "base"),
    _bad("size", "base-negative", lambda: posenc.apply_rotary(_X, torch.arange(5), base=-10.0), ValueError, "base"),
    _bad("size", "max_len-negative", lambda: posenc.RotaryEmbedding(8, max_len=-1), ValueError, "max_len"),
    _bad("size", "offset-negative", lambda: _ROPE(_X, offset=-1), ValueError, "offset"),
    _bad("size", "factor-0", lambda: posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 0}), ValueError, "factor"),
    _bad("size", "factor-below-1", lambda: posenc.RotaryEmbedding(8, scaling={"type": "ntk", "factor": 0.5}), ValueError, "factor"),
    _bad("size", "llama3-high-below-low", lambda: posenc.normalize_scaling({"type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1, "original_max_position_embeddings": 64}), ValueError, "high_freq_factor"),
    _bad("size", "original-0", lambda: posenc.normalize_scaling({"type": "dynamic", "factor": 2, "original_max_position_embeddings": 0}), ValueError, "original_max_position_embeddings"),
    _bad("size", "max_position_embeddings-0", lambda: posenc.normalize_scaling(None, max_position_embeddings=0), ValueError, "max_position_embeddings"),
    _bad("size", "seq_len-0", lambda: posenc.rotary_frequencies(8, seq_len=0), ValueError, "seq_len"),
    _bad("size", "tables-seq_len-negative", lambda: _ROPE.tables(seq_len=-1), ValueError, "seq_len"),
    _bad("size", "n_heads-0", lambda: posenc.rotary_permutation(8, 0), ValueError, "n_heads"),
    _bad("size", "n_heads-huge", lambda: posenc.rotary_permutation(8, 1 << 40), ValueError, "n_heads"),
    _bad("size", "x-width-differs", lambda: _ROPE(torch.zeros(2, 6)), ValueError, r"\(\.\.\., seq, 8\)"),
    _bad("size", "q-narrower-than-tables", lambda: posenc.apply_rotary_tables(_X[..., :4], _X, _COS, _SIN), ValueError, "q has head_dim 4"),
    # NaN and infinity
    _bad("nan", "positions-nan-list", lambda: posenc.apply_rotary(_X, [0, 1, float("nan"), 3, 4]), ValueError, "positions must be finite"),
    _bad("nan", "positions-inf-tensor", lambda: _ROPE(_X, positions=torch.tensor([0, 1, float("inf"), 3, 4])), ValueError, "positions must be finite"),
    _bad("nan", "positions-neg-inf-2d", lambda: _ROPE(_X, positions=torch.full((2, 5), -float("inf"))), ValueError, "positions must be finite"),
    _bad("nan", "positions-nan-tables", lambda: _ROPE.tables(np.array([0.0, np.nan])), ValueError, "positions must be finite"),
    _bad("nan", "positions-nan-float32", lambda: _ROPE(_X, positions=torch.tensor([0, 1, 2, 3, float("nan")], dtype=torch.float32)), ValueError, "positions must be finite"),
    _bad("nan", "base-nan", lambda: posenc.RotaryEmbedding(8, base=float("nan")), ValueError, "base"),
    _bad("nan", "base-inf", lambda: posenc.rotary_frequencies(8, base=float("inf")), ValueError, "base"),
    _bad("nan", "factor-nan", lambda: posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": float("nan")}), ValueError, "factor"),
    _bad("nan", "factor-inf", lambda: posenc.RotaryEmbedding(8, scaling={"type": "yarn", "factor": float("inf"), "original_max_position_embeddings": 8}), ValueError, "factor"),
    _bad("nan", "partial-nan", lambda: posenc.RotaryEmbedding(8, partial_rotary_factor=float("nan")), ValueError, "partial_rotary_factor"),
    # rank and shape
    _bad("rank", "x-1d", lambda: _ROPE(torch.zeros(8)), ValueError, "x must have shape"),
    _bad("rank", "x-0d", lambda: posenc.apply_rotary(torch.tensor(1.0), [0]), ValueError, "x must have shape"),
    _bad("rank", "positions-3d", lambda: _ROPE(_X, positions=torch.zeros(2, 3, 5, dtype=torch.long)), ValueError, "positions"),
    _bad("rank", "positions-0d-tensor", lambda: _ROPE(_X, positions=torch.tensor(3)), ValueError, "positions"),
    _bad("rank", "positions-length", lambda: _ROPE(_X, positions=torch.arange(4)), ValueError, "positions"),
    _bad("rank", "positions-batch", lambda: _ROPE(_X, positions=torch.zeros(3, 5, dtype=torch.long)), ValueError, "positions"),
    _bad("rank", "positions-2d-for-2d-x", lambda: posenc.apply_rotary(torch.randn(5, 8), torch.zeros(1, 5, dtype=torch.long)), ValueError, "positions"),
    _bad("rank", "seq_dim-last", lambda: posenc.RotaryEmbedding(8, seq_dim=-1), ValueError, "seq_dim"),
    _bad("rank", "seq_dim-out-of-range", lambda: posenc.RotaryEmbedding(8, seq_dim=3)(_X), ValueError, "seq_dim"),
    _bad("rank", "seq_dim-too-negative", lambda: posenc.apply_rotary(_X, torch.arange(2), seq_dim=-5), ValueError, "seq_dim"),
    _bad("rank", "seq_dim-0-with-batched-positions", lambda: posenc.apply_rotary(_X, torch.zeros(2, 2, dtype=torch.long), seq_dim=0), ValueError, "positions"),
    _bad("rank", "cos-1d", lambda: posenc.apply_rotary_tables(_X, _X, _COS[0], _SIN[0]), ValueError, "cos must have shape"),
    _bad("rank", "cos-sin-differ", lambda: posenc.apply_rotary_tables(_X, _X, _COS, _SIN[:4]), ValueError, "cos and sin"),
    _bad("rank", "tables-seq-mismatch", lambda: posenc.apply_rotary_tables(_X[:, :, :4], _X[:, :, :4], _COS, _SIN), ValueError, "do not fit q"),
    _bad("rank", "tables-batch-mismatch", lambda: posenc.apply_rotary_tables(_X, _X, _COS.expand(3, 5, 4), _SIN.expand(3, 5, 4)), ValueError, "do not fit q"),
    # dtypes
    _bad("dtype", "x-int", lambda: _ROPE(torch.zeros(2, 8, dtype=torch.long)), TypeError, "x must be a floating-point"),
    _bad("dtype", "x-bool", lambda: posenc.apply_rotary(torch.zeros(2, 8, dtype=torch.bool), [0, 1]), TypeError, "x must be a floating-point"),
    _bad("dtype", "x-complex", lambda: posenc.apply_rotary(torch.zeros(2, 8, dtype=torch.complex64), [0, 1]), TypeError, "x must be a floating-point"),
    _bad("dtype", "k-int", lambda: posenc.apply_rotary_tables(_X, _X.long(), _COS, _SIN), TypeError, "k must be a floating-point"),
    _bad("dtype", "positions-bool", lambda: _ROPE(_X, positions=torch.arange(5).bool()), TypeError, "positions"),
    _bad("dtype", "positions-bfloat16", lambda: _ROPE(_X, positions=torch.arange(5).bfloat16()), TypeError, "positions"),
    _bad("dtype", "positions-float16", lambda: _ROPE(_X, positions=torch.arange(5).half()), TypeError, "positions"),
    _bad("dtype", "positions-complex", lambda: _ROPE(_X, positions=torch.zeros(5, dtype=torch.complex64)), TypeError, "positions"),
    _bad("dtype", "positions-numpy-float16", lambda: posenc.apply_rotary(_X, np.arange(5, dtype=np.float16)), TypeError, "positions"),
    _bad("dtype", "positions-numpy-object", lambda: posenc.apply_rotary(_X, np.array([0, 1, 2, 3, None], dtype=object)), TypeError, "positions"),
    _bad("dtype", "positions-numpy-bool", lambda: posenc.apply_rotary(_X, np.ones(5, dtype=bool)), TypeError, "positions"),
    _bad("dtype", "cos-bfloat16", lambda: posenc.apply_rotary_tables(_X, _X, _COS.bfloat16(), _SIN.bfloat16()), TypeError, "cos must be float32 or float64"),
    _bad("dtype", "cos-int", lambda: posenc.apply_rotary_tables(_X, _X, _COS.long(), _SIN), TypeError, "cos must be float32 or float64"),
    _bad("dtype", "cos-sin-dtypes-differ", lambda: posenc.apply_rotary_tables(_X, _X, _COS, _SIN.double()), ValueError, "cos and sin"),
    _bad("dtype", "tables-dtype-bf16", lambda: _ROPE.tables(seq_len=3, dtype=torch.bfloat16), TypeError, "dtype"),
    _bad("dtype", "tables-dtype-int", lambda: _ROPE.tables(seq_len=3, dtype=torch.int64), TypeError, "dtype"),
    # devices
    _bad("device", "positions-on-another-device", lambda: _ROPE(_X, positions=torch.arange(5, device=_META)), ValueError, "positions are on meta"),
    _bad("device", "apply-positions-on-another-device", lambda: posenc.apply_rotary(_X, torch.arange(5, device=_META)), ValueError, "positions are on meta"),
    _bad("device", "tables-on-another-device", lambda: posenc.apply_rotary_tables(_X, _X, _COS.to(_META), _SIN.to(_META)), ValueError, "q is on cpu"),
    _bad("device", "cos-sin-devices-differ", lambda: posenc.apply_rotary_tables(_X, _X, _COS, _SIN.to(_META)), ValueError, "cos and sin"),
    _bad("device", "tables-device-vs-positions", lambda: _ROPE.tables(torch.arange(3, device=_META), device="cpu"), ValueError, "positions are on meta"),
    _bad("device", "tables-unknown-device", lambda: _ROPE.tables(seq_len=3, device="gpu7"), TypeError, "device"),
    # unknown or conflicting options
    _bad("option", "layout-neox", lambda: posenc.RotaryEmbedding(8, layout="neox"), ValueError, "layout.*'half', 'interleaved'"),
    _bad("option", "layout-none", lambda: posenc.apply_rotary(_X, torch.arange(5), layout=None), ValueError, "layout"),
    _bad("option", "layout-tables", lambda: posenc.apply_rotary_tables(_X, _X, _COS, _SIN, layout="complex"), ValueError, "layout"),
    _bad("option", "scaling-type-unknown", lambda: posenc.RotaryEmbedding(8, scaling={"type": "xpos", "factor": 2}), ValueError, r"scaling\['rope_type'\].*'linear'"),
    _bad("option", "scaling-type-missing", lambda: posenc.RotaryEmbedding(8, scaling={"factor": 2}), ValueError, "rope_type"),
    _bad("option", "scaling-types-differ", lambda: posenc.normalize_scaling({"type": "linear", "rope_type": "ntk", "factor": 2}), ValueError, "rope_type"),
    _bad("option", "scaling-key-missing", lambda: posenc.RotaryEmbedding(8, scaling={"type": "yarn", "factor": 2}), ValueError, "needs the key"),
    _bad("option", "scaling-key-unknown", lambda: posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 2, "beta_fast": 3}), ValueError, "does not take"),
    _bad("option", "default-key-unknown", lambda: posenc.normalize_scaling({"rope_type": "default", "factor": 2}), ValueError, "does not take factor"),
    _bad("option", "rope_theta-differs", lambda: posenc.RotaryEmbedding(8, base=1e4, scaling={"rope_type": "linear", "factor": 2, "rope_theta": 5e5}), ValueError, "rope_theta"),
    _bad("option", "hf-dynamic-without-length", lambda: posenc.RotaryEmbedding(8, scaling={"rope_type": "dynamic", "factor": 2}), ValueError, "max_position_embeddings"),
    _bad("option", "positions-and-offset", lambda: _ROPE(_X, positions=torch.arange(5), offset=2), ValueError, "either positions"),
    _bad("option", "tables-positions-and-seq_len", lambda: _ROPE.tables(torch.arange(3), seq_len=3), ValueError, "either positions"),
    _bad("option", "tables-nothing", lambda: _ROPE.tables(), ValueError, "seq_len"),
    _bad("option", "tables-positions-and-offset", lambda: _ROPE.tables(torch.arange(3), offset=1), ValueError, "either positions"),
    # degenerate sizes
    _bad("degenerate", "ntk-width-2", lambda: posenc.RotaryEmbedding(2, scaling={"type": "ntk", "factor": 2}), ValueError, "at least 4"),
    _bad("degenerate", "dynamic-width-2", lambda: posenc.rotary_frequencies(2, scaling={"type": "dynamic", "factor": 2, "original_max_position_embeddings": 8}), ValueError, "at least 4"),
    _bad("degenerate", "ntk-partial-width-2", lambda: posenc.RotaryEmbedding(8, rotary_dim=2, scaling={"type": "ntk", "factor": 2}), ValueError, "at least 4"),
]


@pytest.mark.parametrize(("kind", "call", "exc", "match"), BAD_INPUTS)
def test_bad_input_is_refused_with_an_error_naming_the_argument(kind, call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bad_input_cases_cover_every_kind():
    counts: dict[str, int] = {}
    for case in BAD_INPUTS:
        counts[case.values[0]] = counts.get(case.values[0], 0) + 1
    assert set(counts) == {"type", "size", "nan", "rank", "dtype", "device", "option", "degenerate"}
    assert all(n >= 3 for n in counts.values()), counts


_NON_INTEGERS = st.one_of(
    st.floats(allow_nan=True), st.text(max_size=3), st.none(), st.booleans(), st.lists(st.integers(), max_size=2)
)


@settings(max_examples=60, deadline=None)
@given(value=_NON_INTEGERS, arg=st.sampled_from(["head_dim", "rotary_dim", "max_len", "seq_dim", "offset"]))
def test_generated_non_integer_arguments_are_type_errors(value, arg):
    if arg == "head_dim":
        call = lambda: posenc.RotaryEmbedding(value)  # noqa: E731
    elif arg == "offset":
        call = lambda: _ROPE(_X, offset=value)  # noqa: E731
    else:
        call = lambda: posenc.RotaryEmbedding(8, **{arg: value})  # noqa: E731
    if arg == "rotary_dim" and value is None:
        return  # rotary_dim=None is the default: rotate every coordinate
    with pytest.raises(TypeError, match=arg):
        call()


@settings(max_examples=60, deadline=None)
@given(
    head_dim=st.integers(-10, 40),
    rotary_dim=st.one_of(st.none(), st.integers(-4, 48)),
)
def test_generated_sizes_are_accepted_exactly_when_valid(head_dim, rotary_dim):
    width = head_dim if rotary_dim is None else rotary_dim
    valid = head_dim >= 2 and 2 <= width <= head_dim and width % 2 == 0
    if valid:
        rope = posenc.RotaryEmbedding(head_dim, rotary_dim=rotary_dim)
        assert rope.rotary_dim == width and rope(torch.randn(3, head_dim)).shape == (3, head_dim)
    else:
        with pytest.raises(ValueError, match="head_dim|rotary_dim"):
            posenc.RotaryEmbedding(head_dim, rotary_dim=rotary_dim)


@settings(max_examples=60, deadline=None)
@given(
    seq=st.integers(1, 6),
    wrong=st.integers(0, 8),
    batch=st.integers(1, 3),
    bad_value=st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    where=st.integers(0, 5),
    batched=st.booleans(),
)
def test_generated_bad_positions(seq, wrong, batch, bad_value, where, batched):
    x = torch.randn(batch, 2, seq, 8)
    rope = posenc.RotaryEmbedding(8)
    if wrong != seq:
        shape = (batch, wrong) if batched else (wrong,)
        with pytest.raises(ValueError, match="positions must have shape"):
            rope(x, positions=torch.zeros(shape, dtype=torch.long))
    pos = torch.arange(seq, dtype=torch.float64).expand(batch, seq).clone() if batched else torch.arange(seq, dtype=torch.float64)
    pos.view(-1)[where % pos.numel()] = bad_value
    with pytest.raises(ValueError, match="positions must be finite"):
        rope(x, positions=pos)
    with pytest.raises(ValueError, match="positions must be finite"):
        posenc.apply_rotary(x, pos)


@settings(max_examples=40, deadline=None)
@given(
    layout=st.text(max_size=12).filter(lambda s: s not in ROTARY_LAYOUTS),
    seq_dim=st.integers(-12, 12),
    ndim=st.integers(2, 5),
    dtype=st.sampled_from([torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool]),
)
def test_generated_bad_options_axes_and_dtypes(layout, seq_dim, ndim, dtype):
    with pytest.raises(ValueError, match="layout"):
        posenc.RotaryEmbedding(8, layout=layout)
    x = torch.randn(*([2] * (ndim - 1)), 8)
    if not (-ndim <= seq_dim <= ndim - 2) or seq_dim == -1:
        with pytest.raises(ValueError, match="seq_dim"):
            posenc.apply_rotary(x, torch.arange(2), seq_dim=seq_dim)
    else:
        assert posenc.apply_rotary(x, torch.arange(2), seq_dim=seq_dim).shape == x.shape
    with pytest.raises(TypeError, match="floating-point"):
        posenc.RotaryEmbedding(8)(x.to(dtype))


def test_compiled_tables_equal_the_eager_ones():
    """The tables are computed the same way in eager and compiled mode (int64 range reduction)."""
    torch._dynamo.reset()
    rope = posenc.RotaryEmbedding(64, max_len=32)
    pos = torch.arange(5000, 5040).expand(2, 40)
    compiled = torch.compile(lambda p: rope.tables(p)[:2], fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(pos), rope.tables(pos)[:2]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_module_cast_with_to_dtype_keeps_the_rotation(layout, dtype):
    # Module.to(float32) casts the complex table of the interleaved layout to its real part
    # (PyTorch warns and drops the imaginary part): the module must rebuild it, not use it
    x = torch.randn(2, 3, 7, 16, generator=torch.Generator().manual_seed(0))
    expected = posenc.RotaryEmbedding(16, layout=layout)(x.double())
    module = posenc.RotaryEmbedding(16, layout=layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        module = module.to(dtype)
    out = module(x.to(dtype))
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)
