"""posenc.rope.hf_config against transformers 5.23: configs built from each family's config
class (defaults, or the keys the released models ship), read by posenc, compared with the
family's own rotary module (its ``inv_freq`` per layer type and its attention factor)."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import posenc
from posenc.rope import LayerRoPE, inspect_config, rope_layers_from_config
from posenc.rope.scaling import NTK, Linear, Proportional, YaRN, from_hf

transformers = pytest.importorskip("transformers")

# largest relative difference of a frequency seen by the tests (float32 in transformers)
TOL = 1e-6
WORST: dict[str, float] = {}


def _cls(module: str, name: str):
    return getattr(importlib.import_module(f"transformers.models.{module}.{'configuration' if name.endswith('Config') else 'modeling'}_{module}"), name)


def _hf(module: str, rotary: str, config) -> dict[str | None, tuple[torch.Tensor, float]]:
    """transformers' (inv_freq, attention_scaling) per layer type (``None``: one for all)."""
    rot = _cls(module, rotary)(config)
    if isinstance(rot.rope_type, dict):
        return {t: (getattr(rot, f"{t}_inv_freq"), float(getattr(rot, f"{t}_attention_scaling"))) for t in rot.rope_type}
    return {None: (rot.inv_freq, float(rot.attention_scaling))}


def _rel(a, b: torch.Tensor) -> float:
    a = torch.as_tensor(a, dtype=torch.float64)
    b = b.to(torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.equal(a == 0, b == 0)
    nz = b != 0
    return float(((a[nz] - b[nz]).abs() / b[nz].abs()).max()) if nz.any() else 0.0


def _compare(family: str, module: str, rotary: str, config) -> dict[str, LayerRoPE]:
    """Every rotating layer type of posenc's reading equals transformers' module."""
    hf = _hf(module, rotary, config)
    rope = rope_layers_from_config(config).rope
    worst = 0.0
    for name, layer in rope.items():
        inv, att = hf[layer.layer_type] if layer.layer_type in hf else hf[None]
        worst = max(worst, _rel(layer.frequencies(), inv))
        assert math.isclose(layer.attention_scaling(), att, rel_tol=1e-12), (name, layer.attention_scaling(), att)
    # the dict form (config.json as to_dict writes it) reads the same
    again = rope_layers_from_config(config.to_dict()).rope
    assert {k: (v.layers, v.base, v.scaling, v.rotary_dim) for k, v in again.items()} == {
        k: (v.layers, v.base, v.scaling, v.rotary_dim) for k, v in rope.items()
    }
    assert worst < TOL, (family, worst)
    WORST[family] = max(worst, WORST.get(family, 0.0))
    return rope


def test_gemma3_nested_types_and_linear_scaling_on_global_layers_only():
    C = _cls("gemma3", "Gemma3TextConfig")
    rope = _compare("Gemma 3", "gemma3", "Gemma3RotaryEmbedding", C())
    assert rope["sliding_attention"].base == 1e4 and rope["full_attention"].base == 1e6
    # the 4B/12B/27B configs: linear factor 8 on the global layers, none on the local ones
    cfg = C(rope_scaling={"rope_type": "linear", "factor": 8.0})
    rope = _compare("Gemma 3", "gemma3", "Gemma3RotaryEmbedding", cfg)
    assert rope["full_attention"].scaling == Linear(8.0) and rope["sliding_attention"].scaling is None
    assert rope["full_attention"].layers == tuple(i for i in range(26) if i % 6 == 5)
    # the released config.json (before transformers 5): rope_local_base_freq, sliding_window_pattern
    raw = {"model_type": "gemma3_text", "num_hidden_layers": 12, "head_dim": 256, "hidden_size": 2048,
           "num_attention_heads": 8, "sliding_window": 1024, "sliding_window_pattern": 6, "rope_theta": 1e6,
           "rope_local_base_freq": 1e4, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
           "max_position_embeddings": 131072}
    mine = rope_layers_from_config(raw).rope
    theirs = rope_layers_from_config(C.from_dict(raw)).rope
    assert {k: (v.layers, v.base, v.scaling) for k, v in mine.items()} == {k: (v.layers, v.base, v.scaling) for k, v in theirs.items()}


def test_gemma4_proportional_global_layers_with_their_own_head_width():
    rope = _compare("Gemma 4", "gemma4", "Gemma4TextRotaryEmbedding", _cls("gemma4", "Gemma4TextConfig")())
    full = rope["full_attention"]
    assert isinstance(full.scaling, Proportional) and full.head_dim == 512 and full.rotated_pairs == 64
    assert rope["sliding_attention"].head_dim == 256 and rope["sliding_attention"].rotated_pairs == 128


def test_llama3_and_llama4_with_nope_layers_and_interleaved_pairs():
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192, "rope_theta": 5e5}
    cfg = _cls("llama", "LlamaConfig")(rope_parameters=llama3, max_position_embeddings=131072)
    rope = _compare("Llama 3.1", "llama", "LlamaRotaryEmbedding", cfg)
    assert rope["full_attention"].layout == "half"
    # Llama 4 Scout (meta-llama/llama-models, models/llama4/args.py: factor 16, low = high = 1)
    scout = {**llama3, "factor": 16.0, "high_freq_factor": 1.0}
    C4 = _cls("llama4", "Llama4TextConfig")
    for params in (None, scout):
        cfg = C4(rope_parameters=params) if params else C4()
        rope = _compare("Llama 4", "llama4", "Llama4TextRotaryEmbedding", cfg)
        r = rope_layers_from_config(cfg)
        assert r.nope_layers == tuple(i for i, x in enumerate(cfg.no_rope_layers) if not x)
        assert rope["chunked_attention"].layout == "interleaved"


def test_llama4_scout_equals_meta_reference_rule():
    """Meta's reference code (models/llama4/model.py, apply_scaling) with Scout's values:
    pairs whose wavelength is at least 8,192 positions turn 16 times slower, the others
    keep their frequency (low = high = 1 leaves no blend band). transformers 5.23 warns
    that high_freq_factor must exceed low_freq_factor, yet computes the same frequencies."""
    scout = {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
             "original_max_position_embeddings": 8192, "rope_theta": 5e5}
    cfg = _cls("llama4", "Llama4TextConfig")(rope_parameters=scout, max_position_embeddings=10485760)
    layer = rope_layers_from_config(cfg).rope["chunked_attention"]
    plain = 5e5 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    meta = torch.where(2 * math.pi / plain < 8192, plain, plain / 16)
    ours = torch.as_tensor(layer.frequencies())
    assert ((ours - meta).abs() / meta).max() < 1e-7
    kept, slowed = int(torch.isclose(ours, plain, rtol=1e-12).sum()), int(torch.isclose(ours, plain / 16, rtol=1e-12).sum())
    assert (kept, slowed) == (35, 29)


@pytest.mark.parametrize("module, config, rotary", [("qwen2", "Qwen2Config", "Qwen2RotaryEmbedding"),
                                                    ("qwen3", "Qwen3Config", "Qwen3RotaryEmbedding")])
def test_qwen2_qwen3_default_and_yarn(module, config, rotary):
    C = _cls(module, config)
    _compare("Qwen2/3", module, rotary, C())
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}
    rope = _compare("Qwen2/3", module, rotary, C(rope_parameters=yarn, max_position_embeddings=131072))
    assert rope["full_attention"].scaling == YaRN(4.0, 32768)


@pytest.mark.parametrize("module, config, rotary, sections, interleaved", [
    ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding", (16, 24, 24), False),
    ("qwen2_5_vl", "Qwen2_5_VLTextConfig", "Qwen2_5_VLRotaryEmbedding", (16, 24, 24), False),
    ("qwen3_vl", "Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding", (24, 20, 20), True),
])
def test_qwen_vl_sections_and_axis_assignment(module, config, rotary, sections, interleaved):
    C = _cls(module, config)
    params = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": list(sections)}
    if interleaved:
        params["mrope_interleaved"] = True
    for cfg in (C(), C(rope_parameters=params)):
        layer = _compare("Qwen2-VL/2.5-VL/3-VL", module, rotary, cfg)["full_attention"]
        assert layer.mrope_section == sections and layer.mrope_interleaved is interleaved
        assert layer.layout == "half"  # mrope_interleaved assigns pairs to axes; the pairing stays (j, j + d/2)
        # the angles of distinct time, height and width ids equal transformers' cos
        pos = torch.stack([torch.arange(5), 3 * torch.arange(5) + 1, 7 * torch.arange(5) + 2])[:, None, :]
        hf = _cls(module, rotary)(cfg)
        cos_hf, _ = hf(torch.zeros(1, 5, layer.rotary_dim), pos)
        m = posenc.MultimodalRotaryEmbedding(layer.rotary_dim, layer.mrope_section, base=layer.base,
                                             interleaved=layer.mrope_interleaved)
        ang = m.angles(pos, torch.float64)
        assert float((torch.cos(ang) - cos_hf[..., : layer.rotary_dim // 2].double()).abs().max()) < 1e-5
        with pytest.raises(ValueError, match="MultimodalRotaryEmbedding"):
            layer.rotary_embedding()


def test_deepseek_v3_yarn_mscale_and_interleaved_rotated_slice():
    params = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
              "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 1e4}
    C = _cls("deepseek_v3", "DeepseekV3Config")
    for cfg in (C(), C(rope_parameters=params, max_position_embeddings=163840)):
        layer = _compare("DeepSeek-V3", "deepseek_v3", "DeepseekV3RotaryEmbedding", cfg)["full_attention"]
        assert (layer.rotary_dim, layer.rotary_offset, layer.head_dim, layer.layout) == (64, 128, 192, "interleaved")
    assert rope_layers_from_config(C(rope_interleave=False)).rope["full_attention"].layout == "half"


def test_gpt_oss_yarn_on_both_layer_types():
    rope = _compare("gpt-oss", "gpt_oss", "GptOssRotaryEmbedding", _cls("gpt_oss", "GptOssConfig")())
    assert {r.scaling for r in rope.values()} == {YaRN(32.0, 4096, truncate=False)}


def test_olmo3_yarn_on_full_attention_only():
    C = _cls("olmo3", "Olmo3Config")
    yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}
    cfg = C(rope_scaling=yarn, rope_theta=5e5, max_position_embeddings=65536)
    rope = _compare("OLMo 3", "olmo3", "Olmo3RotaryEmbedding", cfg)
    assert rope["sliding_attention"].scaling is None and isinstance(rope["full_attention"].scaling, YaRN)
    # a flat dict passed as rope_parameters ends up beside the nested defaults: refused, naming the key
    with pytest.raises(ValueError, match="'factor'.*move them"):
        rope_layers_from_config(C(rope_parameters={**yarn, "rope_theta": 5e5}))


def test_smollm3_nope_every_fourth_layer():
    cfg = _cls("smollm3", "SmolLM3Config")()
    _compare("SmolLM3", "smollm3", "SmolLM3RotaryEmbedding", cfg)
    assert rope_layers_from_config(cfg).nope_layers == tuple(range(3, 36, 4))


def test_cohere2_rope_on_sliding_layers_only_interleaved():
    cfg = _cls("cohere2", "Cohere2Config")()
    rope = _compare("Cohere2", "cohere2", "Cohere2RotaryEmbedding", cfg)
    r = rope_layers_from_config(cfg)
    assert set(rope) == {"sliding_attention"} and rope["sliding_attention"].layout == "interleaved"
    assert r.nope_layers == tuple(i for i, t in enumerate(cfg.layer_types) if t != "sliding_attention")


@pytest.mark.parametrize("module, config, rotary", [
    ("hunyuan_v1_dense", "HunYuanDenseV1Config", "HunYuanDenseV1RotaryEmbedding"),
    ("hunyuan_v1_moe", "HunYuanMoEV1Config", "HunYuanMoEV1RotaryEmbedding"),
])
def test_hunyuan_dynamic_with_alpha_is_fixed_ntk_alpha(module, config, rotary):
    shipped = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32, "beta_slow": 1,
               "mscale": 1.0, "mscale_all_dim": 1.0, "rope_theta": 1e4}
    cfg = _cls(module, config)(rope_parameters=shipped, head_dim=128)
    layer = _compare("HunYuan", module, rotary, cfg)["full_attention"]
    assert layer.scaling == NTK(1000.0)
    assert from_hf(shipped)[2] == NTK(1000.0)


def test_phi3_longrope_short_and_long_factors_partial_rotary():
    short = [1.0 + 0.01 * j for j in range(48)]
    long = [1.0 + 0.5 * j for j in range(48)]
    params = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
              "original_max_position_embeddings": 4096, "rope_theta": 1e4}
    C = _cls("phi3", "Phi3Config")
    _compare("Phi-3", "phi3", "Phi3RotaryEmbedding", C())
    cfg = C(rope_parameters=params, max_position_embeddings=131072)
    layer = _compare("Phi-3", "phi3", "Phi3RotaryEmbedding", cfg)["full_attention"]
    hf = _cls("phi3", "Phi3RotaryEmbedding")(cfg)
    hf(torch.zeros(1, 1, 96), torch.tensor([[5000]]))  # a call past 4,096 switches to the long factors
    WORST["Phi-3"] = max(WORST["Phi-3"], _rel(layer.frequencies(seq_len=5001), hf.inv_freq))
    assert WORST["Phi-3"] < TOL
    # Phi-4-mini style: three quarters of the head rotate
    cfg = C(rope_parameters={**params, "short_factor": short[:36], "long_factor": long[:36], "partial_rotary_factor": 0.75},
            max_position_embeddings=131072)
    assert _compare("Phi-3", "phi3", "Phi3RotaryEmbedding", cfg)["full_attention"].rotary_dim == 72


def test_granite_swa_layer_rope_theta_zero_is_nope():
    import copy

    C = _cls("granite_swa", "GraniteSWAConfig")
    cfg = C(layer_rope_theta=[0.0, 1e4, 1e6] * 8)
    r = rope_layers_from_config(cfg)
    assert r.nope_layers == tuple(range(0, 24, 3))
    assert {layer.base for layer in r.rope.values()} == {1e4, 1e6}
    for layer in r.rope.values():  # transformers: one rotary embedding per non-zero theta
        assert all(cfg.layer_rope_theta[i] == layer.base for i in layer.layers)
        one = copy.deepcopy(cfg)
        one.rope_parameters = {**cfg.rope_parameters, "rope_theta": layer.base}
        inv, _ = _hf("granite_swa", "GraniteSWARotaryEmbedding", one)[None]
        WORST["GraniteSWA"] = max(WORST.get("GraniteSWA", 0.0), _rel(layer.frequencies(), inv))
    assert WORST["GraniteSWA"] < TOL


def test_laguna_and_qwen35_partial_rotary_per_type_and_linear_attention():
    rope = _compare("Laguna", "laguna", "LagunaRotaryEmbedding", _cls("laguna", "LagunaConfig")())
    assert rope["full_attention"].rotary_dim == 64
    m = rope["full_attention"].rotary_embedding()  # the whole head, half of it rotated
    assert (m.head_dim, m.rotary_dim, m.base) == (128, 64, 5e5)
    ds = rope_layers_from_config(_cls("deepseek_v3", "DeepseekV3Config")()).rope["full_attention"].rotary_embedding()
    assert (ds.head_dim, ds.layout) == (64, "interleaved")
    g4 = rope_layers_from_config(_cls("gemma4", "Gemma4TextConfig")()).rope["full_attention"].rotary_embedding()
    assert g4.head_dim == 512 and isinstance(g4.scaling, Proportional)
    cfg = _cls("qwen3_5", "Qwen3_5TextConfig")()
    layer = _compare("Qwen3.5", "qwen3_5", "Qwen3_5TextRotaryEmbedding", cfg)["full_attention"]
    assert (layer.rotary_dim, layer.mrope_section, layer.mrope_interleaved) == (64, (11, 11, 10), True)
    r = rope_layers_from_config(cfg)
    assert r.no_attention_layers == tuple(i for i, t in enumerate(cfg.layer_types) if t == "linear_attention")


def test_issue_table_configs_are_read():
    """The four configs posenc refused: nested by type, Gemma 4, HunYuan alpha, Qwen3-VL keys."""
    for module, name in (("gemma3", "Gemma3TextConfig"), ("gemma4", "Gemma4TextConfig")):
        assert len(rope_layers_from_config(_cls(module, name)()).rope) == 2
    hy = {"rope_type": "dynamic", "alpha": 1000.0, "rope_theta": 1e4}
    assert rope_layers_from_config({"num_hidden_layers": 1, "head_dim": 128, "rope_parameters": hy}).rope["full_attention"].scaling == NTK(1000.0)
    vl = {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True, "rope_theta": 5e6}
    layer = rope_layers_from_config({"num_hidden_layers": 1, "head_dim": 128, "rope_parameters": vl}).rope["full_attention"]
    assert layer.mrope_interleaved and layer.layout == "half"


def test_misread_keys_get_errors_that_name_the_key_and_the_fix():
    nested = _cls("gemma3", "Gemma3TextConfig")().rope_parameters
    with pytest.raises(ValueError, match=r"nested by layer type.*rope_parameters\['sliding_attention'\].*rope_layers_from_config"):
        posenc.RotaryEmbedding(256, scaling=nested)
    with pytest.raises(ValueError, match="mrope_interleaved.*not the pairing layout.*MultimodalRotaryEmbedding"):
        from_hf({"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True})
    base = {"num_hidden_layers": 2, "head_dim": 64}
    with pytest.raises(ValueError, match="no rope_theta"):
        rope_layers_from_config({**base, "rope_parameters": {"rope_type": "default"}})
    with pytest.raises(ValueError, match="no entry for layer type 'full_attention'"):
        rope_layers_from_config({**base, "layer_types": ["sliding_attention", "full_attention"],
                                 "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}})
    with pytest.raises(ValueError, match="no_rope_layers"):
        rope_layers_from_config({**base, "rope_theta": 1e4, "no_rope_layers": [1, 0, 1]})
    with pytest.raises(ValueError, match="layer_rope_theta"):
        rope_layers_from_config({**base, "rope_theta": 1e4, "layer_rope_theta": [1e4, -1.0]})
    with pytest.raises(ValueError, match="mrope_interleaved.*rope_interleave"):
        rope_layers_from_config({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_interleaved": True}})
    with pytest.raises(ValueError, match="mrope_section.*sum"):
        rope_layers_from_config({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [8, 8, 8]}})
    with pytest.raises(TypeError, match="rope_interleave"):
        rope_layers_from_config({**base, "rope_theta": 1e4, "rope_interleave": "yes"})
    with pytest.raises(TypeError, match="config must be"):
        rope_layers_from_config([1, 2])
    with pytest.raises(ValueError, match="layer_types"):
        rope_layers_from_config({**base, "rope_theta": 1e4, "layer_types": ["full_attention"]})
    with pytest.raises(ValueError, match="index"):
        rope_layers_from_config({**base, "rope_theta": 1e4}).layer(5)


def test_inspector_reports_pairs_reach_nope_and_sections():
    cfg = _cls("gemma3", "Gemma3TextConfig")(rope_scaling={"rope_type": "linear", "factor": 8.0})
    rows = {r["layer_type"]: r for r in inspect_config(cfg).rows}
    # linear scaling does not say which length it extends: no reach unless it is given
    assert rows["full_attention"]["trained_length"] is None and rows["full_attention"]["reach"] is None
    assert rows["sliding_attention"]["reach"] == math.inf and rows["sliding_attention"]["turning_pairs"] == 128
    rows = {r["layer_type"]: r for r in inspect_config(cfg, trained_length=32768).rows}
    full = rows["full_attention"]
    assert full["trained_length"] == 32768 and full["reach"] == pytest.approx(8 * 32768)
    # a pair turns within L exactly when its scaled wavelength fits in L
    w = rope_layers_from_config(cfg).rope["full_attention"].frequencies()
    assert full["turning_pairs"] == sum(2 * math.pi / x <= 32768 for x in w) == full["first_slow_pair"]
    text = str(inspect_config(cfg, trained_length=32768))
    assert "full_attention" in text and "linear x8" in text and "262,144" in text
    assert "-" in str(inspect_config(cfg)).splitlines()[-2]
    with pytest.raises(ValueError, match="trained_length"):
        inspect_config(cfg, trained_length=0)
    # gpt-oss: YaRN x32 from 4,096 reaches 131,072; SmolLM3's NoPE layers are listed
    gpt = inspect_config(_cls("gpt_oss", "GptOssConfig")())
    assert all(r["reach"] == pytest.approx(131072) for r in gpt.rows)
    assert "NoPE layers: 3, 7, 11" in str(inspect_config(_cls("smollm3", "SmolLM3Config")()))
    vl = inspect_config(_cls("qwen3_vl", "Qwen3VLTextConfig")())
    assert vl.rows[0]["sections"] == "[24, 20, 20] interleaved"
    xd = inspect_config({"num_hidden_layers": 1, "head_dim": 128, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "xdrope_section": [16, 16, 16, 16]}})
    assert "4 position axes" in str(xd)
    dyn = inspect_config({"num_hidden_layers": 1, "head_dim": 64, "max_position_embeddings": 4096, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}})
    assert dyn.rows[0]["reach"] is None and "per call" in str(dyn)


def test_hunyuan_vl_xdrope_sections_and_alpha():
    """HunYuan-VL / HunyuanOCR: four position axes (XD-RoPE, shipped as xdrope_section or
    mrope_section) and "dynamic" with alpha; the frequencies equal transformers'."""
    params = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 1e4,
              "xdrope_section": [16, 16, 16, 16]}
    cfg = _cls("hunyuan_vl", "HunYuanVLTextConfig")(rope_parameters=params, head_dim=128)
    layer = _compare("HunYuan", "hunyuan_vl", "HunYuanVLRotaryEmbedding", cfg)["full_attention"]
    assert layer.mrope_section == (16, 16, 16, 16) and layer.scaling == NTK(1000.0)
    assert "4 position axes" in str(inspect_config(cfg))


def test_released_config_json_keys_read_as_the_config_classes_read_them():
    """config.json as released (before transformers 5): Qwen2-VL's ``{"type": "mrope"}``,
    DeepSeek-V3 without ``rope_interleave`` (its class defaults to True), OLMo 3's flat YaRN
    (its class puts it on the full-attention layers only). The dict reads as the class built
    from it does."""
    released = {
        ("qwen2_vl", "Qwen2VLTextConfig"): {
            "model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
            "max_position_embeddings": 32768, "rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}},
        ("deepseek_v3", "DeepseekV3Config"): {
            "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840, "rope_theta": 10000,
            "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                             "original_max_position_embeddings": 4096, "type": "yarn"}},
        ("olmo3", "Olmo3Config"): {
            "model_type": "olmo3", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8,
            "max_position_embeddings": 65536, "layer_types": ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"],
            "rope_theta": 500000, "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32.0, "beta_slow": 1.0,
                                                   "factor": 8.0, "original_max_position_embeddings": 8192, "rope_type": "yarn"}},
    }
    for (module, name), raw in released.items():
        mine = rope_layers_from_config(raw)
        theirs = rope_layers_from_config(_cls(module, name).from_dict(dict(raw)))
        assert {k: (v.layers, v.base, v.scaling, v.rotary_dim, v.layout, v.mrope_section) for k, v in mine.rope.items()} == {
            k: (v.layers, v.base, v.scaling, v.rotary_dim, v.layout, v.mrope_section) for k, v in theirs.rope.items()}, module
    assert mine.rope["sliding_attention"].scaling is None and isinstance(mine.rope["full_attention"].scaling, YaRN)
    ds = rope_layers_from_config(released[("deepseek_v3", "DeepseekV3Config")]).rope["full_attention"]
    assert ds.layout == "interleaved" and ds.scaling.factor == 40.0


def test_zz_report_largest_difference():
    """Runs last in this file: every family compared above stays within TOL."""
    assert WORST and max(WORST.values()) < TOL
    print("largest relative difference per family:", {k: f"{v:.1e}" for k, v in WORST.items()})
