"""The RoPE package as an engineer deploys it (issue 20).

* no float64 tensor is produced on the input's device for float32 input (a dispatch mode
  records the dtype of every tensor an operation returns);
* ``forward`` never assigns to the module: threads calling it with lengths growing past
  ``max_len`` all get the right answer and leave the buffers as they were;
* the functional ``apply_rotary`` compiles with ``fullgraph=True``; the absolute modules
  export with ``(batch, seq)`` positions and a dynamic length;
* typed tables: Hugging Face's full-width ``[cos | cos]`` partial tables, swapped cos/sin,
  another layout or another width are refused, never applied;
* every scaling type equals ``transformers``' ``ROPE_INIT_FUNCTIONS`` (frequencies and
  attention factor), ``longrope`` in both regimes and ``proportional`` (p-RoPE) included,
  from Hugging Face dicts taken as they are;
* posenc's tables swapped into tiny random Llama, Qwen2, GPT-NeoX, Phi and GPT-J models
  give their logits (left padding, a length past ``max_position_embeddings``).
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc import RotaryEmbedding, RotaryTables, apply_rotary, apply_rotary_tables

# ------------------------------------------------------------------ float64 on the device


class _DtypeRecorder(TorchDispatchMode):
    """Record the dtype of every tensor an aten operation returns."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.seen.append((str(func), t.dtype))
        return out


def _float64_ops(fn) -> list[str]:
    with _DtypeRecorder() as rec:
        fn()
    return sorted({name for name, dtype in rec.seen if dtype == torch.float64})


SCALINGS = {
    "plain": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(8)],
        "long_factor": [1.5 + 0.2 * i for i in range(8)],
        "original_max_position_embeddings": 16,
        "factor": 4.0,
    },
    "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
}


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("name", list(SCALINGS))
def test_no_float64_on_the_device_for_float32_input(name, layout):
    rope = RotaryEmbedding(16, layout=layout, scaling=SCALINGS[name], max_len=32)
    x = torch.randn(2, 2, 40, 16)
    pos = torch.arange(40).expand(2, 40) + torch.tensor([[0], [3000]])
    calls = {
        "default": lambda: rope(x),
        "offset beyond the table": lambda: rope(x, offset=100),
        "tensor offset": lambda: rope(x, offset=torch.tensor(7)),
        "positions": lambda: rope(x, positions=pos),
        "tables": lambda: apply_rotary_tables(x, x, rope.tables(pos)),
    }
    for what, call in calls.items():
        assert _float64_ops(call) == [], what


def test_no_float64_in_the_other_modules_and_functions():
    x = torch.randn(2, 12, 16)
    pos = torch.arange(12).expand(2, 12)
    rope = RotaryEmbedding(8)
    attn = posenc.SelfAttention(16, n_heads=2, causal=True)
    pe = posenc.SinusoidalPositionalEncoding(16, 32)
    calls = {
        "apply_rotary": lambda: apply_rotary(x.view(2, 12, 2, 8), pos, seq_dim=1),
        "apply_rotary yarn": lambda: apply_rotary(
            x, torch.arange(12), scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8}
        ),
        "sinusoidal": lambda: pe(x, positions=pos),
        "attention": lambda: attn(x, rotary=rope, positions=pos),
        "alibi": lambda: posenc.alibi_bias(4, 12),
    }
    for what, call in calls.items():
        assert _float64_ops(call) == [], what


def test_a_module_cast_keeps_float32_tables_and_a_float64_input_gets_float64():
    rope = RotaryEmbedding(16).to(torch.bfloat16)
    assert all(b.dtype != torch.bfloat16 for b in rope.buffers())
    q = torch.randn(1, 1, 3, 16, dtype=torch.bfloat16)
    assert torch.equal(rope(q, offset=10_000), RotaryEmbedding(16)(q.float(), offset=10_000).bfloat16())
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    angles = torch.arange(5, dtype=torch.float64)[:, None] * torch.from_numpy(posenc.rotary_frequencies(16))
    want = torch.cat([x[..., :8] * angles.cos() - x[..., 8:] * angles.sin(), x[..., 8:] * angles.cos() + x[..., :8] * angles.sin()], -1)
    torch.testing.assert_close(RotaryEmbedding(16)(x), want, rtol=0, atol=1e-13)


# ------------------------------------------------------------------ state and threads


def _state(rope: RotaryEmbedding) -> dict:
    return {name: (b.data_ptr(), b.shape, b.dtype, b.device) for name, b in rope.named_buffers()} | {
        "dict": sorted(k for k in vars(rope) if not k.startswith("_"))
    }


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_threads_growing_past_max_len_get_the_right_answer_and_leave_the_module_alone(layout):
    rope = RotaryEmbedding(16, layout=layout, max_len=8)
    lengths = [3, 9, 17, 33, 65, 130]
    inputs = {n: torch.randn(1, 2, n, 16, generator=torch.Generator().manual_seed(n)) for n in lengths}
    want = {n: RotaryEmbedding(16, layout=layout, max_len=256)(x) for n, x in inputs.items()}
    before = _state(rope)
    failures: list[str] = []

    def work(shift: int) -> None:
        for r in range(25):
            n = lengths[(r + shift) % len(lengths)]
            try:
                out = rope(inputs[n])
                if not torch.allclose(out, want[n], atol=2e-6):
                    failures.append(f"wrong values at length {n}")
            except Exception as err:  # noqa: BLE001 - every failure counts
                failures.append(f"{type(err).__name__}: {err}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert failures == []
    assert _state(rope) == before


def test_a_meta_call_leaves_the_buffers_on_their_device():
    rope = RotaryEmbedding(8)
    rope(torch.empty(1, 5, 8, device="meta"))
    rope(torch.empty(1, 5000, 8, device="meta"))
    assert {b.device.type for b in rope.buffers()} == {"cpu"}


# ------------------------------------------------------------------ compile and export


def test_apply_rotary_compiles_with_fullgraph():
    torch._dynamo.reset()
    x = torch.randn(2, 2, 9, 16)
    pos = torch.arange(9).expand(2, 9) + 5
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}

    def f(x, pos):
        return apply_rotary(x, pos) + apply_rotary(x, pos, layout="interleaved", scaling=yarn, rotary_dim=8)

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x, pos), f(x, pos), rtol=0, atol=1e-6)


def test_compiled_module_refuses_a_negative_offset_clearly():
    torch._dynamo.reset()
    rope = RotaryEmbedding(8)
    compiled = torch.compile(lambda x: rope(x, offset=-1), backend="eager")
    with pytest.raises(ValueError, match="offset must be an integer >= 0"):
        compiled(torch.randn(1, 3, 8))
    torch._dynamo.reset()
    strict = torch.compile(lambda x: rope(x, offset=-1), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="offset must be an integer >= 0"):  # fullgraph reports it as it found it
        strict(torch.randn(1, 3, 8))


@pytest.mark.parametrize("module", ["sinusoidal", "learned", "rope"])
def test_export_with_batch_seq_positions_and_a_dynamic_length(module):
    torch._dynamo.reset()
    d = 16
    inner = {
        "sinusoidal": posenc.SinusoidalPositionalEncoding(d, 64),
        "learned": posenc.LearnedPositionalEmbedding(64, d),
        "rope": RotaryEmbedding(d, max_len=8),
    }[module]

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x, positions):
            return self.inner(x, positions=positions)

    x, pos = torch.randn(3, 10, d), torch.arange(10).expand(3, 10).contiguous()
    seq = torch.export.Dim("seq", min=2, max=60)
    ep = torch.export.export(M(), (x, pos), dynamic_shapes={"x": {1: seq}, "positions": {1: seq}})
    x2, pos2 = torch.randn(3, 3, d), torch.tensor([[0, 1, 2], [5, 6, 7], [40, 41, 42]])
    torch.testing.assert_close(ep.module()(x2, pos2), M()(x2, pos2))


def test_export_of_default_positions_past_max_len():
    torch._dynamo.reset()

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rope = RotaryEmbedding(16, max_len=8)

        def forward(self, x):
            return self.rope(x)

    seq = torch.export.Dim("seq", min=2, max=4096)
    ep = torch.export.export(M(), (torch.randn(1, 2, 5, 16),), dynamic_shapes={"x": {2: seq}})
    x = torch.randn(1, 2, 300, 16)
    torch.testing.assert_close(ep.module()(x), M()(x), rtol=0, atol=2e-6)


# ------------------------------------------------------------------ typed tables


def test_tables_are_typed_and_hf_full_width_partial_tables_are_refused():
    rope = RotaryEmbedding(64, rotary_dim=16)
    pos = torch.arange(20).expand(2, 20)
    t = rope.tables(pos)
    assert isinstance(t, RotaryTables) and (t.layout, t.rotary_dim) == ("half", 16) and t.cos.shape == (2, 20, 8)
    q, k = torch.randn(2, 4, 20, 64), torch.randn(2, 1, 20, 64)
    q_rot, k_rot = apply_rotary_tables(q, k, t)
    torch.testing.assert_close(q_rot, rope(q, positions=pos), rtol=0, atol=0)
    # Hugging Face's GPT-NeoX/Phi tables: [cos | cos] of the rotated width (16), not 8 pairs
    hf = RotaryTables(torch.cat([t.cos, t.cos], -1), torch.cat([t.sin, t.sin], -1), "half", 16)
    with pytest.raises(ValueError, match="full-width"):
        apply_rotary_tables(q, k, hf)
    with pytest.raises(ValueError, match="full-width"):  # the raw pair, as a Hugging Face model passes it
        apply_rotary_tables(q, k, hf.cos, hf.sin)


def test_swapped_tables_another_layout_or_width_are_refused():
    rope = RotaryEmbedding(16)
    t = rope.tables(torch.arange(12))
    q = torch.randn(1, 2, 12, 16)
    with pytest.raises(ValueError, match="swapped"):
        apply_rotary_tables(q, q, RotaryTables(t.sin, t.cos, t.layout, t.rotary_dim))
    with pytest.raises(ValueError, match="layout"):
        apply_rotary_tables(q, q, t, layout="interleaved")
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rotary_tables(q, q, RotaryTables(t.cos, t.sin, "half", 8))
    with pytest.raises(TypeError, match="tables"):
        apply_rotary_tables(q, q, (t.cos, t.sin))
    with pytest.raises(ValueError, match="head_dim"):
        apply_rotary_tables(torch.randn(1, 2, 12, 8), q, t)


# ------------------------------------------------------------------ Hugging Face parity

transformers = pytest.importorskip("transformers")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")

HD, MAX_POS = 32, 64
HF_CASES = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "dynamic_with_original": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 32},
    "yarn": SCALINGS["yarn"],
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 16,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
        "beta_fast": 16,
        "truncate": False,
    },
    "llama3": SCALINGS["llama3"],
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.05 * i for i in range(8)],
        "long_factor": [1.0 + 0.5 * i for i in range(8)],
        "original_max_position_embeddings": 16,
        "partial_rotary_factor": 0.5,
    },
    "longrope_factor": {
        "rope_type": "longrope",
        "short_factor": [1.0] * 16,
        "long_factor": [2.0 + 0.1 * i for i in range(16)],
        "original_max_position_embeddings": 16,
        "factor": 8.0,
        "attention_factor": 1.3,
    },
    "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
    "proportional_factor": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 2.0},
}


def _hf(params: dict, seq_len: int | None):
    cfg = transformers.LlamaConfig(
        hidden_size=2 * HD,
        num_attention_heads=2,
        head_dim=HD,
        max_position_embeddings=MAX_POS,
        rope_parameters={"rope_theta": 1e6, **params},
    )
    inv, factor = rope_utils.ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg, "cpu", seq_len=seq_len)
    return inv.double(), factor


@pytest.mark.parametrize("seq_len", [None, 10, 200])
@pytest.mark.parametrize("name", list(HF_CASES))
def test_every_scaling_equals_transformers(name, seq_len):
    params = {"rope_theta": 1e6, **HF_CASES[name]}
    inv, factor = _hf(params, seq_len)
    rope = RotaryEmbedding(HD, scaling=params, max_position_embeddings=MAX_POS, max_len=8)
    assert rope.base == 1e6
    assert rope.attention_factor == pytest.approx(factor, rel=1e-12)
    # the tables at the last position of a call of length seq_len
    n = MAX_POS if seq_len is None else seq_len
    if name.startswith(("dynamic", "longrope")) and seq_len is None:
        n = 10
    pos = torch.arange(n)
    t = rope.tables(pos)
    width = 2 * inv.shape[0] if name.startswith("proportional") else rope.rotary_dim
    assert t.rotary_dim == width
    angles = pos[:, None].double() * inv
    torch.testing.assert_close(t.cos.double(), factor * angles.cos(), rtol=0, atol=5e-5)
    torch.testing.assert_close(t.sin.double(), factor * angles.sin(), rtol=0, atol=5e-5)


def test_dynamic_dict_with_original_length_follows_transformers():
    """transformers takes dynamic NTK's length from max_position_embeddings, not from the dict."""
    params = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 32}
    ours = RotaryEmbedding(HD, scaling=params, max_position_embeddings=MAX_POS)
    plain = RotaryEmbedding(HD)
    x = torch.randn(1, 50, HD)
    assert torch.equal(ours(x), plain(x))  # 50 <= 64: unscaled, as in transformers


# ------------------------------------------------------------------ logits with posenc swapped in


def _tiny(kind: str):
    common = dict(vocab_size=64, hidden_size=32, num_attention_heads=2, num_hidden_layers=1, max_position_embeddings=64)
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(intermediate_size=48, num_key_value_heads=1, initializer_range=0.3, **common)
        cfg.rope_parameters = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64}
        model, mod = transformers.LlamaForCausalLM(cfg), "llama"
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(intermediate_size=48, num_key_value_heads=1, initializer_range=0.3, **common)
        model, mod = transformers.Qwen2ForCausalLM(cfg), "qwen2"
    elif kind == "gpt_neox":
        cfg = transformers.GPTNeoXConfig(intermediate_size=48, rotary_pct=0.25, initializer_range=0.3, **common)
        model, mod = transformers.GPTNeoXForCausalLM(cfg), "gpt_neox"
    else:
        cfg = transformers.PhiConfig(intermediate_size=48, partial_rotary_factor=0.5, initializer_range=0.3, **common)
        model, mod = transformers.PhiForCausalLM(cfg), "phi"
    return model.eval(), cfg, __import__(f"transformers.models.{mod}.modeling_{mod}", fromlist=["x"])


def _batch():
    ids = torch.randint(0, 64, (2, 150), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 150, dtype=torch.long)
    mask[0, :7] = 0  # left padding
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt_neox", "phi"])
def test_logits_with_posenc_tables_swapped_in(kind, monkeypatch):
    model, cfg, modeling = _tiny(kind)
    ids, mask, pos = _batch()
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    rope = RotaryEmbedding(head_dim, scaling=dict(cfg.rope_parameters), max_position_embeddings=cfg.max_position_embeddings)

    class Swapped(torch.nn.Module):
        def forward(self, x, position_ids):
            return rope.tables(position_ids), None

    backbone = getattr(model, "model", None) or model.gpt_neox
    monkeypatch.setattr(backbone, "rotary_emb", Swapped())
    monkeypatch.setattr(modeling, "apply_rotary_pos_emb", lambda q, k, tables, _sin, *a, **kw: apply_rotary_tables(q, k, tables))
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    valid = mask.bool()
    assert (got - want)[valid].abs().max() < 1e-4
    # the control: positions doubled move the logits far beyond that
    with torch.no_grad():
        moved = model(input_ids=ids, attention_mask=mask, position_ids=2 * pos).logits
    assert (moved - want)[valid].abs().max() > 1e-2


def test_gptj_logits_with_posenc_interleaved_tables_swapped_in(monkeypatch):
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    cfg = transformers.GPTJConfig(vocab_size=64, n_embd=32, n_head=2, n_layer=1, rotary_dim=8, n_positions=256, initializer_range=0.3, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPTJForCausalLM(cfg).eval()
    ids, mask, pos = _batch()
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    rope = RotaryEmbedding(16, rotary_dim=8, layout="interleaved", seq_dim=1)
    tables = rope.tables(pos)
    monkeypatch.setattr(gptj, "apply_rotary_pos_emb", lambda x, sin, cos: apply_rotary_tables(x, x, tables, seq_dim=1)[0])
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert (got - want)[mask.bool()].abs().max() < 1e-4


def test_math_is_exact_at_large_positions():
    """Angles at positions around 1e6 are within a few 1e-7 of the float64 ones (HF: 1e-1)."""
    rope = RotaryEmbedding(64)
    pos = torch.arange(10**6, 10**6 + 50)
    t = rope.tables(pos)
    angles = pos[:, None].double() * torch.from_numpy(posenc.rotary_frequencies(64))
    assert (t.cos.double() - angles.cos()).abs().max() < 1e-6
    assert (t.sin.double() - angles.sin()).abs().max() < 1e-6
    assert math.isfinite(float(t.cos.sum()))
    assert np.isfinite(t.sin.numpy()).all()
