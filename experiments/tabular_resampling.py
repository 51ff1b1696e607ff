"""Chapter 5's experiments at full size: repeated splits, early stopping, a sigma sweep.

    python experiments/tabular_resampling.py diabetes    # 20 random splits of the diabetes table
    python experiments/tabular_resampling.py synthetic   # sine, chirp and step targets, 10 draws each
    python experiments/tabular_resampling.py sigma       # the frequency scale sigma of periodic embeddings
    python experiments/tabular_resampling.py identity    # the feature-identity experiment, 10 seeds
    python experiments/tabular_resampling.py diabetes --quick   # a smoke run, nothing written

Splits are independent, so a machine with many cores can run them side by side and
merge the pieces afterwards (this is how the saved results were made):

    python experiments/tabular_resampling.py synthetic --first 2 --last 2 --out /tmp/s2.json
    python experiments/tabular_resampling.py merge synthetic /tmp/s*.json

Each part writes ``posenc/book/data/tabular_<part>.json`` with
:func:`posenc.book.results.write_results`: one row per (task, split, model, setting)
with the validation, test and training R^2 of the early-stopped model, the step it was
taken at and the step training stopped. The script is resumable: rows already in the
file are skipped, and the file is rewritten after every split, so an interrupted run
loses at most one split.

The protocol is the same for every model. A split (or a fresh draw of the synthetic
data) gives training and test rows; the last 20 % of the training rows are a
validation part. Every network is trained in float64 with AdamW, full batch, for at
most ``--steps`` steps, scored on the validation part every ``eval_every`` steps, and
stopped after ``patience`` scores without improvement; the best parameters are kept.
This is done for each learning rate of the grid, and the chapter picks, per split and
model, the learning rate with the best validation R^2 (never the test R^2). Ridge
regression picks its ``alpha`` and gradient boosting its number of trees on the same
validation part. Test rows are only scored.

Everything is seeded (split ``i`` uses seed ``i`` for the data, the initialisation and
the boosting subsample) and runs on one thread, so a re-run reproduces the file; in
float64 the last-bit differences between CPUs stay far below the 3 or 4 decimals kept.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

from posenc.book import results, tabular
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book

HERE = Path(__file__).resolve().parent
DIGITS = 5


def _row(task: str, split: int, model: str, setting: dict, scores: dict) -> dict:
    row = {"task": task, "split": split, "model": model, **setting}
    for key in ("val_r2", "test_r2", "train_r2"):
        if key in scores:
            row[key] = round(float(scores[key]), DIGITS)
    for key in ("best_step", "stopped_step"):
        if key in scores:
            row[key] = int(scores[key])
    if "curve" in scores:
        row["curve"] = {k: [round(float(v), 4) for v in vals] for k, vals in scores["curve"].items()}
    return row


def _key(row: dict) -> tuple:
    return (row["task"], row["split"], row["model"], row.get("lr"), row.get("sigma"))


PARTS = {
    # part: (tasks, splits, learning rates, max steps, eval_every, patience, validation fraction)
    # tuned per split: log-uniform candidates (learning rate, sigma, bins) on a validation third, then a refit
    "diabetes": dict(tasks=["diabetes"], splits=20, candidates=6, steps=2000, eval_every=10, patience=15,
                     validation=111, space={"lr": (3e-4, 3e-2), "sigma": (0.01, 100.0), "n_bins": (2, 64)}),
    "synthetic": dict(tasks=["sine", "chirp", "step"], splits=10, lrs=[3e-3, 1e-2], steps=3000, eval_every=25, patience=20),
    "sigma": dict(tasks=["sine", "chirp"], splits=5, lrs=[1e-2], steps=3000, eval_every=25, patience=20),
    # the demonstration of section sec-tabular-invariance: a fixed recipe (no validation part), 10 seeds
    "identity": dict(tasks=["identity"], splits=10, lrs=[1e-2], steps=100, eval_every=100, patience=None),
}


def identity_configs() -> dict:
    """The four two-block transformers of the feature-identity experiment (chapter 5)."""
    return {name: tabular.identity_model(name) for name in tabular.IDENTITY_MODELS}


SIGMAS = [0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
DIABETES_SIGMA, DIABETES_BINS = 0.1, 8
SYNTHETIC_SIGMA, SYNTHETIC_BINS = 1.0, 16


def validation_rows(data: tabular.TabularSplit) -> int:
    return int(round(0.2 * data.x_train.shape[0]))


# which hyperparameters each network tunes (every one tunes its learning rate)
TUNED = {
    "linear (FT)": ("lr",),
    "periodic (PLR)": ("lr", "sigma"),
    "piecewise-linear (Q-L)": ("lr", "n_bins"),
    "MLP": ("lr",),
    "MLP-PLR": ("lr", "sigma"),
}


def _tuned_key(row: dict) -> tuple:
    return (row["task"], row["split"], row["model"], row.get("stage"), row.get("candidate"))


def run_tuned_split(split: int, cfg: dict, done: set, save) -> None:
    """One diabetes split: per network, ``candidates`` log-uniform settings early-stopped on the last
    ``validation`` training rows; the best one (validation R^2) is refitted on all training rows for
    its best number of steps and scored on the test rows. The baselines are tuned the same way."""
    data = tabular.grid_split("diabetes", split)
    n_val = cfg["validation"]
    fit_rows = tabular.validation_split(data, n_val)
    candidates = tabular.log_uniform_candidates(cfg["space"], cfg["candidates"], seed=split, integer=["n_bins"])
    fit = dict(validation=n_val, steps=cfg["steps"], eval_every=cfg["eval_every"], patience=cfg["patience"])
    for name, tuned in TUNED.items():
        rows = []
        for i, cand in enumerate(candidates):
            setting = {k: cand[k] for k in tuned}
            row = {"task": "diabetes", "split": split, "model": name, "stage": "search", "candidate": i, **setting}
            if _tuned_key(row) in done:
                continue
            configs = tabular.value_embedding_configs(
                fit_rows, sigma=setting.get("sigma", 1.0), n_bins=setting.get("n_bins", 8)
            )
            t0 = time.perf_counter()
            scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], **fit)
            save(_row("diabetes", split, name, {"stage": "search", "candidate": i, **setting}, scores)
                 | {"seconds": round(time.perf_counter() - t0, 1)})
        refit = {"task": "diabetes", "split": split, "model": name, "stage": "refit", "candidate": None}
        if _tuned_key(refit) in done:
            continue
        searched = [r for r in save.rows if r["split"] == split and r["model"] == name and r.get("stage") == "search"]
        best = max(searched, key=lambda r: r["val_r2"])
        setting = {k: best[k] for k in tuned}
        # bins of the refit come from all training rows
        configs = tabular.value_embedding_configs(data, sigma=setting.get("sigma", 1.0), n_bins=setting.get("n_bins", 8))
        scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], steps=max(best["best_step"], 1))
        save(_row("diabetes", split, name, {"stage": "refit", "chosen": best["candidate"], **setting}, scores)
             | {"steps": best["best_step"], "val_r2": best["val_r2"]})
    if ("diabetes", split, "ridge", "refit", None) not in done:
        for name, values in tabular.tuned_baselines(data, validation=n_val, seed=split).items():
            save({"task": "diabetes", "split": split, "model": name, "stage": "refit",
                  **{k: (round(float(v), DIGITS) if k.endswith("r2") else v) for k, v in values.items()}})


def run_split(part: str, task: str, split: int, cfg: dict, done: set, quick: bool) -> list[dict]:
    if part == "identity":
        data = tabular.feature_identity_task(n_train=256, n_test=512, seed=0)  # one data set, the seed varies
        rows = []
        for name, make in identity_configs().items():
            if (task, split, name, cfg["lrs"][0], None) not in done:
                scores = tabular.fit_regressor(make, data, seed=split, steps=cfg["steps"], lr=cfg["lrs"][0])
                rows.append(_row(task, split, name, {"lr": cfg["lrs"][0]}, scores))
        return rows
    data = tabular.grid_split(task, split)
    n_val = validation_rows(data)
    fit = dict(validation=n_val, steps=cfg["steps"], eval_every=cfg["eval_every"], patience=cfg["patience"])
    rows = []
    if part == "sigma":
        settings = [(name, {"lr": lr, "sigma": sigma}) for name in ["periodic (PLR)", "MLP-PLR"]
                    for sigma in SIGMAS for lr in cfg["lrs"]]
    else:
        settings = [(name, {"lr": lr}) for name in ["linear (FT)", "periodic (PLR)", "piecewise-linear (Q-L)", "MLP", "MLP-PLR"]
                    for lr in cfg["lrs"]]
    sigma0, bins0 = (DIABETES_SIGMA, DIABETES_BINS) if task == "diabetes" else (SYNTHETIC_SIGMA, SYNTHETIC_BINS)
    # bins from the rows the model is fitted on (the validation part is held out)
    fit_rows = tabular.validation_split(data, n_val)
    for name, setting in settings:
        if (task, split, name, setting.get("lr"), setting.get("sigma")) in done:
            continue
        configs = tabular.value_embedding_configs(fit_rows, sigma=setting.get("sigma", sigma0), n_bins=bins0)
        curve = split == 0 and part != "sigma"
        scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], curve=curve, **fit)
        rows.append(_row(task, split, name, setting, scores))
        if quick:
            print(rows[-1] | {"curve": "..."} if curve else rows[-1], flush=True)
    if part != "sigma" and (task, split, "ridge", None, None) not in done:
        base = tabular.sklearn_baselines(data, [split], validation=n_val)
        for name, values in base.items():
            rows.append({"task": task, "split": split, "model": name, "test_r2": round(float(values[0]), DIGITS)})
    return rows


def fingerprint(part: str) -> dict:
    """The first 20 training losses of split 0 of one fit per network of ``part``, at this commit
    (:func:`posenc.book.tabular.first_losses`)."""
    from posenc.book.results import loss_fingerprint
    from posenc.book.tabular import first_losses

    cfg = PARTS[part]
    task = cfg["tasks"][0]
    if part == "diabetes":
        cand = tabular.log_uniform_candidates(cfg["space"], cfg["candidates"], seed=0, integer=["n_bins"])[0]
        trials = [(0, {"task": task, "model": m, "stage": "search", **{k: cand[k] for k in tuned}})
                  for m, tuned in TUNED.items()]
    elif part == "identity":
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][0]}) for m in tabular.IDENTITY_MODELS]
    elif part == "sigma":
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][0], "sigma": 0.3}) for m in ("periodic (PLR)", "MLP-PLR")]
    else:  # rates at which 20 steps are not chaotic: another CPU's last bits stay below 1e-6 (PLR at 3e-3: 2e-4)
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][m == "periodic (PLR)"]}) for m in TUNED]
    config = {k: v for k, v in cfg.items() if k in ("steps", "eval_every", "patience", "validation")}
    return loss_fingerprint(first_losses, config, trials, dtype="float64")


def _metadata(part: str, cfg: dict) -> dict:
    return {
        "config": cfg | ({"sigmas": SIGMAS} if part == "sigma" else {}),
        "command": f"python experiments/tabular_resampling.py {part}",
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, torch {torch.__version__}, "
        f"python {platform.python_version()}",
    }


def merge(part: str, files: list[Path], out: Path) -> int:
    """Merge pieces written with ``--first/--last/--out`` into one results file, in run order."""
    cfg = PARTS[part]
    rows = [r for f in files for r in results.read_results(f)["rows"]]
    order = {t: i for i, t in enumerate(cfg["tasks"])}
    rows.sort(key=lambda r: (order[r["task"]], r["split"]))
    keys = [_key(r) for r in rows]
    if len(set(keys)) != len(keys):
        raise ValueError("the pieces overlap: a (task, split, model, setting) appears twice")
    machine = results.read_results(files[0]).get("machine", "")
    results.write_results(out, rows, **(_metadata(part, cfg) | {"machine": machine}))
    print(f"{len(rows)} rows from {len(files)} files -> {out}")
    return 0


def extend(part: str, cfg: dict, rows: list[dict], out: Path, metadata: dict, steps: int) -> int:
    """Re-run, with at most ``steps`` steps, every saved run that stopped at the part's step cap
    (it was still improving), and replace its row; the row records the new cap as ``"steps"``."""
    capped = [i for i, r in enumerate(rows) if r.get("stopped_step") == r.get("steps", cfg["steps"])]
    print(f"{len(capped)} runs reached the cap of {cfg['steps']} steps", flush=True)
    for i in capped:
        r = rows[i]
        data = tabular.grid_split(r["task"], r["split"])
        n_val = validation_rows(data)
        sigma0, bins0 = (DIABETES_SIGMA, DIABETES_BINS) if r["task"] == "diabetes" else (SYNTHETIC_SIGMA, SYNTHETIC_BINS)
        configs = tabular.value_embedding_configs(tabular.validation_split(data, n_val), sigma=r.get("sigma", sigma0), n_bins=bins0)
        t0 = time.perf_counter()
        scores = tabular.fit_regressor(configs[r["model"]], data, seed=r["split"], lr=r["lr"], validation=n_val,
                                    steps=steps, eval_every=cfg["eval_every"], patience=cfg["patience"],
                                    curve="curve" in r)
        new = _row(r["task"], r["split"], r["model"], {k: r[k] for k in ("lr", "sigma") if k in r}, scores)
        rows[i] = new | {"steps": steps}
        results.write_results(out, rows, **metadata)
        print({k: v for k, v in rows[i].items() if k != "curve"}, f"was best_step {r['best_step']} "
              f"test_r2 {r['test_r2']} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "merge":
        if len(argv) < 3 or argv[1] not in PARTS:
            raise SystemExit("usage: tabular_resampling.py merge PART FILE...")
        return merge(argv[1], [Path(f) for f in argv[2:]], DATA_DIR / f"tabular_{argv[1]}.json")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=sorted(PARTS))
    parser.add_argument("--task", default=None, help="run only this task of the part")
    parser.add_argument("--first", type=int, default=0, help="first split to run")
    parser.add_argument("--last", type=int, default=None, help="last split to run (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="results file (default posenc/book/data/)")
    parser.add_argument("--quick", action="store_true", help="1 split, 100 steps, nothing written")
    parser.add_argument("--extend", type=int, default=None,
                        help="re-run the rows that reached the step cap with this larger cap, in place")
    args = parser.parse_args(argv)
    cfg = dict(PARTS[args.part])
    last = cfg["splits"] - 1 if args.last is None else args.last
    if args.quick:
        cfg |= {"steps": 100}
        last = args.first
    out = args.out or DATA_DIR / f"tabular_{args.part}.json"
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rows = [] if args.quick or not out.exists() else results.read_results(out)["rows"]
    metadata = _metadata(args.part, cfg)
    t0 = time.perf_counter()
    if args.part == "diabetes":
        done = {_tuned_key(r) for r in rows}

        def save(row: dict) -> None:
            rows.append(row)
            done.add(_tuned_key(row))
            print({k: v for k, v in row.items() if k != "task"}, flush=True)
            if not args.quick:
                results.write_results(out, rows, **metadata)

        save.rows = rows
        for split in range(args.first, last + 1):
            run_tuned_split(split, cfg, done, save)
            print(f"diabetes split {split} done ({time.perf_counter() - t0:.0f} s)", flush=True)
        return 0
    if args.extend:
        return extend(args.part, cfg, rows, out, metadata, args.extend)
    done = {_key(r) for r in rows}
    for task in cfg["tasks"] if args.task is None else [args.task]:
        for split in range(args.first, last + 1):
            new = run_split(args.part, task, split, cfg, done, args.quick)
            rows += new
            done |= {_key(r) for r in new}
            if not args.quick:
                results.write_results(out, rows, **metadata)
            print(f"{args.part}: {task} split {split} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
