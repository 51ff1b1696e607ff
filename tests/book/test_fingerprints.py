"""Every saved result is tied to the code: its provenance names a commit, and its fingerprint is reproduced.

Each results file of ``posenc/book/data/`` (written by a script of ``experiments/``) carries

- ``provenance``: the git ``commit`` the code ran at (or was last checked at), the versions,
  the machine, the threads and the core-hours (:func:`posenc.book.results.provenance`);
- ``fingerprint``: for one trial per group, the first 20 training losses, computed by the
  chapter's ``first_losses(config, seed, n, **unit)``
  (:func:`posenc.book.results.loss_fingerprint`).

The test recomputes every fingerprint with today's code. It fails when the code no longer
trains the saved trials as it did, which means the saved results no longer follow from it:
rerun them (the script resumes) or say why not.

On the machine that wrote a fingerprint the recomputation is bit for bit. Another CPU
is not: under the simulated scalar CPU of ``.ci/foreign_cpus`` (ATen's default kernels,
SSE3 BLAS) the fingerprints move by up to 3.2e-7 relative in float32 and up to 4e-7 in
float64 (chapter 5's float64 fits start 1e-8 apart on that CPU and Adam grows it; a
periodic network at a high rate grows it to 1e-2 within 20 steps, so its fingerprint uses
trials that do not). Tolerance: float64 2e-6, float32 1e-5 relative, a few times what an
honest CPU difference gives; any change of data, seed, model, schedule or loss moves the
losses by 1e-3 or more.
"""

from __future__ import annotations

import importlib
import json
import time

import numpy as np
import pytest

from posenc.book.resources import DATA_DIR

RTOL = {"float64": 2e-6, "float32": 1e-5}
# Files whose fingerprinted trial amplifies kernel rounding faster: the periodic + raw value
# network's first 20 losses move by up to 1.7e-4 relative under the simulated scalar CPU
# (.ci/foreign_cpus), against 3e-7 for the other files. A code change that alters training
# moves them by far more.
RTOL_FILE = {"tabular_linear_synthetic.json": 1e-3}
FILES = sorted(p for p in DATA_DIR.glob("*.json"))
# no training, so no losses to fingerprint: a benchmark of time, and float64 arithmetic (chapter 3's RoPE base)
NO_TRAINING = {"alternatives_cost.json", "rope_base_bound.json"}


def _saved(path):
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_results_file_names_its_commit(path):
    prov = _saved(path).get("provenance")
    assert isinstance(prov, dict), f"{path.name} has no provenance"
    assert isinstance(prov.get("commit"), str) and len(prov["commit"]) >= 7, f"{path.name}: provenance.commit"
    for key in ("torch", "numpy", "python", "machine", "threads", "core_hours"):
        assert key in prov, f"{path.name}: provenance.{key}"


def _function(dotted: str):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


TRIALS = [
    pytest.param(path, i, id=f"{path.name}-{i}")
    for path in FILES
    if path.name not in NO_TRAINING
    for i in range(len(_saved(path).get("fingerprint", {}).get("trials", [None])))
]


@pytest.mark.parametrize("path, i", TRIALS)
def test_fingerprint_is_reproduced_at_head(path, i):
    fp = _saved(path).get("fingerprint")
    assert isinstance(fp, dict) and fp.get("trials"), f"{path.name} has no fingerprint"
    trial = fp["trials"][i]
    t0 = time.process_time()
    losses = _function(fp["function"])(dict(fp["config"]), trial["seed"], fp["n"], **trial["unit"])
    seconds = time.process_time() - t0
    assert len(losses) == fp["n"] == len(trial["losses"])
    np.testing.assert_allclose(
        losses, trial["losses"], rtol=RTOL_FILE.get(path.name, RTOL[fp["dtype"]]), atol=0,
        err_msg=f"{path.name}: the code no longer trains seed {trial['seed']} of {trial['unit']} as the saved "
        f"results were trained (fingerprint at {fp.get('commit')}): rerun the experiment or refresh the file",
    )
    assert seconds < 15, f"{path.name} {trial['unit']}: {seconds:.1f} s of CPU, too slow for a fingerprint"
