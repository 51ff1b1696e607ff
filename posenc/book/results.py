"""Results of the book's runs: their keys, their summary, their provenance, the JSON files
that hold them and the harness that runs the scripts of ``experiments/``.

- :func:`summarize` (mean, sample standard deviation, count and an interval: one sd, a 95 %
  t-interval or a bootstrap interval) and :func:`paired_difference` (two methods on the same
  seeds or splits) are the laboratory's aggregation over runs.
- :func:`read_results` / :func:`write_results` define the format of
  ``experiments/results/*.json`` in one place: a dict with ``"rows"`` (a list of flat dicts,
  one per trial and checkpoint) and further metadata (``"protocol"``, ``"provenance"``,
  ``"fingerprint"``, ...), written atomically.
- :func:`provenance` says where a result was computed (git commit, versions, machine,
  threads, core-hours).
- :class:`Experiment` runs a plan of units in packs, skips the units already saved,
  saves (and optionally commits) after every pack, stops before a time budget, and prints a
  progress line per pack.

This module imports no chapter module: the chapters and the scripts import it.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from .._checks import check_int
from .resources import DATA_DIR, resource_path

__all__ = [
    "Context",
    "Experiment",
    "Summary",
    "acc_key",
    "chosen_lr",
    "loss_fingerprint",
    "one_thread",
    "paired_difference",
    "pos_key",
    "provenance",
    "read_results",
    "summarize",
    "timed_unit",
    "to_numpy",
    "tuning_plan",
    "write_results",
]

INTERVALS = ("sd", "t95", "bootstrap")
BOOTSTRAP_RESAMPLES = 10_000


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


class Summary(tuple):
    """``(mean, sd, n)`` of a set of runs, with the ``interval`` that :func:`summarize` was asked for.

    A tuple of three, so ``mean, sd, n = summarize(values)`` unpacks it; the fields are also
    attributes, and ``interval`` is ``(low, high)`` of the kind named by ``kind``.

    Example:
        >>> s = Summary(0.6, 0.1, 2, (0.5, 0.7), "sd")
        >>> s.mean, s.n, s.interval
        (0.6, 2, (0.5, 0.7))
    """

    def __new__(cls, mean: float, sd: float, n: int, interval: tuple[float, float], kind: str):
        self = super().__new__(cls, (mean, sd, n))
        self.interval = interval
        self.kind = kind
        return self

    def __getnewargs__(self):  # copy and pickle
        return (*self, self.interval, self.kind)

    @property
    def mean(self) -> float:
        return self[0]

    @property
    def sd(self) -> float:
        return self[1]

    @property
    def n(self) -> int:
        return self[2]

    def __repr__(self) -> str:
        return f"Summary(mean={self[0]!r}, sd={self[1]!r}, n={self[2]!r}, interval={self.interval!r}, kind={self.kind!r})"


def _t_quantile(df: int, q: float = 0.975) -> float:
    from scipy import stats

    return float(stats.t.ppf(q, df))


def _bootstrap_mean(vals: np.ndarray, *, resamples: int, seed: int) -> tuple[float, float]:
    """Percentile 95 % interval of the mean of ``vals`` over ``resamples`` resamples (fixed seed)."""
    rng = np.random.default_rng(seed)
    means = vals[rng.integers(0, vals.size, size=(resamples, vals.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _interval(vals: list[float], mean: float, sd: float, kind: str, seed: int) -> tuple[float, float]:
    n = len(vals)
    if kind == "sd":
        return (mean - sd, mean + sd) if n > 1 else (math.nan, math.nan)
    if n < 2:
        return (math.nan, math.nan)
    if kind == "t95":
        half = _t_quantile(n - 1) * sd / math.sqrt(n)
        return mean - half, mean + half
    return _bootstrap_mean(np.asarray(vals), resamples=BOOTSTRAP_RESAMPLES, seed=seed)


def _check_interval(interval: object) -> str:
    if not isinstance(interval, str) or interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}, got {interval!r}")
    return interval


def summarize(values: Iterable[float] | Mapping[str, Iterable[float]], *, interval: str = "sd", seed: int = 0):
    """Mean, sample standard deviation (``ddof=1``), count and an interval of a set of runs.

    The laboratory's one aggregation over seeds, splits or draws. ``None`` and ``nan``
    entries (a run that could not produce the value) are left out and not counted. With
    fewer than two values the standard deviation and the interval are ``nan``: one run says
    nothing about the spread. A mapping ``{name: values}`` gives ``{name: Summary}``.

    Args:
        values: numbers (a list, array or tensor; ``None``/``nan`` for a missing run).
        interval: ``"sd"`` (mean +- one sd), ``"t95"`` (the 95 % t-interval of the mean,
            ``n - 1`` degrees of freedom) or ``"bootstrap"`` (the 95 % percentile interval of
            the mean over 10,000 resamples of the values, drawn with ``seed``).
        seed: the bootstrap's seed (the interval is a fixed function of the values).

    Returns:
        a :class:`Summary`: ``(mean, sd, n)`` as Python floats and an int, with
        ``.interval = (low, high)``; ``(nan, nan, 0)`` for no value.

    Raises:
        TypeError: ``values`` is not an iterable of numbers (a string, a scalar, ``None``).
        ValueError: a value is infinite, or ``interval`` is not one of the three.

    Example:
        >>> mean, sd, n = summarize([0.5, 0.7, None])
        >>> mean, sd, n
        (0.6, 0.14142135623730948, 2)
        >>> round(summarize([1.0, 2.0, 3.0], interval="t95").interval[1], 3)
        4.484
        >>> summarize({"a": [1.0]})["a"].n
        1
    """
    interval = _check_interval(interval)
    if isinstance(values, Mapping):
        return {name: summarize(v, interval=interval, seed=seed) for name, v in values.items()}
    vals = _values(values)
    n = len(vals)
    mean = sum(vals) / n if n else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else math.nan
    return Summary(mean, sd, n, _interval(vals, mean, sd, interval, seed), interval)


def paired_difference(a: object, b: object, *, seed: int = 0) -> dict[str, object]:
    """The mean of the paired differences ``a[i] - b[i]`` with its 95 % t and bootstrap intervals.

    ``a[i]`` and ``b[i]`` are two methods' scores on the same seed (or split, or draw):
    pairing removes what the seed does to both. Pairs with a missing value (``None`` or
    ``nan`` on either side) are left out. An interval that contains 0 means the data cannot
    tell the two apart.

    Returns:
        A dict with the keys ``mean``, ``sd``, ``n``, ``t95`` and ``bootstrap`` (each a
        ``(low, high)`` interval) and ``a_lower``, which counts the pairs with
        ``a[i] < b[i]`` (an ordering that holds seed by seed has ``a_lower == n`` or ``0``).

    Raises:
        TypeError: ``a`` or ``b`` is not a sequence of numbers.
        ValueError: different lengths, or an infinite value.

    Example:
        >>> d = paired_difference([2.0, 2.2, 2.4], [2.5, 2.6, 2.8])
        >>> round(d["mean"], 3), d["n"], d["a_lower"]
        (-0.433, 3, 3)
    """
    pairs = []
    for name, v in (("a", a), ("b", b)):
        if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, Iterable):
            raise TypeError(f"{name} must be a sequence of numbers (None or nan for a missing run), got {type(v).__name__}")
        arr = to_numpy([math.nan if x is None else x for x in v] if isinstance(v, (list, tuple)) else v).ravel()
        if np.isinf(arr).any():
            raise ValueError(f"{name} must hold finite numbers (None or nan for a missing run)")
        pairs.append(arr)
    x, y = pairs
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length (one value per seed), got {x.size} and {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    diff = (x - y)[keep]
    s = summarize(diff, interval="t95")
    boot = _interval(diff.tolist(), s.mean, s.sd, "bootstrap", seed) if s.n > 1 else (math.nan, math.nan)
    return {"mean": s.mean, "sd": s.sd, "n": s.n, "t95": s.interval, "bootstrap": boot,
            "a_lower": int((x[keep] < y[keep]).sum())}


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


# --------------------------------------------------------------------------- provenance

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    if not (REPO / ".git").exists():  # an installed copy, not a checkout
        return None
    try:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(*, core_hours: float | None = None) -> dict:
    """Where and with what a result is computed: the git commit, the versions, the machine.

    Args:
        core_hours: the CPU time the caller spent (summed over its processes), or ``None``.

    Returns:
        ``{"commit", "dirty", "date", "python", "torch", "numpy", "posenc", "machine",
        "threads", "core_hours"}``; ``commit`` is the full sha of ``HEAD`` of the checkout
        the package is imported from (``None`` when it is not imported from a git checkout),
        ``dirty`` whether tracked files differ from it; ``machine`` holds ``platform``,
        ``processor`` and ``cpus``; ``threads`` is torch's intra-op thread count.

    Example:
        >>> p = provenance(core_hours=0.5)
        >>> sorted(p["machine"]), p["core_hours"]
        (['cpus', 'platform', 'processor'], 0.5)
    """
    import torch

    from .. import __version__

    if core_hours is not None:
        if isinstance(core_hours, bool) or not isinstance(core_hours, (int, float)) or not core_hours >= 0:
            raise ValueError(f"core_hours must be a non-negative number or None, got {core_hours!r}")
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "posenc": __version__,
        "machine": {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count()},
        "threads": torch.get_num_threads(),
        "core_hours": None if core_hours is None else round(float(core_hours), 4),
    }


def loss_fingerprint(
    first_losses: Callable[..., list[float]],
    config: Mapping,
    trials: Sequence[tuple[int, Mapping]],
    *,
    n: int = 20,
    dtype: str | None = None,
) -> dict:
    """A results file's reproducibility fingerprint: the first ``n`` training losses of some trials.

    ``first_losses(config, seed, n, **unit)`` is the chapter's function that trains a
    trial exactly as its experiment did and returns its first ``n`` losses; ``trials`` are
    ``(seed, unit)`` pairs (one trial per group). ``tests/book/test_fingerprints.py``
    recomputes every stored fingerprint and fails when the code no longer gives it.

    Returns:
        A dict with the keys ``function`` (``"module.name"``), ``config``, ``n``, ``dtype``,
        ``commit`` and ``trials`` (a list of dicts with ``seed``, ``unit`` and ``losses``);
        ``dtype`` (default: ``config["dtype"]`` or
        ``"float32"``) sets the tolerance of the check.

    Example:
        >>> def first_losses(config, seed, n, *, x):
        ...     return [float(seed + x + i) for i in range(n)]
        >>> loss_fingerprint(first_losses, {}, [(0, {"x": 1})], n=3)["trials"][0]["losses"]
        [1.0, 2.0, 3.0]
    """
    if not callable(first_losses):
        raise TypeError(f"first_losses must be callable, got {type(first_losses).__name__}")
    n = check_int("n", n)
    dtype = dtype or (config.get("dtype") if isinstance(config.get("dtype"), str) else None) or "float32"
    out = []
    for seed, unit in trials:
        losses = [float(v) for v in first_losses(dict(config), seed, n, **unit)]
        out.append({"seed": seed, "unit": dict(unit), "losses": losses})
    return {
        "function": f"{first_losses.__module__}.{first_losses.__qualname__}",
        "config": dict(config),
        "n": n,
        "dtype": dtype,
        "commit": _git("rev-parse", "HEAD"),
        "trials": out,
    }


# --------------------------------------------------------------------------- the harness


def unit_key(unit: object) -> str:
    """The key under which a unit of a plan is saved: its parts joined by ``":"``.

    Example:
        >>> unit_key(("main", "rope", 0))
        'main:rope:0'
    """
    parts = unit if isinstance(unit, tuple) else (unit,)
    if not parts or not all(isinstance(p, (str, int, float)) and not isinstance(p, bool) for p in parts):
        raise TypeError(f"a unit must be a str, a number or a tuple of them, got {unit!r}")
    return ":".join(str(p) for p in parts)


def one_thread(quick: bool = False) -> None:
    """The ``setup`` of a script whose trials must give the same numbers on any CPU: one thread, deterministic kernels.

    ``quick`` is what :class:`Experiment` passes to ``setup``; the setting is the same.

    Example:
        >>> import torch
        >>> one_thread(); torch.get_num_threads()
        1
    """
    import torch

    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {quick!r}")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def chosen_lr(rows: Sequence[Mapping], variant: str, lrs: Sequence[float], *,
              score: str = "heldout_loss") -> float | None:
    """A variant's learning rate: the lowest ``score`` among its tuning rows (ties: the smaller rate).

    A tuning row has ``"variant"``, ``"role": "tune"``, ``"lr"`` and ``score``; ``None``
    until every rate of ``lrs`` has a row (the seeds wait for the choice).

    Example:
        >>> rows = [{"variant": "a", "role": "tune", "lr": lr, "heldout_loss": v}
        ...         for lr, v in ((0.01, 0.3), (0.03, 0.3))]
        >>> chosen_lr(rows, "a", (0.01, 0.03)), chosen_lr(rows, "a", (0.01, 0.03, 0.1))
        (0.01, None)
    """
    _check_rows(list(rows) if isinstance(rows, (list, tuple)) else rows)
    if not isinstance(variant, str):
        raise TypeError(f"variant must be a str, got {type(variant).__name__}")
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence) or not lrs:
        raise TypeError(f"lrs must be a non-empty sequence of learning rates, got {lrs!r}")
    tuned = [r for r in rows if r.get("variant") == variant and r.get("role") == "tune"]
    if len(tuned) < len(lrs):
        return None
    if not all(score in r and "lr" in r for r in tuned):
        raise ValueError(f"rows: every tuning row of {variant!r} must have 'lr' and {score!r} (score)")
    return min(tuned, key=lambda r: (r[score], r["lr"]))["lr"]


def tuning_plan(saved: Mapping, variants: Iterable[str], lrs: Sequence[float], seeds: Sequence[int]) -> list[tuple]:
    """The units of a tuned grid: ``("tune", variant, lr)`` for every rate, then ``("main", variant, seed)``.

    A variant's seeds are planned once :func:`chosen_lr` can choose its rate from the
    tuning rows in ``saved["rows"]``, so the plan grows as the results come in.

    Example:
        >>> tuning_plan({"rows": []}, ["a"], (0.01, 0.03), (0, 1))
        [('tune', 'a', 0.01), ('tune', 'a', 0.03)]
    """
    if not isinstance(saved, Mapping) or not isinstance(saved.get("rows"), list):
        raise TypeError(f"saved must be a results dict with a list 'rows', got {type(saved).__name__}")
    if isinstance(variants, (str, bytes)):
        raise TypeError(f"variants must be an iterable of names, got the str {variants!r}")
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise TypeError(f"seeds must be a sequence of ints, got {seeds!r}")
    units = []
    for name in variants:
        units += [("tune", name, lr) for lr in lrs]
        if chosen_lr(saved["rows"], name, lrs) is not None:
            units += [("main", name, seed) for seed in seeds]
    return units


def timed_unit(ctx: Context, row_of: Callable[[], dict]) -> dict:
    """Run one trial, ``row_of()``, and return what ``run_unit`` returns: ``{"rows": [row]}``.

    The row gets ``"seconds"`` (its wall time, to 0.1 s) as its last key and is logged with
    ``ctx.log``.

    Example:
        >>> timed_unit(Context(True, {"rows": []}, print), lambda: {"x": 1})["rows"][0]["x"]
        {'x': 1, 'seconds': 0.0}
        1
    """
    if not isinstance(ctx, Context):
        raise TypeError(f"ctx must be the Context the harness hands to run_unit, got {type(ctx).__name__}")
    if not callable(row_of):
        raise TypeError(f"row_of must be callable, got {type(row_of).__name__}")
    t0 = time.perf_counter()
    row = row_of()
    if not isinstance(row, dict):
        raise TypeError(f"row_of must return a dict (one row), got {type(row).__name__}")
    row["seconds"] = round(time.perf_counter() - t0, 1)
    ctx.log(str(row))
    return {"rows": [row]}


class Context:
    """What :class:`Experiment` hands to ``run_unit``: ``quick``, ``log``, and the ``saved`` results so far."""

    def __init__(self, quick: bool, saved: dict, log: Callable[[str], None]):
        self.quick = quick
        self.saved = saved
        self.log = log


class Experiment:
    """Run a plan of units in packs, resumably, saving (and optionally committing) after every pack.

    A script under ``experiments/`` is its protocol, a ``run_unit(unit, ctx)`` that runs one
    unit (a trial, or a group of evaluations) and returns the lists it adds to the results
    file (``{"rows": [...], "runs": [...]}``), and ``Experiment(...).main()``. The harness:

    - plans: ``plan`` is a list of units (tuples of str/int) or ``plan(saved)`` returning
      one, asked again after every unit (a plan may grow as results come in, e.g. seeds at a
      learning rate chosen by tuning units);
    - resumes: a unit whose key (``unit_key``) is in the file's ``units`` (or, for a
      file written before the harness, whose ``done(saved)`` names it) is skipped;
    - saves atomically after every pack of ``pack`` units (temporary file +
      ``os.replace``), with ``protocol``, ``provenance`` (this session's, with the core-hours
      of every unit saved), the ``fingerprint`` that ``fingerprint()`` returns (once per
      session) and ``metadata`` (a value, or a function of the results); with
      ``--commit`` it also runs ``git add <file> && git commit`` of that file alone, so a
      stop loses at most one pack;
    - stops cleanly: ``--max-minutes M`` starts no unit that its estimate (the mean time of
      the units run so far) says would end after ``M`` minutes;
    - ``--quick``: ``run_unit`` gets ``ctx.quick = True`` (a tiny budget), the units of
      ``quick_plan`` (default: the first unit of the plan) run and nothing is saved; with
      ``--out PATH`` their sections are written to ``PATH`` with the protocol and
      ``"quick": true`` (a test fixture with the results file's schema; never over the
      experiment's own results file or a file that is not a quick one);
    - prints a progress line per pack: units done and left, core-minutes, the estimated
      time left;
    - ``--workers N`` (default ``workers``, 1): runs disjoint packs in ``N`` processes (forked,
      each on one thread after ``setup``); the parent alone merges, writes and commits a pack
      as it finishes, so a stop loses at most the packs in flight. A worker's ``ctx.saved`` is
      the results as they stood when its pack was handed out (with the earlier units of its
      own pack), and the plan is asked again only from merged results: a unit may read the
      rows that the plan waited for (a seed reading its variant's tuning), not those of
      units planned beside it. The rows of the session are kept in the order of the plan
      (not of finishing), so ``N`` workers write the same rows, in the same order, as one.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "squares.json"
        >>> exp = Experiment("squares", out, lambda u, ctx: {"rows": [{"x": u, "y": u * u}]}, plan=[1, 2, 3], pack=2)
        >>> exp.main(["--quiet"])
        0
        >>> [r["y"] for r in read_results(out)["rows"]]
        [1, 4, 9]
    """

    def __init__(
        self,
        name: str,
        path: str | Path,
        run_unit: Callable[[object, Context], Mapping[str, list]],
        plan: Sequence[object] | Callable[[dict], Sequence[object]],
        *,
        protocol: Mapping | None = None,
        pack: int = 1,
        quick_plan: Sequence[object] | None = None,
        done: Callable[[dict], Iterable[str]] | None = None,
        fingerprint: Callable[[], dict] | None = None,
        metadata: Mapping | None = None,
        setup: Callable[[bool], None] | None = None,
        workers: int = 1,
    ):
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty str, got {name!r}")
        self.name = name
        self.path = _check_path(path)
        if not callable(run_unit):
            raise TypeError(f"run_unit must be callable, got {type(run_unit).__name__}")
        self.run_unit = run_unit
        if not callable(plan) and (isinstance(plan, (str, bytes)) or not isinstance(plan, Sequence)):
            raise TypeError(f"plan must be a list of units or a function of the saved results, got {type(plan).__name__}")
        self.plan = plan
        self.protocol = None if protocol is None else dict(protocol)
        self.pack = check_int("pack", pack)
        self.quick_plan = quick_plan
        self.done = done
        self.fingerprint = fingerprint
        self.metadata = dict(metadata or {})
        self.setup = setup
        self.workers = check_int("workers", workers)
        self._fingerprint: dict | None = None

    # -- pieces, usable on their own

    def units(self, saved: dict) -> list[object]:
        """The plan for the results ``saved`` (a list of units)."""
        units = list(self.plan(saved) if callable(self.plan) else self.plan)
        for u in units:
            unit_key(u)
        return units

    def done_keys(self, saved: dict) -> set[str]:
        """The keys of the units already in ``saved``."""
        keys = {u["key"] for u in saved.get("units", [])}
        if self.done is not None:
            keys |= set(self.done(saved))
        return keys

    def load(self) -> dict:
        """The saved results (``{"rows": []}`` when there is no file yet); refuses another protocol."""
        if not self.path.exists():
            return {"rows": []}
        saved = read_results(self.path)
        if self.protocol is not None and saved.get("protocol", self.protocol) != self.protocol:
            raise SystemExit(f"{self.path} was made with another protocol; move it away to start afresh")
        return saved

    def save(self, saved: dict, *, session: dict, message: str | None = None) -> None:
        """Write ``saved`` atomically with protocol, provenance and fingerprint; commit it if ``message``."""
        if saved.get("units"):
            core_hours = sum(u.get("cpu_seconds", 0.0) for u in saved["units"]) / 3600
        else:  # a file written before the harness: its own record of the cost, if any
            core_hours = (saved.get("provenance") or {}).get("core_hours")
        saved["provenance"] = {**session, "core_hours": None if core_hours is None else round(core_hours, 4)}
        if self.protocol is not None:
            saved["protocol"] = self.protocol
        for k, v in self.metadata.items():
            saved[k] = v(saved) if callable(v) else v
        if self.fingerprint is not None:
            if self._fingerprint is None:  # once per session: seconds, at this session's commit
                self._fingerprint = self.fingerprint()
            saved["fingerprint"] = self._fingerprint
        write_results(self.path, saved["rows"], **{k: v for k, v in saved.items() if k != "rows"})
        if message is not None:
            rel = os.path.relpath(self.path.resolve(), REPO)
            ok = _git("add", "--", rel) is not None and _git("commit", "-m", message, "--", rel) is not None
            if not ok:
                print(f"[{self.name}] git commit of {rel} failed; the file is saved", file=sys.stderr, flush=True)

    # -- the command line

    def parser(self) -> argparse.ArgumentParser:
        ap = argparse.ArgumentParser(prog=self.name)
        ap.add_argument("--quick", action="store_true", help="a smoke run with a tiny budget; nothing is saved")
        ap.add_argument("--max-minutes", type=float, default=None,
                        help="start no unit that would end after this many minutes")
        ap.add_argument("--commit", action="store_true", help="git-commit the results file after every pack")
        ap.add_argument("--pack", type=int, default=None, help=f"units per pack (default {self.pack})")
        ap.add_argument("--out", type=Path, default=None,
                        help=f"results file (default {self.path}); with --quick, where the smoke run's sections go")
        ap.add_argument("--workers", type=int, default=None,
                        help=f"processes running packs at once, one thread each (default {self.workers})")
        ap.add_argument("--quiet", action="store_true", help="no progress lines")
        ap.add_argument("--stamp", action="store_true",
                        help="run nothing: record this commit's provenance and fingerprint in the results file "
                        "(after checking that the code reproduces a saved trial)")
        return ap

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run the plan from the command line (``argv``: the arguments, default ``sys.argv[1:]``)."""
        args = self.parser().parse_args(argv)
        quick_out = None
        if args.quick and args.out is not None:
            quick_out = _check_quick_out(args.out, self.path)
        elif args.out is not None:
            self.path = args.out
        pack = self.pack = self.pack if args.pack is None else check_int("--pack", args.pack)
        log = (lambda msg: None) if args.quiet else (
            lambda msg: print(time.strftime("%H:%M:%S"), f"[{self.name}]", msg, flush=True))
        if self.setup is not None:
            self.setup(args.quick)
        saved = {"rows": []} if args.quick else self.load()
        if args.stamp:
            self.save(saved, session=provenance())
            log(f"stamped {self.path} with commit {saved['provenance']['commit']} and its fingerprint")
            return 0
        ctx = Context(args.quick, saved, log)
        if args.quick:
            sections: dict[str, list] = {"rows": []}
            for unit in self.quick_plan if self.quick_plan is not None else self.units(saved)[:1]:
                out = self.run_unit(unit, ctx)
                for section, items in out.items():
                    sections.setdefault(section, []).extend(items)
                sections.setdefault("units", []).append({"key": unit_key(unit)})
                log(f"quick {unit_key(unit)}: " + ", ".join(f"{k}: {len(v)}" for k, v in out.items()))
            if quick_out is None:
                log("quick run finished; nothing saved")
                return 0
            extra = {k: v for k, v in sections.items() if k != "rows"}
            write_results(quick_out, sections["rows"], quick=True, protocol=self.protocol, **extra)
            log(f"quick run finished; its sections are in {quick_out} (a fixture, not results)")
            return 0
        workers = self.workers if args.workers is None else check_int("--workers", args.workers)
        if workers > 1:
            return self._run_pool(saved, ctx, workers, args, log)
        session = provenance()
        t0, cpu0 = time.perf_counter(), time.process_time()
        spent: list[float] = []
        in_pack = packs = 0
        stopped = False
        while True:
            done = self.done_keys(saved)
            todo = [u for u in self.units(saved) if unit_key(u) not in done]
            if not todo:
                break
            if args.max_minutes is not None:
                estimate = sum(spent) / len(spent) if spent else 0.0
                if time.perf_counter() - t0 + estimate > 60 * args.max_minutes:
                    log(f"--max-minutes {args.max_minutes:g}: stopping before {unit_key(todo[0])} "
                        f"({len(todo)} units left); run again to continue")
                    stopped = True
                    break
            unit = todo[0]
            w, c = time.perf_counter(), time.process_time()
            out = self.run_unit(unit, ctx)
            if not isinstance(out, Mapping) or not all(isinstance(v, list) for v in out.values()):
                raise TypeError(f"run_unit must return a dict of lists (e.g. {{'rows': [...]}}), got {out!r:.80}")
            for section, items in out.items():
                saved.setdefault(section, []).extend(items)
            spent.append(time.perf_counter() - w)
            saved.setdefault("units", []).append({
                "key": unit_key(unit), "commit": session["commit"],
                "wall_seconds": round(spent[-1], 1), "cpu_seconds": round(time.process_time() - c, 1)})
            in_pack += 1
            if in_pack == pack:
                packs += 1
                self._end_pack(saved, session, packs, len(todo) - 1, spent, t0, cpu0, args.commit, log)
                in_pack = 0
        if in_pack:
            packs += 1
            left = len([u for u in self.units(saved) if unit_key(u) not in self.done_keys(saved)])
            self._end_pack(saved, session, packs, left, spent, t0, cpu0, args.commit, log)
        log("stopped by --max-minutes" if stopped else f"finished: {len(self.done_keys(saved))} units in {self.path}")
        return 0

    def _run_pool(self, saved: dict, ctx: Context, workers: int, args: argparse.Namespace, log) -> int:
        """``main`` with ``workers`` processes: hand out packs, merge and save each as it finishes."""
        import multiprocessing
        import queue

        global _POOL_EXPERIMENT
        session = {**provenance(), "workers": workers}
        base = {k: list(v) for k, v in saved.items() if isinstance(v, list)}  # the file before this session
        finished: dict[str, tuple[object, Mapping, dict]] = {}  # key -> (unit, out, unit record)
        t0 = time.perf_counter()
        spent: list[float] = []
        in_flight: dict[int, list[object]] = {}
        results: queue.Queue = queue.Queue()
        packs = 0
        stopped = False
        _POOL_EXPERIMENT = (self.run_unit, args.quick, log)
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_pool_worker_setup, initargs=(self.setup,))
        try:
            while True:
                busy = {unit_key(u) for pack in in_flight.values() for u in pack}
                done = self.done_keys(saved)
                todo = [u for u in self.units(saved) if unit_key(u) not in done and unit_key(u) not in busy]
                while todo and len(in_flight) < workers and not stopped:
                    pack, todo = todo[: self.pack], todo[self.pack:]
                    if args.max_minutes is not None:
                        estimate = len(pack) * sum(spent) / len(spent) if spent else 0.0
                        if time.perf_counter() - t0 + estimate > 60 * args.max_minutes:
                            log(f"--max-minutes {args.max_minutes:g}: handing out no pack from "
                                f"{unit_key(pack[0])} on; run again to continue")
                            stopped = True
                            break
                    packs += 1
                    in_flight[packs] = pack
                    pool.apply_async(_pool_run_pack, (packs, pack, copy.deepcopy(saved)), callback=results.put,
                                     error_callback=lambda err: results.put(err))
                if not in_flight:
                    break
                got = results.get()
                if isinstance(got, BaseException):
                    raise got
                number, outs = got
                pack = in_flight.pop(number)
                for unit, out, wall, cpu in outs:
                    if not isinstance(out, Mapping) or not all(isinstance(v, list) for v in out.values()):
                        raise TypeError(f"run_unit must return a dict of lists (e.g. {{'rows': [...]}}), got {out!r:.80}")
                    spent.append(wall)
                    finished[unit_key(unit)] = (unit, out, {
                        "key": unit_key(unit), "commit": session["commit"],
                        "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)})
                self._merge(saved, base, finished)
                left = len([u for u in self.units(saved) if unit_key(u) not in self.done_keys(saved)])
                core_min = sum(r["cpu_seconds"] for _, _, r in finished.values()) / 60
                eta = (sum(spent) / len(spent)) * left / 60 / workers if spent else 0.0
                n = len(self.done_keys(saved))
                message = (f"{self.name}: pack {unit_key(pack[0])}.. ({len(pack)} units) in, {n} units done, "
                           f"{left} left, {core_min:.1f} core-minutes this session, {workers} workers")
                self.save(saved, session=session, message=message if args.commit else None)
                log(f"pack from {unit_key(pack[0])} ({len(pack)} units): {n} units done, {left} left, "
                    f"{len(in_flight)} packs in flight, {core_min:.1f} core-min, about {eta:.1f} min left")
        finally:
            pool.terminate()
            pool.join()
            _POOL_EXPERIMENT = None
        log("stopped by --max-minutes" if stopped else f"finished: {len(self.done_keys(saved))} units in {self.path}")
        return 0

    def _merge(self, saved: dict, base: dict, finished: dict) -> None:
        """Rebuild ``saved``'s lists: the file's own items, then this session's units in the order of the plan."""

        def build(keys: list[str]) -> None:
            sections: dict[str, list] = {k: list(v) for k, v in base.items()}
            sections.setdefault("rows", [])
            for key in keys:
                unit, out, record = finished[key]
                for section, items in out.items():
                    sections.setdefault(section, []).extend(items)
                sections.setdefault("units", []).append(record)
            saved.update(sections)

        build(list(finished))  # first the content, so that a plan which grows with the results sees it
        order = {unit_key(u): i for i, u in enumerate(self.units(saved))}
        build(sorted(finished, key=lambda k: order.get(k, len(order))))  # stable: units off the plan last

    def _end_pack(self, saved, session, k, left, spent, t0, cpu0, commit, log) -> None:
        n_packs = k + math.ceil(left / self.pack) if left else k
        core_min = (time.process_time() - cpu0) / 60
        eta = (sum(spent) / len(spent)) * left / 60 if spent else 0.0
        message = (f"{self.name}: pack {k}/{n_packs}, {len(self.done_keys(saved))} units done, {left} left, "
                   f"{core_min:.1f} core-minutes this session")
        self.save(saved, session=session, message=message if commit else None)
        log(f"pack {k}/{n_packs}: {len(self.done_keys(saved))} units done, {left} left, "
            f"{core_min:.1f} core-min, about {eta:.1f} min left")


def _check_quick_out(out: Path, results_path: Path) -> Path:
    """``--out`` of a quick run: never the experiment's own results file, nor a file a quick run did not write."""
    if out.resolve() == Path(results_path).resolve():
        raise SystemExit(f"--out {out} is this experiment's results file; a quick run writes elsewhere")
    if out.exists():
        try:
            ok = json.loads(out.read_text()).get("quick") is True
        except (json.JSONDecodeError, AttributeError):
            ok = False
        if not ok:
            raise SystemExit(f"--out {out} exists and was not written by a quick run; choose another path")
    return out


# --------------------------------------------------------------------------- the worker pool

#: (run_unit, quick, log) of the experiment a pool runs; set in the parent before the workers are
#: forked, so they inherit it (the functions of a script need not be picklable)
_POOL_EXPERIMENT: tuple | None = None


def _pool_worker_setup(setup: Callable[[bool], None] | None) -> None:
    import torch

    torch.set_num_threads(1)
    if setup is not None:
        setup(_POOL_EXPERIMENT[1])


def _pool_run_pack(number: int, pack: list, saved: dict) -> tuple[int, list]:
    """Run the units of one pack in a worker: ``(number, [(unit, out, wall_seconds, cpu_seconds), ...])``."""
    run_unit, quick, log = _POOL_EXPERIMENT
    ctx = Context(quick, saved, log)
    outs = []
    for unit in pack:
        w, c = time.perf_counter(), time.process_time()
        out = run_unit(unit, ctx)
        outs.append((unit, out, time.perf_counter() - w, time.process_time() - c))
        if isinstance(out, Mapping):  # the next unit of the pack sees it, as with one worker
            for section, items in out.items():
                if isinstance(items, list):
                    saved.setdefault(section, []).extend(items)
    return number, outs
