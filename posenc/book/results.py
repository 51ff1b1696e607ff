"""Results of the book's runs: their keys, their summary, and the JSON files that hold them.

Every number a chapter reports over several runs goes through :func:`summarize` (mean,
sample standard deviation, count), and every saved experiment is read and written by
:func:`read_results` / :func:`write_results`, so that the format of
``experiments/results/*.json`` is defined in one place: a dict with ``"rows"`` (a list of
flat dicts, one per trial and checkpoint) and any further metadata (``"config"``,
``"command"``, ...).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from .._checks import check_int

__all__ = [
    "acc_key",
    "pos_key",
    "read_results",
    "summarize",
    "summarize_trials",
    "to_numpy",
    "write_results",
]


def acc_key(factor: int) -> str:
    """The result key of the accuracy at ``factor`` times the training length: ``"acc_2x"``.

    Example:
        >>> acc_key(4)
        'acc_4x'
    """
    return f"acc_{check_int('factor', factor)}x"


def pos_key(factor: int) -> str:
    """The result key of the per-position accuracies at ``factor`` times the training length.

    Example:
        >>> pos_key(2)
        'pos_2x'
    """
    return f"pos_{check_int('factor', factor)}x"


def to_numpy(x: object) -> np.ndarray:
    """A float64 numpy array from a tensor (any device, with or without grad), array or list.

    Example:
        >>> import torch
        >>> to_numpy(torch.ones(2, requires_grad=True))
        array([1., 1.])
    """
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"x must be a tensor, array or sequence of numbers, got {type(x).__name__}") from err


def _values(values: object) -> list[float]:
    arr = to_numpy([math.nan if v is None else v for v in values] if isinstance(values, (list, tuple)) else values)
    return [float(v) for v in arr.ravel() if not math.isnan(float(v))]


def summarize(values: Iterable[float] | Mapping[str, Iterable[float]]):
    """Mean, sample standard deviation (``ddof=1``) and count of a set of runs.

    ``None`` and ``nan`` entries (a run that could not produce the value) are left out
    and not counted. With fewer than two values the standard deviation is ``nan``: one
    run says nothing about the spread. A mapping ``{name: values}`` gives
    ``{name: (mean, std, n)}``.

    Returns:
        ``(mean, std, n)`` as Python floats and an int; ``(nan, nan, 0)`` for no value.

    Example:
        >>> summarize([0.5, 0.7, None])
        (0.6, 0.14142135623730948, 2)
        >>> summarize({"a": [1.0]})
        {'a': (1.0, nan, 1)}
    """
    if isinstance(values, Mapping):
        return {name: summarize(v) for name, v in values.items()}
    vals = _values(values)
    n = len(vals)
    mean = sum(vals) / n if n else math.nan
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else math.nan
    return mean, std, n


def summarize_trials(
    rows: list[dict],
    *,
    steps: int | None = None,
    keys: tuple[str, ...] = ("acc_1x", "acc_2x", "acc_4x"),
    by: tuple[str, ...] = ("task", "scheme"),
) -> dict[tuple, dict[str, tuple[float, float, int]]]:
    """:func:`summarize` of every metric over the seeds of each group of result rows.

    Args:
        rows: result rows, each a dict with the ``by`` fields, optionally ``steps``, and
            the ``keys`` (``None`` or ``nan`` where the model could not run).
        steps: keep only rows with this ``steps`` value (``None``: keep all).
        keys: the metrics to summarise.
        by: the fields that name a group.

    Returns:
        ``{(task, scheme): {key: (mean, std, n)}}`` (tuples of the ``by`` fields), in the
        order the rows first name them.

    Example:
        >>> rows = [{"task": "t", "scheme": "s", "acc_1x": a} for a in (0.5, 0.7)]
        >>> summarize_trials(rows, keys=("acc_1x",))[("t", "s")]["acc_1x"]
        (0.6, 0.14142135623730948, 2)
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if steps is not None and row.get("steps") != steps:
            continue
        groups.setdefault(tuple(row[f] for f in by), []).append(row)
    return {
        group: {key: summarize([r.get(key) for r in members]) for key in keys} for group, members in groups.items()
    }


def read_results(path: str | Path) -> dict:
    """Read a results file of ``experiments/results/`` (a dict with a list ``"rows"``).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
        >>> write_results(p, [{"seed": 0, "acc_1x": 1.0}], config={"steps": 3})
        >>> read_results(p)["rows"]
        [{'seed': 0, 'acc_1x': 1.0}]
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a results file: expected a JSON object with a list 'rows'")
    return data


def write_results(path: str | Path, rows: list[dict], **metadata: object) -> None:
    """Write ``rows`` (and metadata such as ``config``) atomically as indented JSON.

    The file is written to a temporary name first and then renamed, so an interrupted
    run never leaves a truncated file: a resumable experiment loses at most the trial in
    progress.
    """
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError("rows must be a list of dicts")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({**metadata, "rows": rows}, indent=1) + "\n")
    os.replace(tmp, path)
