"""ALiBi and T5's bias at query and key positions (packing, left padding, caches, irregular times).

Where the positions are those of the length form (queries ``k_len - q_len .. k_len - 1``,
keys ``0 .. k_len - 1``) the result must be the length form's, bit for bit; elsewhere the
bias must depend on the offsets of the positions only.
"""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import ALiBiBias, T5RelativeBias

LENGTHS = [(5, 5), (3, 7), (1, 4), (6, 40)]


def length_form_positions(q_len: int, k_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(k_len - q_len, k_len), torch.arange(k_len)


@pytest.mark.parametrize("q_len, k_len", LENGTHS)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.float64])
def test_alibi_positions_of_the_length_form_give_the_length_form(q_len, k_len, bidirectional, dtype):
    q_pos, k_pos = length_form_positions(q_len, k_len)
    want = posenc.alibi_bias(6, q_len, k_len, bidirectional=bidirectional, dtype=dtype)
    got = posenc.alibi_bias(6, bidirectional=bidirectional, dtype=dtype, q_positions=q_pos, k_positions=k_pos)
    assert got.dtype == want.dtype and torch.equal(got, want)
    # with the lengths given as well, int32 positions, or shifted positions (only offsets count)
    assert torch.equal(posenc.alibi_bias(6, q_len, k_len, bidirectional=bidirectional, dtype=dtype,
                                         q_positions=q_pos.int(), k_positions=k_pos.int()), want)
    assert torch.equal(posenc.alibi_bias(6, bidirectional=bidirectional, dtype=dtype,
                                         q_positions=q_pos + 1000, k_positions=k_pos + 1000), want)
    module = ALiBiBias(6, bidirectional=bidirectional)
    assert torch.equal(module(q_positions=q_pos, k_positions=k_pos, dtype=dtype), module(q_len, k_len, dtype=dtype))
    # a batch of positions: one bias per row
    batched = posenc.alibi_bias(6, bidirectional=bidirectional, dtype=dtype,
                                q_positions=torch.stack([q_pos, q_pos + 3]), k_positions=torch.stack([k_pos, k_pos + 3]))
    assert batched.shape == (2, *want.shape) and torch.equal(batched[0], want) and torch.equal(batched[1], want)


@pytest.mark.parametrize("q_len, k_len", LENGTHS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_t5_positions_of_the_length_form_give_the_length_form(q_len, k_len, bidirectional):
    torch.manual_seed(0)
    bias = T5RelativeBias(4, bidirectional=bidirectional, num_buckets=8, max_distance=16)
    q_pos, k_pos = length_form_positions(q_len, k_len)
    want = bias(q_len, k_len)
    assert torch.equal(bias(q_positions=q_pos, k_positions=k_pos), want)
    assert torch.equal(bias(q_len, k_len, q_positions=q_pos + 7, k_positions=k_pos + 7), want)
    batched = bias(q_positions=q_pos.expand(3, -1), k_positions=k_pos)  # a batch on one side only
    assert batched.shape == (3, *want.shape) and all(torch.equal(b, want) for b in batched)


def packed(lengths: list[int]) -> torch.Tensor:
    return torch.cat([torch.arange(n) for n in lengths])


@pytest.mark.parametrize("make", [
    lambda: (lambda n, **kw: posenc.alibi_bias(4, n, **kw)),
    lambda: (lambda n, **kw: posenc.alibi_bias(4, n, bidirectional=True, **kw)),
    lambda: T5RelativeBias(4, bidirectional=False),
    lambda: T5RelativeBias(4),
], ids=["alibi", "alibi-bidirectional", "t5-decoder", "t5-encoder"])
def test_packed_sequences_get_each_sequences_own_bias(make):
    torch.manual_seed(0)
    bias = make()
    lengths = [3, 5, 2]
    got = bias(sum(lengths), q_positions=packed(lengths))  # one tensor alone serves for queries and keys
    start = 0
    for n in lengths:
        assert torch.equal(got[:, start:start + n, start:start + n], bias(n))
        start += n


def test_left_padding_and_a_cache():
    # row 1 is left-padded by 2: its real tokens sit at indices 2..5 with positions 0..3
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
    alibi = ALiBiBias(4)
    got = alibi(q_positions=positions, k_positions=positions)
    assert torch.equal(got[0], alibi(6))
    assert torch.equal(got[1, :, 2:, 2:], alibi(4))
    t5 = T5RelativeBias(4, bidirectional=False)
    assert torch.equal(t5(q_positions=positions)[1, :, 2:, 2:], t5(4))
    # cached decoding of row 1: one new query at position 4, keys at the padded positions
    keys = torch.tensor([0, 0, 0, 1, 2, 3, 4])
    step = alibi(q_positions=torch.tensor([4]), k_positions=keys)
    assert torch.equal(step[:, :, 2:], alibi(1, 5))
    assert torch.equal(t5(q_positions=torch.tensor([4]), k_positions=keys)[:, :, 2:], t5(1, 5))


def test_alibi_at_irregular_times():
    times = torch.tensor([0.0, 0.5, 2.0, 2.25], dtype=torch.float64)
    slopes = posenc.alibi_slopes(2).double()
    got = posenc.alibi_bias(2, q_positions=times, dtype=torch.float64)
    diff = (times[None, :] - times[:, None]).clamp(max=0)  # t_j - t_i for keys in the past
    want = (slopes[:, None, None].float() * diff.float()[None]).double()
    assert torch.equal(got, want)
    sym = posenc.alibi_bias(2, q_positions=times, bidirectional=True)
    assert torch.allclose(sym, -slopes[:, None, None].float() * (times[None, :] - times[:, None]).abs().float())


def test_t5_gradient_flows_at_positions():
    bias = T5RelativeBias(2)
    bias(q_positions=torch.tensor([[0, 1, 2], [5, 9, 30]])).sum().backward()
    assert bias.weight.grad is not None and bias.weight.grad.abs().sum() > 0


CALLS = {
    "alibi_bias": lambda **kw: posenc.alibi_bias(2, **kw),
    "ALiBiBias": lambda **kw: ALiBiBias(2)(**kw),
    "T5RelativeBias": lambda **kw: T5RelativeBias(2)(**kw),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize("kwargs, error, name", [
    ({"q_positions": [0, 1, 2]}, TypeError, "q_positions"),
    ({"k_positions": "abc"}, TypeError, "k_positions"),
    ({"q_positions": torch.tensor([True, False])}, TypeError, "q_positions"),
    ({"q_positions": torch.zeros(2, 3, 4, dtype=torch.long)}, ValueError, "q_positions"),
    ({"q_positions": torch.zeros(0, dtype=torch.long)}, ValueError, "q_positions"),
    ({"k_positions": torch.zeros(2, 0, dtype=torch.long)}, ValueError, "k_positions"),
    ({"q_positions": torch.arange(3), "q_len": 4}, ValueError, "q_len"),
    ({"q_positions": torch.arange(3), "k_positions": torch.arange(5), "k_len": 4}, ValueError, "k_len"),
    ({"q_positions": torch.arange(3), "q_len": 2.5}, TypeError, "q_len"),
    ({"q_positions": torch.zeros(2, 3, dtype=torch.long), "k_positions": torch.zeros(3, 3, dtype=torch.long)},
     ValueError, "k_positions"),
], ids=["list", "str", "bool", "3-d", "empty", "empty-batch", "q_len", "k_len", "float-q_len", "batches"])
def test_bad_positions_are_refused_naming_the_argument(call, kwargs, error, name):
    with pytest.raises(error, match=name):
        call(**kwargs)


def test_float_positions_refused_where_buckets_need_integers_and_nan_refused():
    with pytest.raises(TypeError, match="q_positions"):
        T5RelativeBias(2)(q_positions=torch.tensor([0.0, 1.5]))
    with pytest.raises(ValueError, match="k_positions"):
        posenc.alibi_bias(2, q_positions=torch.tensor([0.0, 1.0]), k_positions=torch.tensor([0.0, float("nan")]))
    with pytest.raises(TypeError, match="q_len"):  # neither a length nor positions
        posenc.alibi_bias(2)
    with pytest.raises(TypeError, match="q_positions"):
        posenc.alibi_bias(2, q_positions=torch.tensor([1 + 2j]))
