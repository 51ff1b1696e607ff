"""The config explorer (``book/config-explorer.md``, ``book/_static/explorers-config.js``)
against ``posenc.inspect_config``.

* ``test_explorer_script_equals_inspect_config``: the page's script, run in node (or, where
  node is missing, in headless Chromium on an empty page: no build needed, nothing
  fetched), reads the configurations of ``tests/library/test_hf_config.py`` (built from
  each family's ``transformers`` configuration class and written out as ``config.json``
  would be) and the page's examples; every field of every row equals
  ``posenc.inspect_config``'s, the frequencies to a relative 1e-6 (they agree to about
  1e-15: both are float64), the scaling's parameters equal ``scaling.as_dict``.
* ``test_explorer_script_errors_equal_posenc``: misread keys get the error ``posenc``
  raises, the same type and the same words.
* ``test_examples_read_as_transformers_reads_them``: each example, read as a dict, gives
  what ``posenc`` reads from the ``transformers`` configuration class built from it.
* ``test_config_explorer_page``: in the built site (the fixtures of ``test_site.py``: it
  skips where the site is missing or older than a source, fails under CI), the page shows
  the table for every example, for a pasted configuration and an error for a misread one,
  with no console error and no off-site request; the incidents page links to it.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from posenc.rope import inspect_config, rope_layers_from_config
from posenc.rope.scaling import as_dict

from test_site import (  # noqa: F401  (browser_base, site_dir: fixtures)
    PAGE_TIMEOUT_MS, SiteReport, _chromium, _router, browser_base, site_dir)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "book" / "_static" / "explorers-config.js"
TOL = 1e-6

# what the script computes for a list of {config, trained_length}: a report or {error: [type, message]}
_RUNNER = r"""
function runAll(api, cases) {
  return JSON.stringify(cases.map(function (c) {
    try {
      return {report: api.inspectConfig(c.config, c.trained_length)};
    } catch (e) {
      if (!e.isConfigError) throw e;
      return {error: [e.name, e.message]};
    }
  }), function (k, v) { return v === Infinity ? "inf" : v; });
}
"""


def _cls(module: str, name: str):
    return getattr(importlib.import_module(f"transformers.models.{module}.configuration_{module}"), name)


def _family_configs() -> dict[str, object]:
    """The configurations of tests/library/test_hf_config.py, as transformers builds them."""
    pytest.importorskip("transformers")
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192, "rope_theta": 5e5}
    yarn_qwen = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}
    ds = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
          "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 1e4}
    hunyuan = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32, "beta_slow": 1,
               "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 1e4}
    short, long = [1.0 + 0.01 * j for j in range(48)], [1.0 + 0.5 * j for j in range(48)]
    phi = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
           "original_max_position_embeddings": 4096, "rope_theta": 1e4}
    specs = {
        "Gemma 3": ("gemma3", "Gemma3TextConfig", {}),
        "Gemma 3 linear x8": ("gemma3", "Gemma3TextConfig", {"rope_scaling": {"rope_type": "linear", "factor": 8.0}}),
        "Gemma 4": ("gemma4", "Gemma4TextConfig", {}),
        "Llama 3.1": ("llama", "LlamaConfig", {"rope_parameters": llama3, "max_position_embeddings": 131072}),
        "Llama 4": ("llama4", "Llama4TextConfig", {}),
        "Llama 4 Scout x16": ("llama4", "Llama4TextConfig",
                              {"rope_parameters": {**llama3, "factor": 16.0, "high_freq_factor": 1.0}}),
        "Qwen2": ("qwen2", "Qwen2Config", {}),
        "Qwen2 YaRN": ("qwen2", "Qwen2Config", {"rope_parameters": yarn_qwen, "max_position_embeddings": 131072}),
        "Qwen3 YaRN": ("qwen3", "Qwen3Config", {"rope_parameters": yarn_qwen, "max_position_embeddings": 131072}),
        "Qwen2-VL": ("qwen2_vl", "Qwen2VLTextConfig", {}),
        "Qwen2.5-VL": ("qwen2_5_vl", "Qwen2_5_VLTextConfig", {}),
        "Qwen3-VL": ("qwen3_vl", "Qwen3VLTextConfig", {}),
        "Qwen3-VL sections": ("qwen3_vl", "Qwen3VLTextConfig", {"rope_parameters": {
            "rope_type": "default", "rope_theta": 1e6, "mrope_section": [24, 20, 20], "mrope_interleaved": True}}),
        "DeepSeek-V3": ("deepseek_v3", "DeepseekV3Config", {}),
        "DeepSeek-V3 YaRN": ("deepseek_v3", "DeepseekV3Config", {"rope_parameters": ds, "max_position_embeddings": 163840}),
        "DeepSeek-V3 half": ("deepseek_v3", "DeepseekV3Config", {"rope_interleave": False}),
        "gpt-oss": ("gpt_oss", "GptOssConfig", {}),
        "OLMo 3": ("olmo3", "Olmo3Config", {"rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                   "original_max_position_embeddings": 8192}, "rope_theta": 5e5, "max_position_embeddings": 65536}),
        "SmolLM3": ("smollm3", "SmolLM3Config", {}),
        "Cohere2": ("cohere2", "Cohere2Config", {}),
        "HunYuan dense": ("hunyuan_v1_dense", "HunYuanDenseV1Config", {"rope_parameters": hunyuan, "head_dim": 128}),
        "HunYuan MoE": ("hunyuan_v1_moe", "HunYuanMoEV1Config", {"rope_parameters": hunyuan, "head_dim": 128}),
        "HunYuan-VL": ("hunyuan_vl", "HunYuanVLTextConfig", {"rope_parameters": {
            "rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 1e4, "xdrope_section": [16, 16, 16, 16]},
            "head_dim": 128}),
        "Phi-3": ("phi3", "Phi3Config", {}),
        "Phi-3 LongRoPE": ("phi3", "Phi3Config", {"rope_parameters": phi, "max_position_embeddings": 131072}),
        "Phi-4-mini partial": ("phi3", "Phi3Config", {"rope_parameters": {
            **phi, "short_factor": short[:36], "long_factor": long[:36], "partial_rotary_factor": 0.75},
            "max_position_embeddings": 131072}),
        "GraniteSWA": ("granite_swa", "GraniteSWAConfig", {"layer_rope_theta": [0.0, 1e4, 1e6] * 8}),
        "Laguna": ("laguna", "LagunaConfig", {}),
        "Qwen3.5": ("qwen3_5", "Qwen3_5TextConfig", {}),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (module, cls, kwargs) in specs.items():
            out[name] = _cls(module, cls)(**kwargs)
    return out


# configurations as dicts only (test_hf_config.py's inspector cases and the released Gemma 3 keys)
_DICTS = {
    "Gemma 3 config.json (before transformers 5)": {
        "model_type": "gemma3_text", "num_hidden_layers": 12, "head_dim": 256, "hidden_size": 2048,
        "num_attention_heads": 8, "sliding_window": 1024, "sliding_window_pattern": 6, "rope_theta": 1e6,
        "rope_local_base_freq": 1e4, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "max_position_embeddings": 131072},
    "dynamic NTK": {"num_hidden_layers": 1, "head_dim": 64, "max_position_embeddings": 4096,
                    "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}},
    "XD-RoPE": {"num_hidden_layers": 1, "head_dim": 128, "rope_parameters": {
        "rope_type": "default", "rope_theta": 1e4, "xdrope_section": [16, 16, 16, 16]}},
    "proportional x2": {"num_hidden_layers": 2, "head_dim": 128, "max_position_embeddings": 8192, "rope_parameters": {
        "rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": 2.0, "rope_theta": 1e6}},
    "per-type head width": {"model_type": "gemma4_text", "num_hidden_layers": 4, "head_dim": 256, "global_head_dim": 512,
                            "layer_types": ["sliding_attention"] * 3 + ["full_attention"], "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}}},
}

# misread or broken configurations: the script must raise what posenc raises
_BASE = {"num_hidden_layers": 2, "head_dim": 64}
_BAD = [
    {**_BASE, "rope_parameters": {"rope_type": "default"}},
    {**_BASE, "layer_types": ["sliding_attention", "full_attention"],
     "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
    {**_BASE, "rope_theta": 1e4, "no_rope_layers": [1, 0, 1]},
    {**_BASE, "rope_theta": 1e4, "layer_rope_theta": [1e4, -1.5]},
    {**_BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_interleaved": True}},
    {**_BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [8, 8, 8]}},
    {**_BASE, "rope_theta": 1e4, "rope_interleave": "yes"},
    [1, 2],
    {**_BASE, "rope_theta": 1e4, "layer_types": ["full_attention"]},
    {"model_type": "olmo3", **_BASE, "layer_types": ["sliding_attention", "full_attention"],
     "rope_parameters": {"sliding_attention": {"rope_type": "default"}, "full_attention": {"rope_type": "default"},
                         "factor": 8.0, "rope_type": "yarn"}},
    {**_BASE, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"rope_type": "yarn", "factor": -1.0, "original_max_position_embeddings": 64, "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"rope_type": "linear", "factor": 0.5, "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4, "beta_fast": 3}},
    {**_BASE, "rope_parameters": {"rope_type": "su", "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"type": "linear", "rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 2.0}},
    {**_BASE, "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
                                  "original_max_position_embeddings": 8192, "rope_theta": 5e5}},
    {**_BASE, "rope_parameters": {"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 3,
                                  "original_max_position_embeddings": 64, "rope_theta": 1e4}},
    {**_BASE, "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                  "truncate": "no", "rope_theta": 1e4}},
    {**_BASE, "rope_theta": 1e4, "partial_rotary_factor": 1.5},
    {**_BASE, "rope_theta": 1e4, "partial_rotary_factor": 0.01},
    {**_BASE, "rope_theta": "1e4"},
    {"num_hidden_layers": 0, "head_dim": 64, "rope_theta": 1e4},
    {"num_hidden_layers": 2, "rope_theta": 1e4},
    {"head_dim": 64, "rope_theta": 1e4},
    {**_BASE, "rope_theta": 1e4, "layer_types": "full_attention"},
    {**_BASE, "rope_parameters": [1e4]},
]


def _examples() -> dict[str, dict]:
    """The page's examples, as the script holds them."""
    return json.loads(_run_js_expr("JSON.stringify(api.EXAMPLES)"))


# ----------------------------------------------------------------------------- running the script
def _node() -> str | None:
    return shutil.which("node") or shutil.which("nodejs")


def _run_js_expr(expr: str, payload: object = None) -> str:
    """Evaluate ``expr`` (JavaScript, with ``api`` the script's API and ``payload`` the
    given JSON) in node, or in headless Chromium on an empty page where node is missing."""
    source = SCRIPT.read_text(encoding="utf-8")
    node = _node()
    if node is not None:
        prog = (f"const api = require({json.dumps(str(SCRIPT))});\n{_RUNNER}\n"
                "const payload = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
                f"process.stdout.write(String({expr}));\n")
        done = subprocess.run([node, "-e", prog], input=json.dumps(payload), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout
    chromium = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        message = "neither node nor Chromium with Playwright is available to run the explorer's script"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from test_site import CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", lambda r: r.abort())  # nothing is fetched
            page.set_content("<!doctype html><html><head></head><body></body></html>")
            page.add_script_tag(content=source)
            return page.evaluate(f"(payload) => {{ const api = window.posencConfigExplorer; {_RUNNER}; return String({expr}); }}",
                                 payload)
        finally:
            browser.close()


def _run_js(cases: list[dict]) -> list[dict]:
    return json.loads(_run_js_expr("runAll(api, payload)", cases))


# ----------------------------------------------------------------------------- posenc's side
def _plain(x):
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _python(config, trained_length=None) -> dict:
    try:
        rep = inspect_config(config, trained_length=trained_length)
    except (ValueError, TypeError) as e:
        return {"error": [type(e).__name__, str(e)]}
    layers = rope_layers_from_config(config).rope
    rows = []
    for row in rep.rows:
        layer = layers[row["layer_type"]]
        rows.append({**_plain(row), "frequencies": [float(w) for w in layer.frequencies()],
                     "scaling_params": _plain(as_dict(layer.scaling))})
    return {"report": {"model_type": rep.model_type, "num_layers": rep.num_layers, "rows": rows,
                       "nope_layers": list(rep.nope_layers), "no_attention_layers": list(rep.no_attention_layers),
                       "notes": list(rep.notes)}}


def _close(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a == b or math.isclose(a, b, rel_tol=TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return a == b


def _compare(name: str, js: dict, py: dict) -> tuple[list[str], float]:
    """Every field of posenc's report in the script's; the largest relative frequency difference."""
    if "error" in py or "error" in js:
        return ([] if js.get("error") == py.get("error") else [f"{name}: script {js}, posenc {py}"]), 0.0
    a, b = js["report"], py["report"]
    problems = [f"{name}: {k}: script {a[k]!r}, posenc {b[k]!r}" for k in b if k != "rows" and not _close(a[k], b[k])]
    if len(a["rows"]) != len(b["rows"]):
        return problems + [f"{name}: {len(a['rows'])} rows in the script, {len(b['rows'])} in posenc"], 0.0
    worst = 0.0
    for ra, rb in zip(a["rows"], b["rows"]):
        for k, v in rb.items():
            if k == "frequencies":
                assert len(ra[k]) == len(v), (name, rb["layer_type"])
                for x, y in zip(ra[k], v):
                    assert (x == 0) == (y == 0), (name, rb["layer_type"], x, y)
                    worst = max(worst, abs(x - y) / abs(y) if y else 0.0)
            elif not _close(ra.get(k), v):
                problems.append(f"{name}/{rb['layer_type']}: {k}: script {ra.get(k)!r}, posenc {v!r}")
    return problems, worst


# ----------------------------------------------------------------------------- tests
def test_explorer_script_equals_inspect_config():
    """The script reads every configuration of the library's tests, and the page's examples,
    as posenc.inspect_config does: every field, the frequencies to 1e-6 relative."""
    cases, names = [], []
    for name, cfg in _family_configs().items():
        text = json.dumps(cfg.to_dict(), default=str)  # config.json as save_pretrained writes it
        cases.append({"config": json.loads(text)})
        names.append(name)
        # the dict reads as the configuration object does
        assert _python(json.loads(text)) == _python(cfg), name
    for name, cfg in {**_DICTS, **_examples()}.items():
        cases.append({"config": cfg})
        names.append(name)
    # a trained length given for a rule that does not state it (linear, NTK-alpha)
    for name in ("Gemma 3 linear x8", "HunYuan dense"):
        cases.append({"config": cases[names.index(name)]["config"], "trained_length": 32768})
        names.append(f"{name}, L = 32,768")
    js = _run_js(cases)
    problems, worst = [], 0.0
    for name, case, got in zip(names, cases, js):
        want = json.loads(json.dumps(_python(case["config"], case.get("trained_length"))))
        assert "report" in want, (name, want)
        p, w = _compare(name, got, want)
        problems += p
        worst = max(worst, w)
    assert len(cases) >= 10
    assert not problems, "\n".join(problems[:40])
    assert worst < TOL, worst
    print(f"{len(cases)} configurations, largest relative frequency difference {worst:.1e}")


def _normal(message: str) -> str:
    """JSON numbers do not say int or float: 2.0 and 2 print alike on both sides."""
    return re.sub(r"(\d)\.0\b", r"\1", message)


def test_explorer_script_errors_equal_posenc():
    """A misread key gets posenc's error in the page: the same type and the same words."""
    cases = [{"config": json.loads(json.dumps(c))} for c in _BAD]
    js = _run_js(cases)
    problems = []
    for case, got in zip(cases, js):
        want = _python(case["config"])
        assert "error" in want, case
        if "error" not in got or got["error"][0] != want["error"][0] or _normal(got["error"][1]) != _normal(want["error"][1]):
            problems.append(f"{json.dumps(case['config'])[:120]}\n  script: {got}\n  posenc: {want['error']}")
    assert not problems, "\n".join(problems)
    # the trained length is checked as posenc checks it
    got = _run_js([{"config": {**_BASE, "rope_theta": 1e4}, "trained_length": 0}])[0]
    with pytest.raises(ValueError) as e:
        inspect_config({**_BASE, "rope_theta": 1e4}, trained_length=0)
    assert got["error"] == ["ValueError", str(e.value)]


EXAMPLE_CLASSES = {
    "Llama 3.1 8B": ("llama", "LlamaConfig"),
    "Gemma 3 4B (text model, as transformers 5 saves it)": ("gemma3", "Gemma3TextConfig"),
    "Qwen2-VL 7B": ("qwen2_vl", "Qwen2VLTextConfig"),
    "DeepSeek-V3": ("deepseek_v3", "DeepseekV3Config"),
    "gpt-oss-20b": ("gpt_oss", "GptOssConfig"),
    "OLMo 3 7B": ("olmo3", "Olmo3Config"),
    "SmolLM3 3B (NoPE every fourth layer)": ("smollm3", "SmolLM3Config"),
}


def test_examples_read_as_transformers_reads_them():
    """Each example, read as a dict, gives what posenc reads from the transformers
    configuration class built from it (which fills the keys the file leaves out)."""
    pytest.importorskip("transformers")
    examples = _examples()
    assert set(examples) == set(EXAMPLE_CLASSES)
    for name, cfg in examples.items():
        module, cls = EXAMPLE_CLASSES[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = _cls(module, cls).from_dict(json.loads(json.dumps(cfg)))
        mine, theirs = _python(cfg)["report"], _python(config)["report"]
        for key in ("num_layers", "nope_layers", "no_attention_layers"):
            assert mine[key] == theirs[key], (name, key)
        assert len(mine["rows"]) == len(theirs["rows"]), name
        for a, b in zip(mine["rows"], theirs["rows"]):
            assert _close(a, b), (name, {k: (a[k], b[k]) for k in a if not _close(a[k], b[k])})


def test_config_explorer_page(browser_base, site_dir):  # noqa: F811 (fixtures of test_site.py)
    """The page in the built site: each example gives posenc's table, a pasted
    configuration gives its table, a misread one posenc's error; no console error, nothing
    requested off the site; the incidents page links to the page."""
    page_path = site_dir / "book" / "config-explorer.html"
    assert page_path.is_file(), "no page book/config-explorer.html in the built site"
    incidents = (site_dir / "book" / "incidents.html").read_text(encoding="utf-8")
    assert 'href="config-explorer.html' in incidents, "the incidents page does not link to the config explorer"
    browser, base = browser_base
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    problems: list[str] = []
    seen = SiteReport()
    context.route("**/*", _router(base, "light", seen))  # off-site requests aborted and recorded
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(base + "book/config-explorer.html", wait_until="load")
        root = page.locator(".posenc-config-explorer")
        page.wait_for_function("document.querySelector('.posenc-config-explorer[data-state=\"ok\"]') !== null")

        def overview() -> list[list[str]]:
            return root.locator("table.cx-overview tbody tr").evaluate_all(
                "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent))")

        examples = _examples()
        for name, cfg in examples.items():
            root.locator('select[name="example"]').select_option(name)
            assert root.get_attribute("data-state") == "ok", name
            want = inspect_config(cfg)
            got = overview()
            assert [r[0] for r in got] == [r["layer_type"] for r in want.rows], name
            for cells, row in zip(got, want.rows):
                assert cells[2] == f"{row['rotated_pairs']}/{row['head_dim'] // 2}" and cells[3] == row["layout"], name
                assert cells[5] == row["scaling"] and (cells[7] == "-" if row["turning_pairs"] is None
                                                       else int(cells[7]) == row["turning_pairs"]), name
            nope = root.locator("p.cx-nope").text_content()
            assert ("none" in nope) == (not want.nope_layers), name
        # a configuration pasted by the reader (typed into the box)
        pasted = {"model_type": "qwen3", "num_hidden_layers": 4, "head_dim": 128, "max_position_embeddings": 131072,
                  "rope_theta": 1e6, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                       "original_max_position_embeddings": 32768}}
        root.locator('textarea[name="config"]').fill(json.dumps(pasted))
        assert root.get_attribute("data-state") == "ok"
        assert root.locator('select[name="example"]').input_value() == ""
        row = inspect_config(pasted).rows[0]
        assert overview()[0][5] == row["scaling"] == "yarn x4"
        assert root.locator("details table tbody tr").count() == 64
        # a misread key: posenc's error, naming the key and the fix
        bad = {"num_hidden_layers": 2, "head_dim": 64,
               "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_interleaved": True}}
        root.locator('textarea[name="config"]').fill(json.dumps(bad))
        assert root.get_attribute("data-state") == "error"
        with pytest.raises(ValueError) as e:
            inspect_config(bad)
        assert str(e.value) in root.locator(".cx-error").text_content()
        assert root.locator("table.cx-overview").count() == 0
        # a trained length typed for a rule that does not state it
        root.locator('select[name="example"]').select_option("Gemma 3 4B (text model, as transformers 5 saves it)")
        root.locator('input[name="trained_length"]').fill("32768")
        want = inspect_config(examples["Gemma 3 4B (text model, as transformers 5 saves it)"], trained_length=32768)
        assert [r[9] for r in overview()] == [("all" if r["reach"] == math.inf else f"{r['reach']:,.0f}") for r in want.rows]
        root.locator('textarea[name="config"]').fill("{not json")
        assert root.get_attribute("data-state") == "error"
        assert not problems and not seen.offsite_requests, "\n".join(problems + seen.offsite_requests)
    finally:
        context.close()
