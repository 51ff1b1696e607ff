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
from .resources import DATA_DIR, resource_path

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
    if x is None or isinstance(x, (str, bytes, Mapping)):
        raise TypeError(f"x must be a tensor, array or sequence of numbers, got {type(x).__name__}")
    if hasattr(x, "detach"):
        if x.is_complex():
            raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
        x = x.detach().cpu()
        x = (x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy()  # numpy has no bfloat16
    try:
        arr = np.asarray(x)
        if arr.dtype == object or np.iscomplexobj(arr) or arr.dtype.kind in "USV":
            raise TypeError(f"got dtype {arr.dtype}")
        return arr.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"x must be a tensor, array or sequence of real numbers, got {type(x).__name__}: {err}") from err


def _values(values: object) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(
            f"values must be an iterable of numbers (None or nan for a missing run) or a mapping of such, "
            f"got {type(values).__name__}"
        )
    if not hasattr(values, "detach") and not isinstance(values, np.ndarray):
        values = [math.nan if v is None else v for v in values]
    arr = to_numpy(values)
    if np.isinf(arr).any():
        raise ValueError("values must be finite numbers (None or nan for a missing run), got an infinite value")
    return [float(v) for v in arr.ravel() if not math.isnan(float(v))]


def summarize(values: Iterable[float] | Mapping[str, Iterable[float]]):
    """Mean, sample standard deviation (``ddof=1``) and count of a set of runs.

    ``None`` and ``nan`` entries (a run that could not produce the value) are left out
    and not counted. With fewer than two values the standard deviation is ``nan``: one
    run says nothing about the spread. A mapping ``{name: values}`` gives
    ``{name: (mean, std, n)}``.

    Returns:
        ``(mean, std, n)`` as Python floats and an int; ``(nan, nan, 0)`` for no value.

    Raises:
        TypeError: ``values`` is not an iterable of numbers (a string, a scalar, ``None``).
        ValueError: a value is infinite.

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
    _check_rows(rows)
    if steps is not None:
        steps = check_int("steps", steps, minimum=0)
    for name, fields in (("keys", keys), ("by", by)):
        if isinstance(fields, str) or not isinstance(fields, (tuple, list)) or not all(
            isinstance(f, str) for f in fields
        ):
            raise TypeError(f"{name} must be a tuple of field names (strings), got {fields!r}")
    groups: dict[tuple, list[dict]] = {}
    for i, row in enumerate(rows):
        if steps is not None and row.get("steps") != steps:
            continue
        missing = [f for f in by if f not in row]
        if missing:
            raise ValueError(f"rows[{i}] has no field {missing[0]!r}, which by={tuple(by)!r} groups on")
        groups.setdefault(tuple(row[f] for f in by), []).append(row)
    return {
        group: {key: summarize([r.get(key) for r in members]) for key in keys} for group, members in groups.items()
    }


def read_results(path: str | Path) -> dict:
    """Read a results file (a dict with a list ``"rows"``).

    A bare file name that names one of the saved results shipped with the package
    (``read_results("alternatives.json")``) reads that file, through
    :func:`~posenc.book.resources.resource_path`; any other path (``"./alternatives.json"``
    included) is read as given.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
        >>> write_results(p, [{"seed": 0, "acc_1x": 1.0}], config={"steps": 3})
        >>> read_results(p)["rows"]
        [{'seed': 0, 'acc_1x': 1.0}]
    """
    bare = isinstance(path, (str, os.PathLike)) and not os.path.dirname(os.fspath(path))
    path = _check_path(path)
    if bare and (DATA_DIR / path.name).is_file():
        path = resource_path(path.name)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a results file: it is not valid JSON ({err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a results file: expected a JSON object with a list 'rows'")
    if not all(isinstance(r, dict) for r in data["rows"]):
        raise ValueError(f"{path} is not a results file: every entry of 'rows' must be a JSON object")
    return data


def _check_path(path: object) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    path = Path(path)
    if str(path) in ("", "."):
        raise ValueError(f"path must name a file, got {str(path)!r}")
    return path


def _check_rows(rows: object) -> list[dict]:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        got = type(rows).__name__ if not isinstance(rows, list) else "a list with an entry that is not a dict"
        raise TypeError(f"rows must be a list of dicts (one per trial), got {got}")
    return rows


def write_results(path: str | Path, rows: list[dict], **metadata: object) -> None:
    """Write ``rows`` (and metadata such as ``config``) atomically as indented JSON.

    The file is written to a temporary name first and then renamed, so an interrupted
    run never leaves a truncated file: a resumable experiment loses at most the trial in
    progress.
    """
    _check_rows(rows)
    path = _check_path(path)
    try:
        text = json.dumps({**metadata, "rows": rows}, indent=1, allow_nan=True) + "\n"
    except (TypeError, ValueError) as err:
        raise TypeError(
            "rows and metadata must hold only JSON values (str, int, float, bool, None, lists and dicts of "
            f"them; convert tensors with to_numpy(...).tolist()): {err}"
        ) from err
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
