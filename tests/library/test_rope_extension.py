"""posenc.rope.scaling.extension: the one map from a context-extension method to a RoPE scaling."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import RotaryEmbedding
from posenc.rope.scaling import EXTENSIONS, NTK, YaRN, Dynamic, Linear, extension


def test_each_method_gives_its_scaling():
    assert extension("none", 4, 16) is None
    assert extension("pi", 4, 16) == extension("position_interpolation", 4, 16) == {"type": "linear", "factor": 4.0}
    expected = {"pi": Linear(4.0), "ntk": NTK(4.0), "dynamic_ntk": Dynamic(1.0, 16), "yarn": YaRN(4.0, 16)}
    for method, scaling in expected.items():
        assert RotaryEmbedding(8, scaling=extension(method, 4, 16)).scaling == scaling


@pytest.mark.parametrize("method", EXTENSIONS)
def test_the_base_travels_with_the_scaling(method):
    swapped = RotaryEmbedding(8, layout="interleaved", scaling=extension(method, 2, 16, base=100.0))
    plain = extension(method, 2, 16)
    direct = RotaryEmbedding(8, layout="interleaved", base=100.0, scaling=plain)
    assert swapped.base == 100.0 and swapped.scaling == direct.scaling
    x = torch.randn(1, 2, 40, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(swapped(x), direct(x))


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        (("rerope", 2, 16), {}, "method"),
        ((None, 2, 16), {}, "method"),
        (("pi", 0.5, 16), {}, "factor"),
        (("pi", math.nan, 16), {}, "factor"),
        (("pi", True, 16), {}, "factor"),
        (("yarn", 2, 0), {}, "original"),
        (("ntk", 2, 16), {"base": -1.0}, "base"),
    ],
)
def test_bad_input_names_the_argument(args, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        extension(*args, **kwargs)


def test_the_chapters_use_it():
    from posenc.book import realtext

    for method in realtext.EXTENSIONS:
        assert realtext.extension_scaling(method, 4, 64) == extension(method, 4, 64)
