"""Chapter 3: the RoPE base a target context length needs, by two monotone criteria (head dimension 128).

    python experiments/rope_base_bound.py            # writes posenc/book/data/rope_base_bound.json (resumable)
    python experiments/rope_base_bound.py --quick    # smoke test, nothing saved

Units ``target:<L>`` for L = 4,096, 8,192, 32,768, 131,072 and 1,048,576 compute
:func:`posenc.book.recipes.base_for_length` with ``"wavelength"`` (closed form),
``"decay_first"`` (the smallest base on the grid whose mean cosine over the 64 pairs stays
nonnegative up to L) and ``"decay"`` (the smallest grid base above which every grid base
passes); the grid is 20 bases per decade from 1e3 to 1e11. Unit ``sweep`` records the first
negative mean cosine (:func:`posenc.book.probes.first_sign_change`, up to 400,000) for 41
bases from 1e6 to 1e7, evenly spaced in log. Pure arithmetic in float64: no fingerprint.
"""

from __future__ import annotations

import numpy as np

from posenc.book.probes import first_sign_change
from posenc.book.recipes import base_for_length
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment

TARGETS = (4096, 8192, 32768, 131072, 1048576)
GRID = [round(float(b), 6) for b in 10 ** np.arange(3, 11.001, 0.05)]
SWEEP = [round(float(b)) for b in np.logspace(6, 7, 41)]
PROTOCOL = {"head_dim": 128, "targets": list(TARGETS), "grid": "10**arange(3, 11.001, 0.05)", "sweep": SWEEP,
            "sweep_max_dist": 400_000}


def run_unit(unit: tuple, ctx) -> dict:
    if unit[0] == "sweep":
        bases = SWEEP[:3] if ctx.quick else SWEEP
        rows = []
        for b in bases:
            c = first_sign_change(float(b), 128, PROTOCOL["sweep_max_dist"])
            rows.append({"kind": "sweep", "base": b, "first_negative": c["distance"], "width": c["width"],
                         "depth": round(c["depth"], 6)})
        return {"rows": rows}
    L = unit[1]
    grid = np.array(GRID)
    row = {"kind": "target", "length": L}
    for crit in ("wavelength", "decay_first", "decay"):
        row[crit] = base_for_length(L, head_dim=128, criterion=crit, grid=grid)
    ctx.log(str(row))
    return {"rows": [row]}


EXPERIMENT = Experiment(
    "rope_base_bound", DATA_DIR / "rope_base_bound.json", run_unit,
    [("sweep",)] + [("target", L) for L in TARGETS], protocol=PROTOCOL, quick_plan=[("sweep",), ("target", 4096)],
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
