"""posenc as engineers install it (issue 32): layering, cheap decoding, FlexAttention,
Hugging Face drop-in tables and the small refusals."""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc

ROOT = pathlib.Path(posenc.__file__).parent


def _posenc_imports(path: pathlib.Path) -> set[str]:
    """The relative and ``posenc`` imports of a module, as written."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("posenc")):
            out.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("posenc"))
    return out


def test_the_shared_checks_import_nothing_of_posenc():
    assert _posenc_imports(ROOT / "_checks.py") == set()


def test_the_rotary_checks_import_only_the_shared_checks_and_the_core():
    assert _posenc_imports(ROOT / "rope" / "_checks.py") == {".._checks", ".core"}


# ------------------------------------------------------------------ cheap decoding


class _CountOps(TorchDispatchMode):
    """The non-view aten operations a call issues (each one a kernel launch on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _count(fn) -> list[str]:
    fn()  # warm caches
    with _CountOps() as counter:
        fn()
    return counter.ops


def decode_op_counts() -> dict[str, int]:
    """Non-view aten ops per layer for one decoding step of a Llama-7B-shaped layer
    (q ``(4, 32, 1, 128)``, k ``(4, 8, 1, 128)``, position ids ``(4, 1)``)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    torch.manual_seed(0)
    q, k, p = torch.randn(4, 32, 1, 128), torch.randn(4, 8, 1, 128), torch.full((4, 1), 100)
    rope = posenc.RotaryEmbedding(128)
    hf = LlamaRotaryEmbedding(LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128))
    return {
        "posenc module": len(_count(lambda: (rope(q, positions=p), rope(k, positions=p)))),
        "posenc tables": len(_count(lambda: posenc.apply_rotary_tables(q, k, rope.tables(p)))),
        "transformers": len(_count(lambda: apply_rotary_pos_emb(q, k, *hf(q, p)))),
    }


def test_decoding_issues_about_as_many_ops_as_transformers():
    pytest.importorskip("transformers")
    counts = decode_op_counts()
    assert counts["posenc module"] <= 1.5 * counts["transformers"], counts
    assert counts["posenc tables"] <= 1.5 * counts["transformers"], counts


@pytest.mark.parametrize(
    "scaling", [None, {"rope_type": "dynamic", "factor": 2.0}, {"rope_type": "yarn", "factor": 4.0}]
)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gathered_rows_equal_the_computed_angles(scaling, layout):
    kw = dict(layout=layout, scaling=scaling, max_position_embeddings=32, max_len=64)
    gather, compute = posenc.RotaryEmbedding(16, **kw), posenc.RotaryEmbedding(16, check_values=False, **kw)
    x = torch.randn(2, 3, 5, 16)
    for pos in (torch.tensor([[0, 1, 2, 3, 4], [27, 28, 29, 30, 31]]), torch.tensor([3, 40, 63, 64, 10**6])):
        torch.testing.assert_close(gather(x, positions=pos), compute(x, positions=pos), rtol=0, atol=0)
        torch.testing.assert_close(gather.tables(pos)[:2], compute.tables(pos)[:2], rtol=0, atol=0)


def test_apply_rotary_makes_no_tensor_from_python_numbers_per_call(monkeypatch):
    x, pos = torch.randn(1, 2, 6, 16), torch.arange(6) * 1000
    scaling = {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 8,
               "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}
    expected = [posenc.apply_rotary(x, pos), posenc.apply_rotary(x, pos, scaling=scaling, max_position_embeddings=32)]

    def forbidden(*args, **kwargs):
        raise AssertionError("torch.tensor called per call (a blocking host-to-device copy on a GPU)")

    monkeypatch.setattr(torch, "tensor", forbidden)
    again = [posenc.apply_rotary(x, pos), posenc.apply_rotary(x, pos, scaling=scaling, max_position_embeddings=32)]
    for a, b in zip(again, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


# ------------------------------------------------------------------ FlexAttention

flex_attention_module = pytest.importorskip("torch.nn.attention.flex_attention")


def _flex(q, k, v, **kw):
    """Eager FlexAttention (on the CPU the compiled kernel takes minutes to build; eager is the reference)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        return flex_attention_module.flex_attention(q, k, v, **kw)


def _sdpa(q, k, v, bias, causal):
    q_len, k_len = q.shape[-2], k.shape[-2]
    if causal:
        keep = torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)
        bias = bias.masked_fill(~keep, float("-inf"))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("q_len, k_len", [(40, 40), (3, 40)])
def test_alibi_score_mod_equals_sdpa_with_the_bias_tensor(bidirectional, q_len, k_len):
    from posenc.flex import alibi_score_mod, causal_block_mask

    torch.manual_seed(0)
    H = 6  # not a power of two: the interleaved slopes
    q, k, v = torch.randn(2, H, q_len, 16), torch.randn(2, H, k_len, 16), torch.randn(2, H, k_len, 16)
    bias = posenc.alibi_bias(H, q_len, k_len, bidirectional=bidirectional)
    score_mod = alibi_score_mod(H, bidirectional=bidirectional, query_offset=k_len - q_len)
    causal = not bidirectional
    mask = causal_block_mask(q_len, k_len) if causal else None
    out = _flex(q, k, v, score_mod=score_mod, block_mask=mask)
    torch.testing.assert_close(out, _sdpa(q, k, v, bias, causal), rtol=0, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_t5_score_mod_equals_sdpa_with_the_bias_tensor_and_trains_the_weight(bidirectional):
    torch.manual_seed(0)
    t5 = posenc.T5RelativeBias(4, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    q, k, v = (torch.randn(1, 4, 50, 8) for _ in range(3))
    out = _flex(q, k, v, score_mod=t5.score_mod())
    torch.testing.assert_close(out, _sdpa(q, k, v, t5(50), False), rtol=0, atol=1e-6)
    out.sum().backward()
    assert t5.weight.grad is not None and t5.weight.grad.abs().sum() > 0
    step = _flex(q[:, :, -2:], k, v, score_mod=t5.score_mod(query_offset=48))
    torch.testing.assert_close(step, _sdpa(q[:, :, -2:], k, v, t5(2, 50), False), rtol=0, atol=1e-6)


def test_document_block_mask_keeps_each_query_in_its_document():
    from posenc.flex import document_block_mask

    torch.manual_seed(0)
    docs = torch.tensor([0] * 20 + [1] * 7 + [2] * 37)
    q, k, v = (torch.randn(2, 2, 64, 8) for _ in range(3))
    keep = (docs[:, None] == docs[None, :]) & torch.ones(64, 64, dtype=torch.bool).tril()
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(_flex(q, k, v, block_mask=document_block_mask(docs)), expected, rtol=0, atol=1e-6)
    batched = document_block_mask(torch.stack([docs, torch.zeros(64, dtype=torch.long)]), causal=False)
    out = _flex(q, k, v, block_mask=batched)
    torch.testing.assert_close(out[0], torch.nn.functional.scaled_dot_product_attention(
        q[0], k[0], v[0], attn_mask=docs[:, None] == docs[None, :]), rtol=0, atol=1e-6)
    torch.testing.assert_close(out[1], torch.nn.functional.scaled_dot_product_attention(q[1], k[1], v[1]), rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="document_ids"):
        document_block_mask(docs.float())


def test_flash_attn_alibi_slopes_follow_posenc_convention():
    flash_attn = pytest.importorskip("flash_attn", reason="flash-attn needs a CUDA build (not installable on a CPU machine)")
    if not torch.cuda.is_available():
        pytest.skip("flash-attn runs on CUDA only")
    torch.manual_seed(0)
    H, q_len, k_len = 8, 5, 64
    q = torch.randn(1, q_len, H, 64, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(1, k_len, H, 64, device="cuda", dtype=torch.float16) for _ in range(2))
    out = flash_attn.flash_attn_func(q, k, v, causal=True, alibi_slopes=posenc.alibi_slopes(H).cuda())
    bias = posenc.alibi_bias(H, q_len, k_len, device="cuda")
    ref = _sdpa(*(t.transpose(1, 2).float() for t in (q, k, v)), bias, True).transpose(1, 2)
    torch.testing.assert_close(out.float(), ref, rtol=0, atol=2e-3)


# ------------------------------------------------------------------ biases at real lengths


def test_bias_tensors_refuse_only_what_cannot_be_built(monkeypatch):
    # 32 heads at 8K tokens: 2**31 elements (8 GiB in float32), refused before; built on the
    # meta device here to keep the test light (benchmarks measure the real one)
    assert posenc.alibi_bias(32, 8192, device="meta").shape == (32, 8192, 8192)
    assert posenc.ALiBiBias(32).to("meta")(8192).shape == (32, 8192, 8192)
    assert posenc.T5RelativeBias(32).to("meta")(8192).shape == (32, 8192, 8192)
    for call in (lambda: posenc.alibi_bias(2**20, 2**15), lambda: posenc.alibi_bias(2, 2**31 + 1, device="meta")):
        with pytest.raises(ValueError, match=r"limit of \d+ \(2\*\*\d+\)"):
            call()
    with pytest.raises(ValueError, match="GiB, more than the .* GiB of cpu; use FlexAttention"):
        posenc.alibi_bias(2**8, 2**16)  # 4 TiB


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_large_biases_built_head_by_head_are_the_same_numbers(monkeypatch, bidirectional, dtype):
    import posenc.bias

    expected = posenc.alibi_bias(5, 7, 30, bidirectional=bidirectional, dtype=dtype)
    monkeypatch.setattr(posenc.bias, "_ONE_PASS", 10)
    out = posenc.alibi_bias(5, 7, 30, bidirectional=bidirectional, dtype=dtype)
    assert out.dtype == expected.dtype and torch.equal(out, expected)


# ------------------------------------------------------------------ Hugging Face drop-in


@pytest.mark.parametrize("rope_parameters", [
    {"rope_type": "default", "rope_theta": 10000.0},
    {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32},
    {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 32},
])
def test_a_tiny_llama_with_posenc_as_its_rotary_emb_gives_its_logits(rope_parameters):
    transformers = pytest.importorskip("transformers")
    from posenc.rope import HuggingFaceRotary

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                   num_hidden_layers=2, intermediate_size=48, max_position_embeddings=128,
                                   initializer_range=0.3)
    cfg.rope_parameters = dict(rope_parameters)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (2, 100), generator=torch.Generator().manual_seed(1))
    pos = torch.arange(100).expand(2, 100) + torch.tensor([[0], [1000]])  # the second row far out
    with torch.no_grad():
        want = model(input_ids=ids, position_ids=pos).logits
        hf_cos, hf_sin = model.model.rotary_emb(torch.zeros(1, dtype=torch.float32), pos)
    rope = posenc.RotaryEmbedding(cfg.head_dim, scaling=cfg.rope_parameters, max_position_embeddings=cfg.max_position_embeddings)
    model.model.rotary_emb = HuggingFaceRotary(rope)
    cos, sin = model.model.rotary_emb(torch.zeros(1), pos)
    assert cos.shape == hf_cos.shape and (cos - hf_cos).abs().max() < 1e-3  # HF's float32 angles are off at 1000+
    with torch.no_grad():
        got = model(input_ids=ids, position_ids=pos).logits
    assert (got - want).abs().max() < 1e-3
    with torch.no_grad():  # the control (RoPE sees offsets only, so a shift would not do): doubled positions
        assert (model(input_ids=ids, position_ids=2 * pos).logits - want).abs().max() > 1e-2
    bf16 = model.model.rotary_emb(torch.zeros(1, dtype=torch.bfloat16), pos)
    assert bf16[0].dtype == torch.bfloat16
    # against float64 angles in a float64 copy of the model, posenc's float32 logits are
    # closer than transformers' own (whose angles p * omega are formed in float32)
    exact = transformers.LlamaForCausalLM(cfg).eval()
    exact.load_state_dict(model.state_dict(), strict=False)
    exact.double()

    class Float64Angles(torch.nn.Module):
        def forward(self, x, position_ids=None, **kwargs):
            c, s, _, _ = rope.tables(position_ids, dtype=torch.float64)
            return torch.cat([c, c], -1), torch.cat([s, s], -1)

    exact.model.rotary_emb = Float64Angles()
    with torch.no_grad():
        truth = exact(input_ids=ids, position_ids=pos).logits
    assert (got - truth).abs().max() < (want - truth).abs().max()  # 20x for default and YaRN, 2x for Llama 3


def test_hf_tables_of_the_interleaved_layout_repeat_each_pair():
    rope = posenc.RotaryEmbedding(8, layout="interleaved")
    t = rope.tables(torch.arange(5))
    cos, sin = rope.hf_tables(torch.arange(5))
    assert torch.equal(cos[..., 0::2], t.cos) and torch.equal(cos[..., 1::2], t.cos) and torch.equal(sin[..., 1::2], t.sin)
    with pytest.raises(TypeError, match="rope"):
        posenc.rope.HuggingFaceRotary(torch.nn.Identity())


# ------------------------------------------------------------------ the small refusals


def test_tables_cast_behind_module_apply_are_refused_until_reset():
    kw = dict(scaling={"rope_type": "yarn", "factor": 4.0}, max_position_embeddings=32)
    rope, fresh = posenc.RotaryEmbedding(16, **kw), posenc.RotaryEmbedding(16, **kw)
    for b in (rope.cos, rope.sin, rope.rot, rope.inv_freq):  # what FSDP1's MixedPrecision(buffer_dtype=bf16) does
        b.data = b.data.to(torch.bfloat16)
    x = torch.randn(1, 2, 5, 16)
    with pytest.raises(ValueError, match="buffer_dtype"):
        rope(x)
    with pytest.raises(ValueError, match="buffer_dtype"):
        rope.tables(torch.arange(5))
    rope.reset_parameters()
    assert torch.equal(rope(x), fresh(x)) and rope.cos.dtype == torch.float32


@pytest.mark.parametrize("kw", [
    {}, {"layout": "interleaved"}, {"scaling": {"rope_type": "yarn", "factor": 4.0}, "max_position_embeddings": 32},
    {"scaling": {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 8,
                 "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}, "max_position_embeddings": 32},
])
def test_to_empty_after_meta_init_recomputes_the_tables(kw):
    with torch.device("meta"):
        rope = posenc.RotaryEmbedding(16, **kw)
    x = torch.randn(1, 2, 40, 16)
    with pytest.raises(ValueError, match="meta device"):  # a meta module and a real input
        rope(x)
    rope.to_empty(device="cpu")  # no reset_parameters() call
    fresh = posenc.RotaryEmbedding(16, **kw)
    assert all(torch.equal(a, b) for a, b in zip(rope.buffers(), fresh.buffers()))
    assert torch.equal(rope(x, positions=torch.arange(40) * 7), fresh(x, positions=torch.arange(40) * 7))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (a second device)")
def test_a_module_on_another_device_than_x_is_refused():
    with pytest.raises(ValueError, match="module's device"):
        posenc.RotaryEmbedding(8)(torch.randn(1, 3, 8, device="cuda"))


def test_position_ids_given_positionally_are_refused_with_the_keyword():
    rope = posenc.RotaryEmbedding(8)
    with pytest.raises(TypeError, match=r"positions=position_ids"):
        rope(torch.randn(1, 3, 8), torch.arange(3))


def test_positions_beyond_the_exact_range_are_refused_before_any_allocation():
    rope, x = posenc.RotaryEmbedding(8), torch.randn(1, 3, 8)
    for call in (
        lambda: rope(x, offset=2**50),
        lambda: rope(x, positions=torch.tensor([0, 1, 2**50])),
        lambda: rope(x, offset=torch.tensor(2**43)),
        lambda: rope.tables(torch.tensor([-(2**45)])),
        lambda: rope.tables(seq_len=2**50),
        lambda: rope.tables(seq_len=2**40),
    ):
        with pytest.raises(ValueError, match=r"2\*\*43|2\*\*40|GiB, more than"):
            call()
    assert rope(x, offset=2**43 - 3).shape == x.shape


def test_the_documented_precision_holds_below_2_to_the_33():
    mpmath = pytest.importorskip("mpmath")
    from posenc.rope import core

    mpmath.mp.dps = 50
    inv = core.inv_frequencies(64, 10000.0)
    pos = [2**33 - 1, 2**32 + 12345, 10**9 + 7, 123_456_789]
    cos, sin = core.cos_sin(torch.tensor(pos), core.fixed_point_turns(inv), torch.tensor(inv, dtype=torch.float32))
    err = max(
        max(abs(float(cos[i, j]) - float(mpmath.cos(mpmath.mpf(w) * p))), abs(float(sin[i, j]) - float(mpmath.sin(mpmath.mpf(w) * p))))
        for i, p in enumerate(pos)
        for j, w in enumerate(inv)
    )
    assert err < 5e-7, err


def test_rotary_attention_factor_refuses_a_string():
    with pytest.raises(TypeError, match="scaling"):
        posenc.rotary_attention_factor("yarn")


def test_custom_attention_bias_subclasses_are_checked():
    attn = posenc.SelfAttention(8, 2)
    x = torch.randn(1, 4, 8)

    class Missing(posenc.AttentionBias):
        pass

    class WrongShape(posenc.AttentionBias):
        def score_bias(self, q, k_len=None):
            return torch.zeros(3, 3)

    class NotATensor(posenc.AttentionBias):
        def score_bias(self, q, k_len=None):
            return 0.5

    class Fine(posenc.AttentionBias):
        def score_bias(self, q, k_len=None):
            return torch.zeros(q.shape[-2], q.shape[-2], dtype=torch.float64)

    with pytest.raises(TypeError, match="Missing must implement score_bias"):
        attn(x, bias=Missing())
    with pytest.raises(ValueError, match=r"WrongShape.score_bias\(q\) must have shape"):
        attn(x, bias=WrongShape())
    with pytest.raises(TypeError, match=r"NotATensor.score_bias\(q\) must be a tensor"):
        attn(x, bias=NotATensor())
    assert torch.equal(attn(x, bias=Fine()), attn(x))


def test_core_and_scaling_work_copied_outside_the_package(tmp_path):
    import shutil
    import subprocess
    import sys

    for name in ("rope/core.py", "rope/scaling.py", "_checks.py"):
        shutil.copy(ROOT / name, tmp_path / name.rsplit("/", 1)[-1])
    code = (
        "import core, scaling; "
        "yarn = scaling.YaRN(factor=4.0, original_max_position_embeddings=64); "
        "print(repr(yarn.frequencies(16, 10000.0)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={"PATH": "", "PYTHONPATH": ""})
    expected = posenc.rope.YaRN(factor=4.0, original_max_position_embeddings=64).frequencies(16, 10000.0)
    assert eval(out.stdout) == tuple(expected)
