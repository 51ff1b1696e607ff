"""analysis.round_significant and analysis.decade_above: the helpers chapters 2 and 3 use to
glue measured numbers into their prose.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.book import analysis

finite = st.floats(allow_nan=False, allow_infinity=False)


@given(x=finite, digits=st.integers(1, 17))
def test_round_significant_is_the_g_format(x, digits):
    assert analysis.round_significant(x, digits) == float(f"{x:.{digits}g}")


@given(x=st.floats(min_value=1e-300, max_value=1e300))
def test_decade_above_is_the_smallest_power_of_ten_not_below_x(x):
    b = analysis.decade_above(x)
    assert b == 10.0 ** math.ceil(math.log10(x))
    assert b >= x * (1 - 1e-15) and b / 10 < x * (1 + 1e-15)


def test_scalars_of_every_kind_are_accepted():
    assert analysis.round_significant(np.float32(0.1)) == float(f"{np.float32(0.1):.10g}")
    assert analysis.round_significant(torch.tensor(2.0) ** 0.5, 3) == 1.41
    assert analysis.round_significant(np.float64(-1234.5), 2) == -1200.0
    assert analysis.decade_above(np.array(0.02)) == 0.1


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: analysis.round_significant("1.0"), TypeError, "x must be a real number"),
        (lambda: analysis.round_significant(True), TypeError, "x must be a real number"),
        (lambda: analysis.round_significant(float("nan")), ValueError, "x must be finite"),
        (lambda: analysis.round_significant(1.0, 0), ValueError, "digits"),
        (lambda: analysis.round_significant(1.0, 2.5), TypeError, "digits"),
        (lambda: analysis.decade_above(0.0), ValueError, "x must be a finite number > 0"),
        (lambda: analysis.decade_above(-1.0), ValueError, "x must be a finite number > 0"),
        (lambda: analysis.decade_above(float("inf")), ValueError, "x must be finite"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
