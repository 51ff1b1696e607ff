"""Chapter 7's reading of its grid (issue 31): floors, tables with intervals, orderings and figures.

Every function takes the grid's results dict as loaded
(``results.read_results("realtext.json")``, written by ``experiments/ch7_grid.py``)
and returns plain data or draws on a matplotlib ``Axes``; the chapter only calls them.
The schema read here is the grid's: ``protocol`` (``config`` = ``GridConfig.to_dict()``,
``variants``, ``eval``, ``probe``, ``extensions``), ``baselines`` (the count models),
``rows`` (bits per character per variant, seed, ``eval_len`` and ``mode``, with
``block_bpc``), ``context_use``, ``runs`` / ``tune`` / ``copy_runs`` (one per trial, with
the validation ``history`` and the ``loss_by_position`` at ``8L``), ``copy_probe``,
``extension_rows`` and ``extension_runs``.

A section the grid has not written yet is not an error: a table comes back empty with
its ``missing`` message, a figure says so on its axes, and :func:`floors` and
:func:`orderings` mark the cells they could not read. Bad arguments raise ``TypeError`` or
``ValueError`` naming the argument.

The statistics are :func:`~posenc.book.realtext.bpc_intervals` (t over seeds, bootstrap
over blocks of text), :func:`~posenc.book.realtext.paired_bpc` (paired differences) and
:func:`~posenc.book.results.summarize`; nothing here computes an interval of its own.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np

from .._checks import check_int
from ._validate import check_axes, check_names, check_real, check_seed
from .realtext import EVAL_MODES, bpc_intervals, paired_bpc, rope_break, t5_first_untrained, variant_name
from .results import summarize

__all__ = [
    "ReportRows",
    "baseline_table",
    "bpc_table",
    "context_use_table",
    "copy_probe_table",
    "extension_table",
    "first_gap",
    "floors",
    "largest_step",
    "loss_by_position",
    "orderings",
    "plot_break_by_step",
    "plot_context_use",
    "plot_extension_positions",
    "plot_loss_by_position",
    "training_table",
]

#: The labels of :func:`orderings`.
HOLDS, INDISTINGUISHABLE, REVERSED, MIXED, NOT_YET = (
    "holds seed by seed", "indistinguishable", "reversed seed by seed", "not seed by seed", "not in the results yet")


class ReportRows(list):
    """A table as a list of row dicts, with the columns to show and, when empty, why.

    ``columns`` are the keys :meth:`markdown` shows, in order; ``missing`` is ``None`` or a
    sentence saying which part of the grid is not there yet.

    Example:
        >>> t = ReportRows([{"variant": "rope", "mean": 2.5712, "t95": [2.55, 2.59]}], columns=("variant", "mean", "t95"))
        >>> print(t.markdown(digits=2))
        | variant | mean | t95 |
        |:--|:--|:--|
        | rope | 2.57 | [2.55, 2.59] |
        >>> ReportRows(missing="the grid has no 'rows' yet").markdown()
        "*the grid has no 'rows' yet*"
    """

    def __init__(self, rows: Sequence[Mapping] = (), *, columns: Sequence[str] = (), missing: str | None = None):
        super().__init__(dict(r) for r in rows)
        self.columns = tuple(columns) if columns else (tuple(self[0]) if self else ())
        self.missing = missing

    def markdown(self, columns: Sequence[str] | None = None, *, digits: int = 3, signed: Sequence[str] = (),
                 headers: Mapping[str, str] | None = None) -> str:
        """The rows as a Markdown table (:func:`posenc.book.tables.markdown_table`); the ``missing`` sentence when empty.

        Floats get ``digits`` decimals (with a sign in the columns ``signed``); a list is
        an interval ``[low, high]`` in a column named ``interval`` or containing ``95``,
        else per-seed values ``a / b / c``; ``None`` is a dash. ``headers`` renames columns.
        """
        from .tables import markdown_table

        digits = check_int("digits", digits, minimum=0)
        cols = self.columns if columns is None else check_names("columns", columns)
        signed = set(check_names("signed", signed, nonempty=False))
        headers = {} if headers is None else dict(headers)
        if not self:
            return f"*{self.missing or 'no rows'}*"
        unknown = [c for c in cols if not any(c in r for r in self)]
        if unknown:
            raise ValueError(f"columns: {unknown[0]!r} is in no row; the rows have {sorted(self[0])}")

        def fmt(v: object, sign: bool, interval: bool) -> str:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return "–"
            if isinstance(v, bool):
                return "yes" if v else "no"
            if isinstance(v, float):
                return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"
            if isinstance(v, (list, tuple)):
                parts = [fmt(x, sign, False) for x in v]
                return f"[{', '.join(parts)}]" if interval else " / ".join(parts)
            return str(v)

        return markdown_table([headers.get(c, c) for c in cols],
                              [[fmt(r.get(c), c in signed, "95" in c or c == "interval") for c in cols] for r in self])


# --------------------------------------------------------------------------- reading the grid


def _check_grid(grid: object) -> Mapping:
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be the grid's results dict (results.read_results of realtext.json), "
                        f"got {type(grid).__name__}")
    config = (grid.get("protocol") or {}).get("config") if isinstance(grid.get("protocol"), Mapping) else None
    if not isinstance(config, Mapping) or "train_len" not in config:
        raise ValueError("grid has no 'protocol' with a 'config' (GridConfig.to_dict()): is it chapter 7's grid file?")
    return grid


def _config(grid: Mapping) -> Mapping:
    return grid["protocol"]["config"]


def _units(grid: Mapping) -> str:
    keys = [u.get("key", "?") for u in grid.get("units", []) if isinstance(u, Mapping)]
    return ", ".join(keys) if keys else "none"


def _missing(grid: Mapping, *sections: str) -> str | None:
    """A sentence naming the sections that are absent or empty, with the units run so far; ``None`` if all are there."""
    empty = [s for s in sections if not grid.get(s)]
    if not empty:
        return None
    names = " and ".join(f"'{s}'" for s in empty)
    return f"not in the results yet: the grid has no {names} section{'s' if len(empty) > 1 else ''} (units run: {_units(grid)})"


def _variants(grid: Mapping) -> list[str]:
    """The grid's variant names, in the protocol's order."""
    return [variant_name(s, md) for s, md in grid["protocol"].get("variants", [])]


def _check_variants(name: str, variants: object, grid: Mapping) -> list[str]:
    known = _variants(grid)
    if variants is None:
        return known
    chosen = list(check_names(name, variants))
    bad = [v for v in chosen if v not in known]
    if bad:
        raise ValueError(f"{name}: {bad[0]!r} is not a variant of the grid; choose from {known}")
    return chosen


def _scheme(variant: str) -> str:
    return variant.split("-")[0]


def _cells(rows: Sequence[Mapping], keys: tuple[str, ...]) -> dict[tuple, list[Mapping]]:
    """Rows grouped by ``keys`` (in first-seen order), rows without a value (``bpc`` / ``gain`` ``None``) kept."""
    out: dict[tuple, list[Mapping]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def _intervals(rows: Sequence[Mapping], key: str, seed: int) -> dict:
    """:func:`~posenc.book.realtext.bpc_intervals` of the rows that have a value, with the per-seed values by seed."""
    have = sorted((r for r in rows if r.get(key) is not None), key=lambda r: r.get("seed", 0))
    out = bpc_intervals(have, key, seed=seed)
    out["seed_ids"] = [r.get("seed") for r in have]
    return out


def _ngram(grid: Mapping, context: int, eval_set: str = "all") -> Mapping | None:
    return next((r for r in grid.get("baselines", []) if r.get("model") == "ngram" and r.get("context") == context
                 and r.get("eval_set") == eval_set), None)


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), digits)


def _interval(pair) -> list[float | None]:
    return [_round(v) for v in pair]


# --------------------------------------------------------------------------- tables


def bpc_table(grid: Mapping, *, variants: Sequence[str] | None = None, lens: Sequence[int] | None = None,
              modes: Sequence[str] = EVAL_MODES, seed: int = 0) -> ReportRows:
    """Bits per character per variant, evaluation length and mode: mean over seeds, per-seed values, both intervals.

    Args:
        grid: the grid's results dict.
        variants: the variants to show (default: all of the protocol's, in its order).
        lens: the evaluation lengths (default: every length in the rows).
        modes: ``"nonoverlapping"`` and/or ``"sliding"``.
        seed: the bootstrap's seed.

    Returns:
        :class:`ReportRows` with ``variant``, ``eval_len``, ``mode``, ``mean``, ``seeds``
        (per-seed values, by seed), ``t95`` (over seeds), ``bootstrap95`` (over blocks of
        text), ``n_seeds``, ``n_blocks``. A cell the model cannot score (the learned table
        beyond ``L``) is left out.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> t = bpc_table(_example_grid(), lens=[8], modes=["sliding"])
        >>> [(r["variant"], round(r["mean"], 2), r["n_seeds"]) for r in t]
        [('rope', 2.56, 3), ('alibi', 2.66, 3)]
        >>> bpc_table({"protocol": {"config": {"train_len": 8}}}).missing[:30]
        'not in the results yet: the gr'
    """
    grid = _check_grid(grid)
    names = _check_variants("variants", variants, grid)
    modes = check_names("modes", modes)
    for m in modes:
        if m not in EVAL_MODES:
            raise ValueError(f"modes: {m!r} is not one of {EVAL_MODES}")
    if lens is not None:
        if isinstance(lens, (str, bytes)) or not isinstance(lens, Sequence) or not lens:
            raise TypeError(f"lens must be a non-empty list of evaluation lengths, got {lens!r}")
        lens = [check_int("lens", n) for n in lens]
    seed = check_seed("seed", seed)
    columns = ("variant", "eval_len", "mode", "mean", "t95", "bootstrap95", "seeds")
    missing = _missing(grid, "rows")
    if missing:
        return ReportRows(columns=columns, missing=missing)
    cells = _cells(grid["rows"], ("variant", "eval_len", "mode"))
    out = []
    for v in names:
        for n in sorted({k[1] for k in cells if k[0] == v} if lens is None else lens):
            for m in modes:
                rows = [r for r in cells.get((v, n, m), []) if r.get("bpc") is not None]
                if not rows:
                    continue
                s = _intervals(rows, "bpc", seed)
                out.append({"variant": v, "eval_len": n, "mode": m, "mean": s["mean"], "seeds": s["seeds"],
                            "seed_ids": s["seed_ids"], "t95": s["t95"], "bootstrap95": s["bootstrap95"],
                            "n_seeds": s["n_seeds"], "n_blocks": s["n_blocks"]})
    return ReportRows(out, columns=columns, missing=None if out else "no row of the grid matches these variants, lengths and modes")


def baseline_table(grid: Mapping, *, seed: int = 0) -> ReportRows:
    """The count models (interpolated character n-grams) on the scored test characters, with a bootstrap over blocks.

    Returns:
        :class:`ReportRows` with ``context`` (characters seen, 0-5), ``bpc`` (on every
        scored character), ``bootstrap95`` (its 95 % interval over blocks of text) and
        ``bpc_every`` (on the characters the context-use curves score, every 4th).

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> [(r["context"], r["bpc"]) for r in baseline_table(_example_grid())][3:5]
        [(3, 2.706), (4, 2.588)]
    """
    grid = _check_grid(grid)
    seed = check_seed("seed", seed)
    columns = ("context", "bpc", "bootstrap95", "bpc_every")
    missing = _missing(grid, "baselines")
    if missing:
        return ReportRows(columns=columns, missing=missing)
    out = []
    for k in sorted({r["context"] for r in grid["baselines"] if r.get("model") == "ngram"}):
        full = _ngram(grid, k)
        every = next((r for r in grid["baselines"] if r.get("model") == "ngram" and r.get("context") == k
                      and r.get("eval_set", "all") != "all"), None)
        boot = summarize(full.get("block_bpc") or [], interval="bootstrap", seed=seed) if full else None
        out.append({"context": k, "bpc": None if full is None else full["bpc"],
                    "bootstrap95": None if boot is None else _interval(boot.interval),
                    "bpc_every": None if every is None else every["bpc"],
                    "eval_set_every": None if every is None else every.get("eval_set")})
    return ReportRows(out, columns=columns)


def context_use_table(grid: Mapping, *, variants: Sequence[str] | None = None, seed: int = 0) -> ReportRows:
    """Each variant's context-use curve: bits per character with exactly ``k`` characters of context, over seeds.

    Returns:
        :class:`ReportRows` with ``variant``, ``context``, ``mean``, ``seeds``, ``t95``,
        ``bootstrap95``, ``n_seeds`` (the characters are every 4th scored one, as in the
        count models' ``bpc_every`` of :func:`baseline_table`).

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> [(r["context"], round(r["mean"], 2)) for r in context_use_table(_example_grid(), variants=["rope"])]
        [(1, 3.66), (2, 3.12), (4, 2.6), (8, 2.57)]
    """
    grid = _check_grid(grid)
    names = _check_variants("variants", variants, grid)
    seed = check_seed("seed", seed)
    columns = ("variant", "context", "mean", "t95", "bootstrap95", "seeds")
    missing = _missing(grid, "context_use")
    if missing:
        return ReportRows(columns=columns, missing=missing)
    cells = _cells(grid["context_use"], ("variant", "context"))
    out = []
    for v in names:
        for k in sorted(c for (name, c) in cells if name == v):
            rows = [r for r in cells[(v, k)] if r.get("bpc") is not None]
            if rows:
                s = _intervals(rows, "bpc", seed)
                out.append({"variant": v, "context": k, "mean": s["mean"], "seeds": s["seeds"],
                            "seed_ids": s["seed_ids"], "t95": s["t95"], "bootstrap95": s["bootstrap95"],
                            "n_seeds": s["n_seeds"]})
    return ReportRows(out, columns=columns, missing=None if out else "no context-use row for these variants")


def _window_name(length: int | None, L: int) -> str | None:
    if length is None:
        return None
    return "L" if length == L else (f"{length // L}L" if length % L == 0 else str(length))


def copy_probe_table(grid: Mapping, *, condition: str | None = None) -> ReportRows:
    """The controlled copy probe per variant, condition and distance: the gain over seeds and its interval.

    ``gain`` is the control minus the copy (bits per character on the repeated span's
    characters 2 on; positive: the model copies). With two or more seeds the interval is
    the t interval over seeds (``t95 over seeds``); with one seed (the positive control)
    it is that probe's bootstrap over its windows (``bootstrap over windows``). ``label``
    reads the interval: ``"copies"`` (above 0), ``"no copying seen"`` (contains 0),
    ``"worse with the first copy"`` (below 0).

    Args:
        grid: the grid's results dict.
        condition: ``"text"`` (the main models), ``"positive_control"`` (trained with
            repeated spans) or ``None`` for both.

    Returns:
        :class:`ReportRows` with ``variant``, ``condition``, ``distance``, ``window``
        (``"L"``, ``"2L"``, ...: inside or beyond the training length), ``gain``,
        ``gains`` (per seed), ``interval``, ``interval_kind``, ``label``, ``copy_bpc``,
        ``control_bpc``, ``n_seeds``; a probe the model cannot run (the learned table
        beyond ``L``) has ``gain`` ``None`` and its ``error``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> t = copy_probe_table(_example_grid(), condition="positive_control")
        >>> [(r["variant"], r["window"], r["label"]) for r in t][:2]
        [('rope', 'L', 'copies'), ('rope', '2L', 'no copying seen')]
    """
    grid = _check_grid(grid)
    conditions = sorted({r.get("condition") for r in grid.get("copy_probe", [])} | {"text", "positive_control"})
    if condition is not None and (not isinstance(condition, str) or condition not in conditions):
        raise ValueError(f"condition must be None or one of {conditions}, got {condition!r}")
    columns = ("variant", "condition", "window", "distance", "gain", "interval", "interval_kind", "label", "gains")
    missing = _missing(grid, "copy_probe")
    if missing:
        return ReportRows(columns=columns, missing=missing)
    L = _config(grid)["train_len"]
    probe = grid["protocol"].get("probe") or {}
    extra = probe.get("span", 0) + probe.get("prefix", 0) if "span" in probe and "prefix" in probe else None
    rows = [r for r in grid["copy_probe"] if condition is None or r.get("condition") == condition]
    order = {v: i for i, v in enumerate(_variants(grid))}
    cells = _cells(rows, ("variant", "condition", "distance"))
    out = []
    for (v, cond, d), rs in sorted(cells.items(), key=lambda kv: (kv[0][1] != "text", order.get(kv[0][0], 99), kv[0][2])):
        have = sorted((r for r in rs if r.get("gain") is not None), key=lambda r: r.get("seed", 0))
        length = next((r["length"] for r in rs if r.get("length") is not None),
                      None if extra is None or d is None else d + extra)   # a probe that could not run: from the protocol
        row = {"variant": v, "condition": cond, "distance": d, "window": _window_name(length, L),
               "n_seeds": len(have), "gains": [r["gain"] for r in have]}
        if not have:
            out.append({**row, "gain": None, "interval": None, "interval_kind": None, "label": "cannot run",
                        "copy_bpc": None, "control_bpc": None, "error": rs[0].get("error")})
            continue
        if len(have) >= 2:
            s = summarize(row["gains"], interval="t95")
            interval, kind = _interval(s.interval), "t95 over seeds"
        else:
            interval, kind = list(have[0].get("gain_bootstrap95") or [None, None]), "bootstrap over windows"
        lo, hi = interval
        label = (None if lo is None or hi is None else
                 "copies" if lo > 0 else "worse with the first copy" if hi < 0 else "no copying seen")
        out.append({**row, "gain": float(np.mean(row["gains"])), "interval": interval, "interval_kind": kind,
                    "label": label, "copy_bpc": float(np.mean([r["copy_bpc"] for r in have])),
                    "control_bpc": float(np.mean([r["control_bpc"] for r in have]))})
    unit = {"positive_control": "the copy:<variant> units"}.get(condition, "the main units")
    return ReportRows(out, columns=columns, missing=None if out else
                      f"not in the results yet: no copy-probe row with condition={condition!r} ({unit}; units run: {_units(grid)})")


def _ext_name(row: Mapping) -> str:
    """``"zs:<method>"`` for a zero-shot extension row, ``"ft:<fine-tune>"`` for a fine-tuned one."""
    return f"zs:{row.get('extension')}" if row.get("finetune") is None else f"ft:{row['finetune']}"


def extension_table(grid: Mapping, *, seed: int = 0) -> ReportRows:
    """RoPE's context extensions: bits per character per method, evaluation length and mode, over the RoPE seeds.

    Zero-shot rows are named ``"zs:<method>"`` (``pi``, ``ntk``, ``yarn``,
    ``yarn_no_temperature``), fine-tuned ones ``"ft:<fine-tune>"`` (``control_at_L``, the
    control that keeps training at ``L``; ``none``, plain RoPE at ``4L``; ``pi``, ``ntk``,
    ``yarn``; ``yarn_s8``, YaRN with factor 8 fine-tuned at ``4L``); the names are the ones
    :func:`orderings` takes.

    Returns:
        :class:`ReportRows` with ``name``, ``extension``, ``temperature``, ``finetune``,
        ``finetune_len``, ``factor``, ``eval_len``, ``mode``, ``mean``, ``seeds``, ``t95``,
        ``bootstrap95``, ``n_seeds``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> t = extension_table(_example_grid())
        >>> sorted({r["name"] for r in t})
        ['ft:control_at_L', 'ft:yarn', 'zs:ntk', 'zs:yarn']
    """
    grid = _check_grid(grid)
    seed = check_seed("seed", seed)
    columns = ("name", "eval_len", "mode", "mean", "t95", "bootstrap95", "seeds")
    missing = _missing(grid, "extension_rows")
    if missing:
        return ReportRows(columns=columns, missing=missing)
    cells = _cells([{**r, "name": _ext_name(r)} for r in grid["extension_rows"]], ("name", "eval_len", "mode"))
    out = []
    for (name, n, mode), rs in cells.items():
        have = [r for r in rs if r.get("bpc") is not None]
        if not have:
            continue
        s = _intervals(have, "bpc", seed)
        first = have[0]
        out.append({"name": name, "extension": first.get("extension"), "temperature": first.get("temperature"),
                    "finetune": first.get("finetune"), "finetune_len": first.get("finetune_len"),
                    "factor": first.get("factor"), "eval_len": n, "mode": mode, "mean": s["mean"],
                    "seeds": s["seeds"], "seed_ids": s["seed_ids"], "t95": s["t95"],
                    "bootstrap95": s["bootstrap95"], "n_seeds": s["n_seeds"]})
    out.sort(key=lambda r: (r["finetune"] is not None, r["name"], r["eval_len"], r["mode"]))
    return ReportRows(out, columns=columns)


def training_table(grid: Mapping) -> ReportRows:
    """Every trial's training: learning rate, best step, where and why it stopped, characters seen.

    Returns:
        :class:`ReportRows` with ``role`` (``"tune"``, ``"main"`` or
        ``"positive_control"``), ``variant``, ``seed``, ``lr``, ``best_step``,
        ``best_val_bpc``, ``stop`` (``"patience"``, ``"budget"`` or ``"diverged"``),
        ``stop_step``, ``steps_run``, ``train_chars`` and ``chosen`` (for tuning trials:
        whether the main seeds train at this rate).

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> [(r["role"], r["variant"], r["stop"]) for r in training_table(_example_grid())][:2]
        [('main', 'rope', 'patience'), ('main', 'rope', 'patience')]
    """
    grid = _check_grid(grid)
    columns = ("role", "variant", "seed", "lr", "best_step", "best_val_bpc", "stop", "stop_step", "steps_run")
    missing = _missing(grid, "runs") if not grid.get("tune") else None
    if missing:
        return ReportRows(columns=columns, missing=missing)
    main_lr = {(r.get("variant"), r.get("lr")) for r in grid.get("runs", [])}
    out = []
    for role, section in (("main", "runs"), ("tune", "tune"), ("positive_control", "copy_runs")):
        for r in grid.get(section, []):
            row = {"role": role, **{k: r.get(k) for k in ("variant", "seed", "lr", "best_step", "best_val_bpc",
                                                             "stop", "stop_step", "steps_run", "train_chars")}}
            if role == "tune":
                row["chosen"] = (r.get("variant"), r.get("lr")) in main_lr
            out.append(row)
    return ReportRows(out, columns=columns)


# --------------------------------------------------------------------------- the floors


def floors(grid: Mapping, *, threshold: float = 0.02, margin: float = 0.05) -> dict:
    """The issue's two floors, per variant and seed, with pass/fail and margins.

    * Floor (a), *the model uses its whole context*: its context-use curve falls from
      ``k = L/2`` to ``k = L`` by at least ``threshold`` bits (``fall`` = bpc at ``L/2``
      minus bpc at ``L``; ``margin_a`` = ``fall - threshold``).
    * Floor (b), *the model beats the count models*: at ``n = L`` (sliding) it is below the
      count model that sees 3 characters (``margin_b3`` = that model's bpc minus the
      scheme's, positive when met), and the best scheme (lowest mean over seeds) is within
      ``margin`` bits of the one that sees 4 (``gap4`` = scheme minus count model).

    NoPE (``"none"``) is reported with ``required: False``: the floors are asked of the
    schemes with a positional signal.

    Args:
        grid: the grid's results dict.
        threshold: floor (a)'s least fall, in bits.
        margin: floor (b)'s largest distance to the 4-character count model, in bits.

    Returns:
        a dict with ``rows`` (:class:`ReportRows`, one per variant and seed, with ``fall``,
        ``floor_a``, ``margin_a``, ``bpc_L``, ``floor_b3``, ``margin_b3``, ``gap4``,
        ``within4``; ``None`` where the grid lacks the number), ``variants`` (one per
        variant: how many seeds meet each floor, ``met`` when all do), ``best`` (the best
        scheme at ``n = L`` and whether it is within ``margin`` of the 4-character model),
        ``met`` (every required variant meets (a) and (b) in every seed and the best is
        within ``margin``; ``None`` until every variant is in), ``ngram3``, ``ngram4``,
        ``train_len``, ``missing``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> f = floors(_example_grid())
        >>> [(r["variant"], r["floor_a"], r["floor_b3"]) for r in f["variants"]][:2]
        [('rope', '3/3', '3/3'), ('alibi', '0/3', '3/3')]
        >>> f["best"]["variant"], f["best"]["within4"], f["met"]
        ('rope', True, False)
    """
    grid = _check_grid(grid)
    threshold = check_real("threshold", threshold, low=0.0)
    margin = check_real("margin", margin, low=0.0)
    L = int(_config(grid)["train_len"])
    half = L // 2
    n3, n4 = _ngram(grid, 3), _ngram(grid, 4)
    g3, g4 = (None if r is None else r["bpc"] for r in (n3, n4))
    columns = ("variant", "seed", "fall", "floor_a", "margin_a", "bpc_L", "floor_b3", "margin_b3", "gap4", "within4")
    base = {"ngram3": g3, "ngram4": g4, "train_len": L, "threshold": threshold, "margin": margin}
    missing = _missing(grid, "rows", "context_use", "baselines")
    if not grid.get("rows") and not grid.get("context_use"):
        return {**base, "rows": ReportRows(columns=columns, missing=missing), "variants": ReportRows(missing=missing),
                "best": None, "met": None, "missing": missing}
    cu = {(r.get("variant"), r.get("seed"), r.get("context")): _round(r.get("bpc"), 6) for r in grid.get("context_use", [])}
    at_L = {(r.get("variant"), r.get("seed")): _round(r.get("bpc"), 6) for r in grid.get("rows", [])
            if r.get("eval_len") == L and r.get("mode") == "sliding"}
    names = _variants(grid)
    pairs = sorted({k[:2] for k in cu} | set(at_L), key=lambda k: (names.index(k[0]) if k[0] in names else 99, k[1]))
    rows = []
    for v, s in pairs:
        a_half, a_full, b = cu.get((v, s, half)), cu.get((v, s, L)), at_L.get((v, s))
        fall = None if a_half is None or a_full is None else a_half - a_full
        rows.append({"variant": v, "seed": s, "required": _scheme(v) != "none",
                     "bpc_half": a_half, "bpc_full": a_full, "fall": _round(fall),
                     "floor_a": None if fall is None else fall >= threshold,
                     "margin_a": None if fall is None else _round(fall - threshold),
                     "bpc_L": b, "floor_b3": None if b is None or g3 is None else b < g3,
                     "margin_b3": None if b is None or g3 is None else _round(g3 - b),
                     "gap4": None if b is None or g4 is None else _round(b - g4),
                     "within4": None if b is None or g4 is None else b - g4 <= margin})
    per_variant = []
    for v in [n for n in names if any(r["variant"] == n for r in rows)]:
        rs = [r for r in rows if r["variant"] == v]

        def count(key: str) -> str:
            known = [r[key] for r in rs if r[key] is not None]
            return f"{sum(known)}/{len(known)}" if known else "–"

        falls = [r["fall"] for r in rs if r["fall"] is not None]
        bs = [r["bpc_L"] for r in rs if r["bpc_L"] is not None]
        met = (None if any(r["floor_a"] is None or r["floor_b3"] is None for r in rs)
               else all(r["floor_a"] and r["floor_b3"] for r in rs))
        per_variant.append({"variant": v, "required": _scheme(v) != "none", "n_seeds": len(rs),
                            "floor_a": count("floor_a"), "min_fall": min(falls) if falls else None,
                            "floor_b3": count("floor_b3"), "mean_bpc_L": float(np.mean(bs)) if bs else None,
                            "max_bpc_L": max(bs) if bs else None, "met": met})
    candidates = [p for p in per_variant if p["required"] and p["mean_bpc_L"] is not None]
    best = None
    if candidates and g4 is not None:
        top = min(candidates, key=lambda p: p["mean_bpc_L"])
        gap = top["mean_bpc_L"] - g4
        best = {"variant": top["variant"], "mean_bpc_L": top["mean_bpc_L"], "gap4": _round(gap),
                "within4": gap <= margin,
                "gap4_seeds": [r["gap4"] for r in rows if r["variant"] == top["variant"]]}
    required = [p for p in per_variant if p["required"]]
    complete = {v for v in names if _scheme(v) != "none"} <= {p["variant"] for p in required}
    met = None
    if best is not None and required:
        verdicts = [p["met"] for p in required]
        met = False if False in verdicts or not best["within4"] else (True if complete and None not in verdicts else None)
    variant_cols = ("variant", "required", "n_seeds", "floor_a", "min_fall", "floor_b3", "mean_bpc_L", "met")
    return {**base, "rows": ReportRows(rows, columns=columns), "variants": ReportRows(per_variant, columns=variant_cols),
            "best": best, "met": met, "missing": missing}


# --------------------------------------------------------------------------- orderings


def _check_pair(k: int, pair: object, mode: str) -> tuple[str, str, int, str]:
    if isinstance(pair, (str, bytes)) or not isinstance(pair, (list, tuple)) or len(pair) not in (3, 4):
        raise TypeError(f"pairs[{k}] must be (a, b, eval_len) or (a, b, eval_len, mode), got {pair!r}")
    a, b, n = pair[:3]
    m = pair[3] if len(pair) == 4 else mode
    if not isinstance(a, str) or not isinstance(b, str):
        raise TypeError(f"pairs[{k}]: a and b must be names (str), got {a!r} and {b!r}")
    if a == b:
        raise ValueError(f"pairs[{k}]: a and b must differ, got {a!r} twice")
    n = check_int(f"pairs[{k}] eval_len", n)
    if m not in EVAL_MODES:
        raise ValueError(f"pairs[{k}]: mode must be one of {EVAL_MODES}, got {m!r}")
    return a, b, n, m


def _known_names(grid: Mapping) -> list[str]:
    names = _variants(grid) + [f"ngram-{k}" for k in range(6)]
    ext = grid["protocol"].get("extensions") or {}
    names += [f"zs:{m}" for m in ext.get("zero_shot", [])]
    names += [f"ft:{f[0] if isinstance(f, (list, tuple)) else f}" for f in ext.get("fine_tune", [])]
    return names + sorted({_ext_name(r) for r in grid.get("extension_rows", [])} - set(names))


def _cell_rows(grid: Mapping, name: str, n: int, mode: str, seeds: Sequence[int] | None) -> list[dict]:
    """The per-seed rows of one cell; a count model's one row repeated for each of ``seeds`` (it has no seed)."""
    if name.startswith("ngram-"):
        r = _ngram(grid, int(name.split("-")[1]))
        return [] if r is None or not seeds else [{**r, "seed": s} for s in seeds]
    if name.startswith(("zs:", "ft:")):
        rows = [r for r in grid.get("extension_rows", []) if _ext_name(r) == name]
    else:
        rows = [r for r in grid.get("rows", []) if r.get("variant") == name]
    return [r for r in rows if r.get("eval_len") == n and r.get("mode") == mode and r.get("bpc") is not None]


def orderings(grid: Mapping, pairs: Sequence[Sequence], *, mode: str = "sliding", seed: int = 0) -> ReportRows:
    """Paired differences for the orderings the prose states: "``a`` is below ``b`` at length ``n``".

    Each pair is ``(a, b, n)`` or ``(a, b, n, mode)``. A name is a variant (``"rope"``,
    ``"t5-8"``, ...), a count model (``"ngram-3"``: the same number for every seed, so its
    difference varies only with the scheme's seeds), or a RoPE extension of
    :func:`extension_table` (``"zs:yarn"``, ``"ft:control_at_L"``). Both cells are
    scored on the same characters; :func:`~posenc.book.realtext.paired_bpc` pairs them by
    seed and by block of text.

    The label: ``"indistinguishable"`` when either 95 % interval (t over seeds, bootstrap
    over blocks) contains 0; else ``"holds seed by seed"`` when ``a`` is lower in every
    seed, ``"reversed seed by seed"`` when higher in every seed, ``"not seed by seed"``
    otherwise; ``"not in the results yet"`` when a cell is missing.

    Returns:
        :class:`ReportRows` with ``a``, ``b``, ``eval_len``, ``mode``, ``statement``,
        ``label``, ``diff`` (mean of ``a - b`` over seeds), ``diffs`` (per seed), ``t95``,
        ``blocks_bootstrap95``, ``a_lower``, ``n_seeds``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> t = orderings(_example_grid(), [("rope", "alibi", 8), ("rope", "ngram-3", 8), ("alibi", "t5-8", 16)])
        >>> [r["label"] for r in t]
        ['holds seed by seed', 'holds seed by seed', 'indistinguishable']
    """
    grid = _check_grid(grid)
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise TypeError(f"pairs must be a non-empty list of (a, b, eval_len[, mode]), got {pairs!r}")
    if mode not in EVAL_MODES:
        raise ValueError(f"mode must be one of {EVAL_MODES}, got {mode!r}")
    seed = check_seed("seed", seed)
    checked = [_check_pair(k, p, mode) for k, p in enumerate(pairs)]
    known = _known_names(grid)
    for k, (a, b, _, _) in enumerate(checked):
        for name in (a, b):
            if name not in known:
                raise ValueError(f"pairs[{k}]: {name!r} is not a name of the grid; choose from {known}")
        if a.startswith("ngram-") and b.startswith("ngram-"):
            raise ValueError(f"pairs[{k}]: two count models have no seeds to pair")
    out = []
    for a, b, n, m in checked:
        row = {"a": a, "b": b, "eval_len": n, "mode": m, "statement": f"{a} below {b} at n = {n} ({m})"}
        a_rows = _cell_rows(grid, a, n, m, None)
        b_rows = _cell_rows(grid, b, n, m, None)
        if a.startswith("ngram-"):
            a_rows = _cell_rows(grid, a, n, m, [r["seed"] for r in b_rows])
        if b.startswith("ngram-"):
            b_rows = _cell_rows(grid, b, n, m, [r["seed"] for r in a_rows])
        shared = {r["seed"] for r in a_rows} & {r["seed"] for r in b_rows}
        if not shared:
            gone = [x for x, rs in ((a, a_rows), (b, b_rows)) if not rs] or [a, b]
            out.append({**row, "label": NOT_YET, "diff": None, "diffs": [], "t95": None, "blocks_bootstrap95": None,
                        "a_lower": None, "n_seeds": 0,
                        "note": f"no scored rows for {' and '.join(gone)} at n = {n} ({m})"})
            continue
        d = paired_bpc(a_rows, b_rows, seed=seed)
        by_a = {r["seed"]: r["bpc"] for r in a_rows}
        by_b = {r["seed"]: r["bpc"] for r in b_rows}
        s = d["seeds"]
        if d["indistinguishable"]:
            label = INDISTINGUISHABLE
        elif s["a_lower"] == s["n"]:
            label = HOLDS
        elif s["a_lower"] == 0 and all(by_a[x] > by_b[x] for x in d["shared_seeds"]):
            label = REVERSED
        else:
            label = MIXED
        out.append({**row, "label": label, "diff": s["mean"], "diffs": [by_a[x] - by_b[x] for x in d["shared_seeds"]],
                    "t95": _interval(s["t95"]),
                    "blocks_bootstrap95": None if d["blocks"] is None else _interval(d["blocks"]["bootstrap"]),
                    "a_lower": s["a_lower"], "n_seeds": s["n"]})
    return ReportRows(out, columns=("statement", "label", "diff", "t95", "blocks_bootstrap95", "a_lower", "n_seeds"))


# --------------------------------------------------------------------------- loss by position and its largest step


def _zero_shot(grid: Mapping) -> list[str]:
    """The zero-shot extensions of the grid: those its ``extension_runs`` hold, then the protocol's."""
    return list(dict.fromkeys([r["zero_shot"] for r in grid.get("extension_runs", []) if r.get("zero_shot")]
                              + list((grid["protocol"].get("extensions") or {}).get("zero_shot", []))))


def _lbp_name(grid: Mapping, name: object, arg: str = "name") -> str:
    """``name`` checked: a variant of the grid or ``"zs:<method>"``, a zero-shot extension of it."""
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a variant ('rope') or a zero-shot extension ('zs:ntk'), got {name!r}")
    known = _variants(grid) + [f"zs:{m}" for m in _zero_shot(grid)]
    if name not in known:
        raise ValueError(f"{arg}: {name!r} is not a variant or zero-shot extension of the grid; choose from {known}")
    return name


def _lbp_runs(grid: Mapping, name: str) -> list[Mapping]:
    """The runs of ``name`` (checked) that hold a loss by position."""
    if name.startswith("zs:"):
        runs = [r for r in grid.get("extension_runs", []) if r.get("zero_shot") == name[3:]]
    else:
        runs = [r for r in grid.get("runs", []) if r.get("variant") == name]
    return [r for r in runs if isinstance(r.get("loss_by_position"), Mapping)]


def _mean_curve(curves: Sequence[Mapping]) -> tuple[int, int, np.ndarray, int]:
    """``(bin, length, mean bpc per bin, seeds averaged)`` over the curves as long as the longest."""
    size = max(len(c["bpc"]) for c in curves)
    same = [c for c in curves if len(c["bpc"]) == size]
    return int(same[0]["bin"]), int(same[0]["length"]), np.mean([c["bpc"] for c in same], axis=0), len(same)


def _predicted_break(grid: Mapping, name: str) -> float | None:
    """Where the mechanism puts ``name``'s break (distance), ``None`` where it predicts none.

    RoPE: :func:`~posenc.book.realtext.rope_break`; a T5 variant: its first untrained
    distance; ``"zs:pi"``, ``"zs:ntk"``, ``"zs:yarn"`` (and ``yarn_no_temperature``): the
    half-turn rule under the frequencies scaled by the factor of its runs.
    """
    cfg = _config(grid)
    L, head_dim = int(cfg["train_len"]), int(cfg["d_model"]) // int(cfg["n_heads"])
    if name == "rope":
        return rope_break(L, head_dim)[1]
    if _scheme(name) == "t5":
        first = t5_first_untrained(L, int(name.split("-")[1]))
        return None if first is None else float(first)
    if name.startswith("zs:"):
        from ..rope.scaling import extension

        base = name[3:].replace("_no_temperature", "")
        if base in ("pi", "ntk", "yarn"):
            factor = next((r.get("factor") for r in _lbp_runs(grid, name)), 8)
            return rope_break(L, head_dim, scaling=extension(base, factor, L))[1]
    return None


def loss_by_position(grid: Mapping, name: str) -> dict:
    """One variant's (or zero-shot extension's) loss by position in windows of ``8L``, the mean over its seeds.

    ``name`` is a variant of the grid (``"rope"``, ``"t5-128"``, ...) read from the main
    ``runs``, or ``"zs:<method>"`` (``"zs:ntk"``) read from the ``extension_runs``. Bin ``i``
    holds positions ``bin * i`` to ``bin * i + bin - 1``; the mean is over the seeds whose
    curve is as long as the longest (the learned table's stops at ``L``).

    Returns:
        ``{"name", "bin", "length" (the window), "bpc" (array, shape (length // bin,), or
        None), "n_seeds", "missing"}``; ``missing`` is ``None`` or a sentence saying why
        there is no curve yet.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> c = loss_by_position(_example_grid(), "rope")
        >>> c["bin"], c["length"], c["bpc"].shape, c["n_seeds"]
        (2, 64, (32,), 3)
        >>> [round(float(x), 1) for x in c["bpc"][3:7]]
        [2.6, 2.6, 4.6, 4.6]
    """
    grid = _check_grid(grid)
    name = _lbp_name(grid, name)
    runs = _lbp_runs(grid, name)
    if not runs:
        section = "extension_runs" if name.startswith("zs:") else "runs"
        missing = _missing(grid, section) or f"no run of {name} has a loss by position"
        return {"name": name, "bin": None, "length": None, "bpc": None, "n_seeds": 0, "missing": missing}
    b, length, mean, n = _mean_curve([r["loss_by_position"] for r in runs])
    return {"name": name, "bin": b, "length": length, "bpc": mean, "n_seeds": n, "missing": None}


def largest_step(grid: Mapping, name: str, *, late: int = 1) -> dict:
    """The largest step up between neighbouring bins of :func:`loss_by_position`, judged against the predicted break.

    The step into bin ``j`` is ``bpc[j] - bpc[j - 1]``; the largest one (the first, on a
    tie) says where the loss jumps. The prediction is the mechanism's break distance ``d``
    (RoPE's half-turn, :func:`~posenc.book.realtext.rope_break`; a T5 variant's first
    untrained bucket; a zero-shot extension's half-turn under its scaled frequencies).
    Position ``p`` reaches ``p`` characters back, so a break at ``d`` first shows at
    position ``floor(d) + 1``, in ``d``'s bin or the next one. The rule: the step holds
    when it enters ``d``'s bin or one of the ``late`` bins after it (``late=0`` asks for
    ``d``'s bin itself); otherwise it is refuted, so many bins early or late.

    Returns:
        ``{"name", "bin", "into" ((first, last) position of the bin the step enters),
        "step" (bits), "predicted" (``d`` or None), "expected" ((first, last) position
        the rule accepts, clipped to the window when it starts inside it, or None),
        "bins_off" (0 when it holds, negative when early, positive when late, None
        without a prediction), "holds" (bool or None),
        "verdict" ("holds", "refuted: 2 bins early", ..., "no prediction"), "missing"}``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> g = _example_grid()
        >>> s = largest_step(g, "rope")
        >>> s["into"], round(s["step"], 2), round(s["predicted"], 1), s["expected"], s["verdict"]
        ((10, 11), 2.0, 9.9, (8, 11), 'holds')
        >>> largest_step(g, "zs:ntk", late=0)["verdict"]
        'refuted: 1 bin late'
        >>> largest_step(g, "alibi")["verdict"]
        'no prediction'
    """
    grid = _check_grid(grid)
    name = _lbp_name(grid, name)
    late = check_int("late", late, minimum=0)
    curve = loss_by_position(grid, name)
    out = {"name": name, "bin": curve["bin"], "into": None, "step": None, "predicted": _predicted_break(grid, name),
           "expected": None, "bins_off": None, "holds": None, "verdict": None, "missing": curve["missing"]}
    if curve["missing"] is None and len(curve["bpc"]) < 2:
        out["missing"] = f"the loss by position of {name} has one bin: no step"
    if out["missing"] is not None:
        out["verdict"] = out["missing"]
        return out
    b, steps = curve["bin"], np.diff(curve["bpc"])
    j = int(np.argmax(steps)) + 1  # the bin the largest step enters
    out.update(into=(b * j, b * j + b - 1), step=float(steps.max()))
    d = out["predicted"]
    if d is None:
        out["verdict"] = "no prediction"
        return out
    first = int(d // b)
    hi, last = b * (first + late) + b - 1, b * len(curve["bpc"]) - 1
    # clipped to the window's last position when the predicted bin lies inside it
    out["expected"] = (b * first, min(hi, last) if b * first <= last else hi)
    off = j - first if j < first else max(0, j - first - late)
    plural = "s" if abs(off) != 1 else ""
    out.update(bins_off=off, holds=off == 0,
               verdict="holds" if off == 0 else f"refuted: {abs(off)} bin{plural} {'early' if off < 0 else 'late'}")
    return out


def first_gap(grid: Mapping, name: str, other: str, *, gap: float = 0.1) -> dict:
    """The first bin from position ``L`` on where ``name``'s loss by position exceeds ``other``'s by more than ``gap``.

    Both curves are :func:`loss_by_position` (means over seeds, in windows of ``8L``).
    Where :func:`largest_step` says where a variant's loss *jumps*, this says where it
    starts to *pay* against another variant, in bits per character.

    Returns:
        ``{"name", "other", "gap", "bin", "into" ((first, last) position of the bin, or
        None when the gap is never exceeded), "difference" (bits in that bin, or None),
        "missing"}``.

    Example:
        >>> from posenc.book.realtext_report import _example_grid
        >>> g = first_gap(_example_grid(), "rope", "alibi")
        >>> g["into"], round(g["difference"], 1)
        ((10, 11), 2.0)
        >>> first_gap(_example_grid(), "alibi", "rope")["into"] is None
        True
    """
    grid = _check_grid(grid)
    name, other = _lbp_name(grid, name), _lbp_name(grid, other, "other")
    gap = check_real("gap", gap, low=0.0)
    a, b = loss_by_position(grid, name), loss_by_position(grid, other)
    out = {"name": a["name"], "other": b["name"], "gap": gap, "bin": a["bin"], "into": None, "difference": None,
           "missing": a["missing"] or b["missing"]}
    if out["missing"] is None and (a["bin"], a["length"]) != (b["bin"], b["length"]):
        out["missing"] = f"{name} and {other} have losses by position of different shapes"
    if out["missing"] is not None:
        return out
    width, L = a["bin"], _config(grid)["train_len"]
    for i in range(L // width, len(a["bpc"])):
        diff = float(a["bpc"][i] - b["bpc"][i])
        if diff > gap:
            out.update(into=(width * i, width * i + width - 1), difference=diff)
            break
    return out


# --------------------------------------------------------------------------- figures


def _style(variant: str, L: int) -> dict:
    from .plotting import SCHEME_STYLES

    scheme = _scheme(variant)
    style = dict(SCHEME_STYLES.get(scheme, {}))
    if scheme == "t5" and "-" in variant and int(variant.split("-")[1]) > L:
        style["linestyle"] = "--"  # T5 at the book's default distance: its far buckets untrained
    return style


def _note(ax, text: str) -> None:
    # wrapped by hand: matplotlib's wrap=True wraps at the figure's edge, not the panel's
    width = max(20, int(ax.get_position().width * ax.figure.get_figwidth() * 72 / (0.6 * 9)))
    ax.text(0.5, 0.5, textwrap.fill(text, width), transform=ax.transAxes, ha="center", va="center", fontsize=9)


def plot_context_use(ax, grid: Mapping, *, variants: Sequence[str] | None = None) -> dict:
    """Each variant's context-use curve (mean over seeds, seeds as points), ``k`` on a log2 axis, with the count models.

    The count models that see ``k = 1 .. 5`` characters, scored on the same characters
    (every 4th), are drawn as black crosses joined by a thin line: a curve below them uses
    its context better than counting does. The dotted lines mark ``L/2`` and ``L``,
    between which floor (a) asks the curve to fall.

    Returns:
        ``{"drawn": [variants], "missing": str | None, "alt": str}``; ``alt`` describes
        the figure with its numbers (for the figure's alt text).

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc.book.realtext_report import _example_grid
        >>> fig, ax = plt.subplots()
        >>> plot_context_use(ax, _example_grid())["drawn"]
        ['rope', 'alibi']
        >>> plt.close(fig)
    """
    check_axes("ax", ax)
    grid = _check_grid(grid)
    names = _check_variants("variants", variants, grid)
    L = int(_config(grid)["train_len"])
    table = context_use_table(grid, variants=names)
    counts = [(r["context"], r["bpc_every"]) for r in baseline_table(grid)
              if 1 <= r["context"] <= 5 and r["bpc_every"] is not None] if grid.get("baselines") else []
    drawn = []
    for v in names:
        rs = [r for r in table if r["variant"] == v]
        if not rs:
            continue
        ks = [r["context"] for r in rs]
        style = _style(v, L)
        ax.plot(ks, [r["mean"] for r in rs], label=v, linewidth=1.3, markersize=5, **style)
        for r in rs:
            ax.scatter([r["context"]] * len(r["seeds"]), r["seeds"], s=8, color=style.get("color"), alpha=0.4, lw=0)
        drawn.append(v)
    if counts:
        ax.plot([k for k, _ in counts], [b for _, b in counts], color="black", linewidth=0.8, marker="x",
                markersize=6, label="count model")
    ticks = sorted({r["context"] for r in table} | {k for k, _ in counts})
    ax.set_xscale("log", base=2)
    if ticks:
        ax.set_xticks(ticks, [str(k) for k in ticks])
        ax.minorticks_off()
    for k in (L // 2, L):
        ax.axvline(k, color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("characters of context k")
    ax.set_ylabel("bits per character")
    missing = table.missing if not drawn else None
    if missing:
        _note(ax, missing)
        alt = f"An empty panel: the context-use curves are {missing}."
    else:
        at_L = sorted(((r["mean"], r["variant"]) for r in table if r["context"] == L and r["variant"] in drawn))
        falls = []
        for v in drawn:
            m = {r["context"]: r["mean"] for r in table if r["variant"] == v}
            if L // 2 in m and L in m:
                falls.append(f"{v} {m[L // 2] - m[L]:+.3f}")
        alt = (f"Bits per character against the characters of context k ({ticks[0]} to {ticks[-1]}, log axis), "
               f"one line per scheme ({', '.join(drawn)}), seeds as dots")
        if at_L:
            alt += f"; at k = {L} the lowest is {at_L[0][1]} at {at_L[0][0]:.2f} and the highest {at_L[-1][1]} at {at_L[-1][0]:.2f}"
        if falls:
            alt += f"; the fall from k = {L // 2} to {L}: {', '.join(falls)} bits"
        if counts:
            alt += (f". Black crosses: the count models, from {counts[0][1]:.2f} at k = {counts[0][0]} "
                    f"to {counts[-1][1]:.2f} at k = {counts[-1][0]}")
        alt += "."
    return {"drawn": drawn, "missing": missing, "alt": alt}


def _predicted_breaks(grid: Mapping, names: Sequence[str]) -> dict[str, float | None]:
    """:func:`_predicted_break` of the variants that have a mechanism (RoPE, T5)."""
    return {v: _predicted_break(grid, v) for v in names if v == "rope" or _scheme(v) == "t5"}


def plot_loss_by_position(ax, grid: Mapping, *, variants: Sequence[str] | None = None) -> dict:
    """Loss by position in windows of ``8L`` (mean over seeds), with the predicted breaks drawn.

    Position ``p`` predicts its next character from ``p + 1`` characters, the farthest
    ``p`` positions back, so a scheme that fails beyond a distance ``d`` rises from
    position ``d`` on. Drawn as vertical lines in the scheme's colour: RoPE's break
    (:func:`~posenc.book.realtext.rope_break`, the first pair not yet past half a turn
    within ``L`` reaching it) and each T5 variant's first untrained bucket
    (:func:`~posenc.book.realtext.t5_first_untrained`; none for T5 at maximum distance
    ``L``), labelled for the legend. The dashed black line marks ``L``.

    Returns:
        ``{"drawn": [variants], "predicted": {variant: distance or None}, "missing", "alt"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc.book.realtext_report import _example_grid
        >>> fig, ax = plt.subplots()
        >>> out = plot_loss_by_position(ax, _example_grid())
        >>> out["drawn"], round(out["predicted"]["rope"], 1)
        (['rope', 'alibi'], 9.9)
        >>> plt.close(fig)
    """
    check_axes("ax", ax)
    grid = _check_grid(grid)
    names = _check_variants("variants", variants, grid)
    L = int(_config(grid)["train_len"])
    predicted = _predicted_breaks(grid, names)
    missing = _missing(grid, "runs")
    drawn, ends = [], []
    for v in names:
        curves = [r["loss_by_position"] for r in grid.get("runs", [])
                  if r.get("variant") == v and isinstance(r.get("loss_by_position"), Mapping)]
        if not curves:
            continue
        b, length, mean, _ = _mean_curve(curves)
        x = b * np.arange(len(mean)) + (b - 1) / 2
        style = _style(v, L)
        style.pop("marker", None)
        ax.plot(x, mean, label=v, linewidth=1.3, **style)
        drawn.append(v)
        ends.append((v, float(mean[: max(1, L // b)].mean()), float(mean[-1]), length))
    for v, d in predicted.items():
        if d is not None and v in drawn:
            ax.axvline(d, color=_style(v, L).get("color", "gray"), linewidth=1.0, linestyle=":",
                       label=f"{v}: predicted break")
    ax.axvline(L - 0.5, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("position in the window")
    ax.set_ylabel("bits per character")
    if not drawn:
        missing = missing or "no run of these variants has a loss by position"
        _note(ax, missing)
        return {"drawn": [], "predicted": predicted, "missing": missing,
                "alt": f"An empty panel: the loss by position is {missing}."}
    lines = [f"{v} ({'none: every bucket trained' if d is None else f'{d:.1f}'})" for v, d in predicted.items()
             if v in drawn]
    alt = (f"Bits per character at each position of windows of {max(e[3] for e in ends)} characters, one line per "
           f"scheme; positions 0 to {L - 1} were seen in training (dashed line). "
           + "; ".join(f"{v} {a:.2f} within L, {z:.2f} at the last position" for v, a, z, _ in ends) + ".")
    if lines:
        alt += " Dotted lines: the predicted breaks, " + ", ".join(lines) + "."
    return {"drawn": drawn, "predicted": predicted, "missing": None, "alt": alt}


def plot_break_by_step(ax, grid: Mapping, *, seed: int = 0, variants: Sequence[str] | None = None) -> dict:
    """The break against training step: validation bits per character at ``8L`` minus at ``L``, one seed per scheme.

    From each run's validation ``history`` (``val_8L``, the first 4,096 validation
    characters in windows of ``8L``, against the validation loss at ``L``); the run's best
    step (the weights kept) is marked with a dot. A line that climbs with training is a
    break that grows with the budget; the learned table (no ``8L``) has none.

    Returns:
        ``{"drawn": [variants], "gap": {variant: the gap at the best step}, "missing", "alt"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc.book.realtext_report import _example_grid
        >>> fig, ax = plt.subplots()
        >>> out = plot_break_by_step(ax, _example_grid(), seed=0)
        >>> out["drawn"], out["gap"]["rope"]
        (['rope', 'alibi'], 2.5)
        >>> plt.close(fig)
    """
    check_axes("ax", ax)
    grid = _check_grid(grid)
    seed = check_seed("seed", seed)
    names = _check_variants("variants", variants, grid)
    L = int(_config(grid)["train_len"])
    drawn: list[str] = []
    gap: dict[str, float] = {}
    for v in names:
        run = next((r for r in grid.get("runs", []) if r.get("variant") == v and r.get("seed") == seed), None)
        if run is None:
            continue
        pts = [(h[0], h[2]["val_8L"] - h[1]) for h in run.get("history", [])
               if len(h) > 2 and isinstance(h[2], Mapping) and h[2].get("val_8L") is not None]
        if not pts:
            continue
        style = _style(v, L)
        style.pop("marker", None)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=v, linewidth=1.3, **style)
        best = dict(pts).get(run.get("best_step"))
        if best is not None:
            ax.plot([run["best_step"]], [best], "o", color=style.get("color"), markersize=4)
            gap[v] = round(best, 4)
        drawn.append(v)
    ax.axhline(0, color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"validation bpc at {8 * L} minus at {L}")
    if not drawn:
        missing = _missing(grid, "runs") or f"no run of seed {seed} has a validation history at 8L"
        _note(ax, missing)
        return {"drawn": [], "gap": {}, "missing": missing, "alt": f"An empty panel: the break by step is {missing}."}
    alt = (f"The validation bits per character at {8 * L} characters minus that at {L}, against the training step, "
           f"seed {seed}, one line per scheme; at the kept step: "
           + ", ".join(f"{v} {g:+.2f}" for v, g in gap.items()) + ".")
    return {"drawn": drawn, "gap": gap, "missing": None, "alt": alt}


#: colour and line of each zero-shot extension in :func:`plot_extension_positions`
_EXT_STYLES = {"pi": {"color": "#1f77b4"}, "ntk": {"color": "#ff7f0e"}, "yarn": {"color": "#2ca02c"},
               "yarn_no_temperature": {"color": "#2ca02c", "linestyle": "--"}}


def plot_extension_positions(ax, grid: Mapping, *, methods: Sequence[str] | None = None) -> dict:
    """RoPE's zero-shot extensions by position at ``8L`` (mean over seeds), with each one's predicted break.

    One line per method of the ``ext`` units' ``extension_runs`` (scaled for a factor of
    8), plain RoPE (the main runs) in grey. The predicted break of a method is
    :func:`~posenc.book.realtext.rope_break` under its scaled frequencies (the pair that
    never turned past half a turn within ``L``, now slower): NTK-aware moves it by
    ``s^(2/(d-2))`` per pair index only, a few characters; PI and YaRN divide that pair's
    frequency by ``s`` and move it past the window. A break inside the window is drawn
    as a dotted line in the method's colour; ``predicted`` holds every method's distance.

    Returns:
        ``{"drawn": [methods], "predicted": {method: distance}, "window": int, "missing", "alt"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc.book.realtext_report import _example_grid
        >>> fig, ax = plt.subplots()
        >>> out = plot_extension_positions(ax, _example_grid())
        >>> out["drawn"], round(out["predicted"]["ntk"], 1), round(out["predicted"]["yarn"], 1)
        (['ntk', 'yarn'], 13.4, 79.5)
        >>> plt.close(fig)
    """
    check_axes("ax", ax)
    grid = _check_grid(grid)
    runs = [r for r in grid.get("extension_runs", []) if r.get("zero_shot") and isinstance(r.get("loss_by_position"), Mapping)]
    known = _zero_shot(grid)
    chosen = known if methods is None else list(check_names("methods", methods))
    bad = [m for m in chosen if m not in known]
    if bad:
        raise ValueError(f"methods: {bad[0]!r} is not a zero-shot extension of the grid; choose from {known}")
    cfg = _config(grid)
    L = int(cfg["train_len"])
    predicted: dict[str, float] = {}
    drawn: list[str] = []
    window = None
    plain = [r["loss_by_position"] for r in grid.get("runs", []) if r.get("variant") == "rope"
             and isinstance(r.get("loss_by_position"), Mapping)]
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, lbps in [("plain RoPE", plain)] + [(m, [r["loss_by_position"] for r in runs if r["zero_shot"] == m])
                                                 for m in chosen]:
        if not lbps:
            continue
        b, window, mean, _ = _mean_curve(lbps)
        curves[name] = (b * np.arange(len(mean)) + (b - 1) / 2, mean)
    factor = next((r.get("factor") for r in runs), 8)
    for m in chosen:
        d = _predicted_break(grid, f"zs:{m}")
        if d is not None:
            predicted[m] = d
    if "plain RoPE" in curves:
        x, y = curves["plain RoPE"]
        ax.plot(x, y, color="0.6", linewidth=1.3, label="plain RoPE")
    for m in chosen:
        if m not in curves:
            continue
        x, y = curves[m]
        style = _EXT_STYLES.get(m, {})
        ax.plot(x, y, linewidth=1.3, label=m, **style)
        d = predicted.get(m)
        if d is not None and window is not None and d < window:
            ax.axvline(d, color=style.get("color", "gray"), linewidth=1.0, linestyle=":", label=f"{m}: predicted break")
        drawn.append(m)
    ax.axvline(L - 0.5, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("position in the window")
    ax.set_ylabel("bits per character")
    if not drawn:
        missing = _missing(grid, "extension_runs") or "no zero-shot extension run of these methods"
        _note(ax, missing)
        return {"drawn": [], "predicted": predicted, "window": window, "missing": missing,
                "alt": f"An empty panel: the extensions by position are {missing}."}
    inside = [f"{m} at {predicted[m]:.1f}" for m in drawn if m in predicted and predicted[m] < window]
    outside = [m for m in drawn if m in predicted and predicted[m] >= window]
    alt = (f"Bits per character at each position of windows of {window} characters for RoPE scaled by a factor "
           f"{factor:g} without training, one line per method ({', '.join(drawn)})"
           + (", plain RoPE in grey" if "plain RoPE" in curves else "") + "; "
           + "; ".join(f"{m} {curves[m][1][: max(1, L // 2)].mean():.2f} at the first positions, "
                       f"{curves[m][1][-1]:.2f} at the last" for m in drawn) + ".")
    if inside:
        alt += " Dotted lines: the predicted breaks, " + ", ".join(inside) + "."
    if outside:
        alt += f" Predicted beyond the window: {', '.join(outside)}."
    return {"drawn": drawn, "predicted": predicted, "window": window, "missing": None, "alt": alt}


# --------------------------------------------------------------------------- a small grid for the examples


def _example_grid() -> dict:
    """A made-up grid with the real schema (two variants, three seeds, two blocks), for the docstring examples."""
    L, blocks = 8, 2
    ngram = [4.850, 3.605, 3.049, 2.706, 2.588, 2.643]
    grid: dict = {"protocol": {"config": {"train_len": L, "d_model": 64, "n_heads": 4},
                               "variants": [["rope", None], ["alibi", None], ["t5", 8]],
                               "extensions": {"zero_shot": ["ntk", "yarn"], "fine_tune": [["control_at_L", 1], ["yarn", 4]]}},
                  "units": [{"key": "baselines"}],
                  "baselines": [{"model": "ngram", "context": k, "eval_set": es, "bpc": b + (0.01 if es != "all" else 0),
                                 "block_bpc": [b - 0.05, b + 0.05]} for k, b in enumerate(ngram) for es in ("all", "every_4")],
                  "rows": [], "context_use": [], "runs": [], "copy_probe": [], "extension_rows": [], "extension_runs": []}
    level = {"rope": 2.56, "alibi": 2.66}
    curve = {"rope": [3.66, 3.12, 2.60, 2.57], "alibi": [3.67, 3.13, 2.70, 2.74]}
    for v in level:
        for s in range(3):
            base = {"variant": v, "scheme": v, "t5_max_distance": None, "seed": s, "lr": 4e-3}
            for n in (L, 2 * L):
                for mode in EVAL_MODES:
                    b = level[v] + 0.01 * (s - 1) + (0.0 if v == "alibi" or n == L else 1.0)
                    grid["rows"].append({**base, "train_len": L, "eval_len": n, "mode": mode, "bpc": b,
                                         "block_bpc": [b - 0.1, b + 0.1][:blocks]})
            for k, c in zip((1, 2, 4, 8), curve[v]):
                b = c + 0.01 * (s - 1)
                grid["context_use"].append({**base, "context": k, "bpc": b, "block_bpc": [b - 0.1, b + 0.1]})
            grid["runs"].append({**base, "best_step": 500, "best_val_bpc": 2.6, "stop": "patience", "stop_step": 1500,
                                 "steps_run": 1500, "train_chars": 1500 * 1024,
                                 "history": [[250, 2.9, {"val_8L": 3.1 + (v == "rope")}],
                                             [500, 2.6, {"val_8L": 2.8 + 2.3 * (v == "rope")}]],
                                 "loss_by_position": {"length": 8 * L, "bin": 2,
                                                      "bpc": [2.6] * 5 + [2.6 + 2.0 * (v == "rope")] * 27}})
            for d, gain in ((3, 0.2), (11, 0.0)):
                grid["copy_probe"].append({**base, "trained_on": "text_with_repeats", "condition": "positive_control",
                                           "distance": d, "gain": gain, "gain_bootstrap95": [gain - 0.05, gain + 0.05],
                                           "copy_bpc": 2.5, "control_bpc": 2.5 + gain, "length": d + 5})
        grid["copy_probe"] = [r for r in grid["copy_probe"] if r["seed"] == 0 or r["condition"] != "positive_control"]
    # the t5-8 variant: 2L sliding only, indistinguishable from alibi (one seed above, one below)
    for s, off in ((0, -0.02), (1, 0.03), (2, 0.0)):
        b = level["alibi"] + 0.01 * (s - 1) + off
        grid["rows"].append({"variant": "t5-8", "scheme": "t5", "t5_max_distance": 8, "seed": s, "train_len": L,
                             "eval_len": 2 * L, "mode": "sliding", "bpc": b, "block_bpc": [b - 0.1, b + 0.1]})
    for s in range(3):
        for name, ft, b in (("ntk", None, 3.0), ("yarn", None, 2.9), ("none", "control_at_L", 2.55), ("yarn", "yarn", 2.6)):
            b += 0.01 * s
            grid["extension_rows"].append({"variant": "rope", "scheme": "rope", "seed": s, "extension": name,
                                           "temperature": name == "yarn", "finetune": ft, "train_len": L,
                                           "eval_len": 4 * L, "mode": "sliding", "bpc": b, "block_bpc": [b - 0.1, b + 0.1]})
        grid["extension_runs"] += [{"seed": s, "zero_shot": m, "factor": 8, "loss_by_position": {
            "length": 8 * L, "bin": 2, "bpc": [2.6] * 7 + [2.6 + (m == "ntk")] * 25}} for m in ("ntk", "yarn")]
    return grid
