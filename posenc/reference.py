"""Reproductions of other code bases and the chapters' mathematics: not what a model needs.

* the sinusoidal tables of tensor2tensor and fairseq (and the layouts of XLM and Marian,
  which are the concatenated layout): :func:`tensor2tensor_frequencies`,
  :func:`tensor2tensor_timing_signal`, :func:`timing_signal`, :func:`fairseq_positions`,
  :func:`fairseq_sinusoidal_table`, :func:`layout_permutation`;
* the mathematics of chapters 2 to 4: :func:`sinusoidal_frequencies`,
  :func:`relative_rotation`, :func:`rotary_frequencies`, :func:`rotary_attention_factor`,
  :func:`normalize_scaling`, :func:`relative_positions`.

Every name here is also importable from ``posenc`` (the chapters use them so).

Example:
    >>> from posenc import reference
    >>> reference.rotary_frequencies(4)
    array([1.  , 0.01])
"""

from .bias import relative_positions
from .rotary import normalize_scaling, rotary_attention_factor, rotary_frequencies
from .sinusoidal import layout_permutation, relative_rotation, sinusoidal_frequencies
from .variants import (
    fairseq_positions,
    fairseq_sinusoidal_table,
    tensor2tensor_frequencies,
    tensor2tensor_timing_signal,
    timing_signal,
)

__all__ = [
    "fairseq_positions",
    "fairseq_sinusoidal_table",
    "layout_permutation",
    "normalize_scaling",
    "relative_positions",
    "relative_rotation",
    "rotary_attention_factor",
    "rotary_frequencies",
    "sinusoidal_frequencies",
    "tensor2tensor_frequencies",
    "tensor2tensor_timing_signal",
    "timing_signal",
]
