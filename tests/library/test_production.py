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
