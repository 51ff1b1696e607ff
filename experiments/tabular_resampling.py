"""Chapter 5's experiments at full size: repeated splits, early stopping, a sigma sweep.

    python experiments/tabular_resampling.py diabetes    # 10 random splits of the diabetes table, tuned per split
    python experiments/tabular_resampling.py synthetic   # sine, chirp and step targets, 10 draws each
    python experiments/tabular_resampling.py sigma       # the frequency scale sigma of periodic embeddings
    python experiments/tabular_resampling.py identity    # the feature-identity experiment, 10 seeds
    python experiments/tabular_resampling.py nonlinear   # how linear the tuned periodic embeddings of ``diabetes`` are
    python experiments/tabular_resampling.py linear_diabetes    # a linear term beside the periodic embedding,
    python experiments/tabular_resampling.py linear_synthetic   # tuned as in ``diabetes`` and ``synthetic``
    python experiments/tabular_resampling.py diabetes --quick   # a smoke run (split 0, 100 steps), nothing saved

The part comes first; the options after it are those of
:class:`posenc.book.results.Experiment` (``--quick``, ``--max-minutes``, ``--pack``,
``--commit``, ``--out``, ``--stamp``). A unit is one split of one task (``<task>:<split>``),
run one after another; the file is rewritten atomically after every pack, and a re-run
skips the splits already in it.

Each part writes ``posenc/book/data/tabular_<part>.json``: one row per (task, split, model,
setting) with the validation, test and training R^2 of the early-stopped model, the step it
was taken at and the step training stopped.

The protocol is the same for every model. A split (or a fresh draw of the synthetic
data) gives training and test rows; the last 20 % of the training rows are a
validation part. Every network is trained in float64 with AdamW, full batch, for at
most ``steps`` steps, scored on the validation part every ``eval_every`` steps, and
stopped after ``patience`` scores without improvement; the best parameters are kept.
This is done for each learning rate of the grid, and the chapter picks, per split and
model, the learning rate with the best validation R^2 (never the test R^2). Ridge
regression picks its ``alpha`` and gradient boosting its number of trees on the same
validation part. Test rows are only scored. In ``synthetic``, a run still improving at the
cap of 3,000 steps is run again with a cap of 6,000 (its row records ``"steps": 6000``).

``nonlinear`` trains nothing new: per split it refits the two periodic networks that
``diabetes`` chose (its saved setting and number of steps, checking the saved test R^2)
and records :func:`posenc.book.tabular.nonlinear_share` of their trained and their initial
embeddings over the split's training rows (and of the trained one without its final ReLU),
and how far the frequencies moved.
``linear_diabetes`` and ``linear_synthetic`` run one more network, ``"periodic + raw
value"`` (the periodic transformer with the raw value appended to every token), by exactly
the protocol of ``diabetes`` (the same six candidates per split, so its rows pair with the
saved ones of ``"periodic (PLR)"``) and of ``synthetic`` (draws interleaved across the
three targets, so that a run stopped by ``--max-minutes`` still covers every target).

Everything is seeded (split ``i`` uses seed ``i`` for the data, the initialisation and
the boosting subsample) and runs on one thread, so a re-run reproduces the file; in
float64 the last-bit differences between CPUs stay far below the 3 or 4 decimals kept.
"""

from __future__ import annotations

import platform
import sys
import time

import torch

from posenc.book import tabular
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.results import Experiment, loss_fingerprint, one_thread, read_results

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


PARTS = {
    # part: tasks, splits, learning rates, max steps, eval_every, patience (and extend: the cap of a rerun of the
    # runs that reached ``steps``)
    # tuned per split: log-uniform candidates (learning rate, sigma, bins) on a validation third, then a refit
    "diabetes": dict(tasks=["diabetes"], splits=10, candidates=6, steps=2000, eval_every=10, patience=15,
                     validation=111, space={"lr": (3e-4, 3e-2), "sigma": (0.01, 100.0), "n_bins": (2, 64)}),
    "synthetic": dict(tasks=["sine", "chirp", "step"], splits=10, lrs=[3e-3, 1e-2], steps=3000, eval_every=25, patience=20,
                      extend=6000),
    "sigma": dict(tasks=["sine", "chirp"], splits=5, lrs=[1e-2], steps=3000, eval_every=25, patience=20),
    # the demonstration of section sec-tabular-invariance: a fixed recipe (no validation part), 10 seeds
    "identity": dict(tasks=["identity"], splits=10, lrs=[1e-2], steps=100, eval_every=100, patience=None),
}
# refits of the networks ``diabetes`` chose, measured, not tuned again
PARTS["nonlinear"] = dict(tasks=["diabetes"], splits=10, steps=PARTS["diabetes"]["steps"],
                          models=["periodic (PLR)", "MLP-PLR"])
# a linear term beside the periodic embedding: one more network under the protocols above
WITH_VALUE = "periodic + raw value"
PARTS["linear_diabetes"] = PARTS["diabetes"] | dict(models=[WITH_VALUE])
PARTS["linear_synthetic"] = PARTS["synthetic"] | dict(models=[WITH_VALUE], interleave=True)


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
    WITH_VALUE: ("lr", "sigma"),
}


def run_tuned_split(split: int, cfg: dict) -> list[dict]:
    """One diabetes split: per network, ``candidates`` log-uniform settings early-stopped on the last
    ``validation`` training rows; the best one (validation R^2) is refitted on all training rows for
    its best number of steps and scored on the test rows. The baselines are tuned the same way
    (only when ``cfg`` names no ``models``: a part that adds networks pairs with the saved rows)."""
    data = tabular.grid_split("diabetes", split)
    n_val = cfg["validation"]
    fit_rows = tabular.validation_split(data, n_val)
    candidates = tabular.log_uniform_candidates(cfg["space"], cfg["candidates"], seed=split, integer=["n_bins"])
    fit = dict(validation=n_val, steps=cfg["steps"], eval_every=cfg["eval_every"], patience=cfg["patience"])
    rows = []
    networks = {m: TUNED[m] for m in cfg.get("models", [m for m in TUNED if m != WITH_VALUE])}
    for name, tuned in networks.items():
        searched = []
        for i, cand in enumerate(candidates):
            setting = {k: cand[k] for k in tuned}
            configs = tabular.value_embedding_configs(
                fit_rows, sigma=setting.get("sigma", 1.0), n_bins=setting.get("n_bins", 8)
            )
            t0 = time.perf_counter()
            scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], **fit)
            searched.append(_row("diabetes", split, name, {"stage": "search", "candidate": i, **setting}, scores)
                            | {"seconds": round(time.perf_counter() - t0, 1)})
        best = max(searched, key=lambda r: r["val_r2"])
        setting = {k: best[k] for k in tuned}
        # bins of the refit come from all training rows
        configs = tabular.value_embedding_configs(data, sigma=setting.get("sigma", 1.0), n_bins=setting.get("n_bins", 8))
        scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], steps=max(best["best_step"], 1))
        rows += searched + [_row("diabetes", split, name, {"stage": "refit", "chosen": best["candidate"], **setting}, scores)
                            | {"steps": best["best_step"], "val_r2": best["val_r2"]}]
    if "models" in cfg:
        return rows
    for name, values in tabular.tuned_baselines(data, validation=n_val, seed=split).items():
        rows.append({"task": "diabetes", "split": split, "model": name, "stage": "refit",
                     **{k: (round(float(v), DIGITS) if k.endswith("r2") else v) for k, v in values.items()}})
    return rows


def run_split(part: str, task: str, split: int, cfg: dict) -> list[dict]:
    """The rows of one split (one seed of ``identity``) of ``task``: every network at every setting, and the baselines."""
    if part == "identity":
        data = tabular.feature_identity_task(n_train=256, n_test=512, seed=0)  # one data set, the seed varies
        rows = []
        for name, make in identity_configs().items():
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
        names = cfg.get("models", ["linear (FT)", "periodic (PLR)", "piecewise-linear (Q-L)", "MLP", "MLP-PLR"])
        settings = [(name, {"lr": lr}) for name in names for lr in cfg["lrs"]]
    sigma0, bins0 = (DIABETES_SIGMA, DIABETES_BINS) if task == "diabetes" else (SYNTHETIC_SIGMA, SYNTHETIC_BINS)
    # bins from the rows the model is fitted on (the validation part is held out)
    fit_rows = tabular.validation_split(data, n_val)
    for name, setting in settings:
        configs = tabular.value_embedding_configs(fit_rows, sigma=setting.get("sigma", sigma0), n_bins=bins0)
        curve = split == 0 and part != "sigma"
        scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], curve=curve, **fit)
        row = _row(task, split, name, setting, scores)
        if cfg.get("extend") and scores["stopped_step"] == cfg["steps"]:  # still improving at the cap
            scores = tabular.fit_regressor(configs[name], data, seed=split, lr=setting["lr"], curve=curve,
                                           **(fit | {"steps": cfg["extend"]}))
            row = _row(task, split, name, setting, scores) | {"steps": cfg["extend"]}
        rows.append(row)
    if part != "sigma" and "models" not in cfg:
        base = tabular.sklearn_baselines(data, [split], validation=n_val)
        for name, values in base.items():
            rows.append({"task": task, "split": split, "model": name, "test_r2": round(float(values[0]), DIGITS)})
    return rows


def saved_refits() -> dict:
    """The refit rows of the saved ``diabetes`` part, by (split, model)."""
    rows = read_results(DATA_DIR / "tabular_diabetes.json")["rows"]
    return {(r["split"], r["model"]): r for r in rows if r.get("stage") == "refit"}


class BeforeActivation(torch.nn.Module):
    """A periodic embedding up to its linear layer, without the ReLU: ``Linear_j(p_j(x))`` ("PL")."""

    def __init__(self, embedding: torch.nn.Module):
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.embedding.linear(self.embedding.periodic(x))


def run_nonlinear_split(split: int, cfg: dict) -> list[dict]:
    """The periodic networks ``diabetes`` chose on ``split``, refitted as it refitted them: their
    test R^2 (checked against the saved one), the non-linear share of their embedding per feature
    over the training rows, trained and at initialisation, and the growth of the largest frequency."""
    data = tabular.grid_split("diabetes", split)
    refits = saved_refits()
    rows = []
    for name in cfg["models"]:
        saved = refits[(split, name)]
        make = tabular.value_embedding_configs(data, sigma=saved["sigma"], n_bins=8)[name]
        steps = min(max(saved["steps"], 1), cfg["steps"])
        scores, model = tabular.fit_regressor(make, data, seed=split, lr=saved["lr"], steps=steps, return_model=True)
        if abs(scores["test_r2"] - saved["test_r2"]) > 1e-4:
            raise RuntimeError(f"split {split}, {name}: the refit gives test R^2 {scores['test_r2']:.5f}, "
                               f"the saved row {saved['test_r2']:.5f}")
        initial = tabular.initial_model(make, data, seed=split)
        embed, embed0 = (model.embed, initial.embed) if name == "periodic (PLR)" else (model[0], initial[0])
        trained_f, initial_f = embed.frequencies.detach().abs(), embed0.frequencies.detach().abs()
        rows.append({
            "task": "diabetes", "split": split, "model": name, "stage": "refit", "sigma": saved["sigma"],
            "lr": saved["lr"], "steps": steps, "test_r2": round(float(scores["test_r2"]), DIGITS),
            "share": [round(float(v), DIGITS) for v in tabular.nonlinear_share(embed, data.x_train)],
            "share_initial": [round(float(v), DIGITS) for v in tabular.nonlinear_share(embed0, data.x_train)],
            # the same without the final ReLU: how far the sines and cosines themselves are from straight lines
            "share_before_relu": [round(float(v), DIGITS)
                                  for v in tabular.nonlinear_share(BeforeActivation(embed), data.x_train)],
            # per feature: the largest trained |frequency| over the largest initial one
            "frequency_growth": [round(float(v), 3) for v in trained_f.max(1).values / initial_f.max(1).values],
        })
    return rows


def fingerprint(part: str) -> dict:
    """The first 20 training losses of split 0 of one fit per network of ``part``, at this commit
    (:func:`posenc.book.tabular.first_losses`)."""
    cfg = PARTS[part]
    task = cfg["tasks"][0]
    if part == "diabetes":
        cand = tabular.log_uniform_candidates(cfg["space"], cfg["candidates"], seed=0, integer=["n_bins"])[0]
        trials = [(0, {"task": task, "model": m, "stage": "search", **{k: cand[k] for k in tuned}})
                  for m, tuned in TUNED.items()]
    elif part == "identity":
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][0]}) for m in tabular.IDENTITY_MODELS]
    elif part == "nonlinear":
        refit = saved_refits()[(0, "periodic (PLR)")]
        trials = [(0, {"task": task, "model": "periodic (PLR)", "stage": "refit", "sigma": refit["sigma"],
                       "lr": refit["lr"]})]
    elif part == "linear_diabetes":
        cand = tabular.log_uniform_candidates(cfg["space"], cfg["candidates"], seed=0, integer=["n_bins"])[0]
        trials = [(0, {"task": task, "model": WITH_VALUE, "stage": "search", "lr": cand["lr"], "sigma": cand["sigma"]})]
    elif part == "linear_synthetic":  # the rate of the periodic network's fingerprint
        trials = [(0, {"task": task, "model": WITH_VALUE, "lr": cfg["lrs"][1]})]
    elif part == "sigma":
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][0], "sigma": 0.3}) for m in ("periodic (PLR)", "MLP-PLR")]
    else:  # rates at which 20 steps are not chaotic: another CPU's last bits stay below 1e-6 (PLR at 3e-3: 2e-4)
        trials = [(0, {"task": task, "model": m, "lr": cfg["lrs"][m == "periodic (PLR)"]}) for m in TUNED]
    config = {k: v for k, v in cfg.items() if k in ("steps", "eval_every", "patience", "validation")}
    return loss_fingerprint(tabular.first_losses, config, trials, dtype="float64")


def _machine() -> str:
    return (f"{platform.machine()}, {platform.processor() or 'cpu'}, torch {torch.__version__}, "
            f"python {platform.python_version()}")


def experiment(part: str) -> Experiment:
    """The harness of ``part``: one unit per (task, split), saved to ``tabular_<part>.json``."""
    cfg = PARTS[part]

    def run_unit(unit: tuple, ctx) -> dict:
        task, split = unit
        c = cfg | {"steps": 100, "extend": None} if ctx.quick else cfg
        if part == "nonlinear":
            rows = run_nonlinear_split(split, cfg)
        elif task == "diabetes":
            rows = run_tuned_split(split, c)
        else:
            rows = run_split(part, task, split, c)
        ctx.log(f"{part}: {task} split {split}, {len(rows)} rows" + (
            "".join(f"\n  {({k: v for k, v in r.items() if k != 'curve'})}" for r in rows) if ctx.quick else ""))
        return {"rows": rows}

    return Experiment(
        f"tabular_{part}", DATA_DIR / f"tabular_{part}.json", run_unit,
        [(task, split) for split in range(cfg["splits"]) for task in cfg["tasks"]] if cfg.get("interleave")
        else [(task, split) for task in cfg["tasks"] for split in range(cfg["splits"])],
        done=lambda saved: {f"{r['task']}:{r['split']}" for r in saved["rows"]},  # a file written before the harness
        setup=one_thread, fingerprint=lambda: fingerprint(part),
        metadata={
            "config": cfg | ({"sigmas": SIGMAS} if part == "sigma" else {}),
            "command": f"python experiments/tabular_resampling.py {part}",
            # a file written before the harness keeps the machine that ran it (``--stamp`` changes provenance only)
            "machine": lambda saved: _machine() if saved.get("units") else saved.get("machine", _machine()),
        },
    )


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in PARTS:
        raise SystemExit(f"usage: tabular_resampling.py {{{','.join(PARTS)}}} [--quick] [--max-minutes M] ...")
    sys.exit(experiment(sys.argv[1]).main(sys.argv[2:]))
