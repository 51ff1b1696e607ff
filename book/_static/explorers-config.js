/* Config explorer of the book (book/config-explorer.md), hand-written, no library, no network.
 *
 * A reader pastes a Hugging Face config.json; the script reads it as posenc's
 * posenc.rope.hf_config.inspect_config does (the same rules, in the same order, with the
 * same error messages) and shows, per layer type, the rotated pairs and their layout, the
 * base, the scaling rule and its parameters, the remapped frequencies against the trained
 * length (which pairs complete a turn within it), the NoPE layers, the multimodal sections,
 * the effective reach of the scaling and the attention factor.
 *
 * The formulas are those of posenc/rope/scaling.py and posenc/rope/hf_config.py;
 * tests/site/test_config_explorer.py runs this file (in node, or in Chromium where node is
 * missing) on the configs of tests/library/test_hf_config.py and on the examples below, and
 * compares every field with posenc.inspect_config. The same file runs in the page (it
 * mounts on every <div class="posenc-config-explorer">) and under node (module.exports).
 */
(function (root) {
  "use strict";

  // ------------------------------------------------------------------ errors, as Python words them
  function ConfigError(kind, message) {
    var e = new Error(message);
    e.name = kind; // "ValueError" or "TypeError", as posenc raises them
    e.isConfigError = true;
    return e;
  }
  function valueError(m) { return ConfigError("ValueError", m); }
  function typeError(m) { return ConfigError("TypeError", m); }

  function isDict(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function isNum(v) { return typeof v === "number"; }
  function isInt(v) { return typeof v === "number" && Number.isInteger(v); }
  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function get(o, k) { return has(o, k) && o[k] !== undefined ? o[k] : null; } // Python's dict.get
  function pyStr(s) {
    var q = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    return q + s.replace(/\\/g, "\\\\").replace(new RegExp(q, "g"), "\\" + q).replace(/\n/g, "\\n") + q;
  }
  // repr() of a float (JSON numbers cannot say int or float: integral ones print as ints)
  function pyNum(x) {
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (Number.isNaN(x)) return "nan";
    if (Number.isInteger(x) && Math.abs(x) < 1e16) return String(x);
    var e = Math.floor(Math.log10(Math.abs(x)));
    if (e < -4 || e >= 16) {
      var m = x.toExponential().split("e"), exp = parseInt(m[1], 10);
      return m[0] + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
    return String(x);
  }
  // str(float(x)): what Python prints for a value it has turned into a float
  function pyFloat(x) {
    var s = pyNum(x);
    return Number.isInteger(x) && Math.abs(x) < 1e16 ? s + ".0" : s;
  }
  function repr(v) {
    if (v === null || v === undefined) return "None";
    if (v === true) return "True";
    if (v === false) return "False";
    if (typeof v === "string") return pyStr(v);
    if (typeof v === "number") return pyNum(v);
    if (Array.isArray(v)) return "[" + v.map(repr).join(", ") + "]";
    return "{" + Object.keys(v).map(function (k) { return pyStr(k) + ": " + repr(v[k]); }).join(", ") + "}";
  }
  function pyType(v) {
    if (v === null || v === undefined) return "NoneType";
    if (typeof v === "boolean") return "bool";
    if (typeof v === "string") return "str";
    if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
    if (Array.isArray(v)) return "list";
    return "dict";
  }
  // Python's format(x, "g") (precision: significant digits, 6 by default)
  function fmtG(x, precision) {
    var p = precision || 6;
    if (x === 0) return "0";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : x < 0 ? "-inf" : "nan";
    var parts = x.toExponential(p - 1).split("e"), exp = parseInt(parts[1], 10);
    var strip = function (s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; };
    if (exp < -4 || exp >= p) {
      return strip(parts[0]) + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
    return strip(x.toFixed(Math.max(0, p - 1 - exp)));
  }
  function keysRepr(keys) { return keys.map(pyStr).join(", "); }

  // posenc/_checks.py
  function checkInt(name, v) {
    if (typeof v === "boolean" || !isInt(v)) throw typeError(name + " must be an integer, got " + repr(v) + " of type " + pyType(v));
    if (v < 1) throw valueError(name + " must be an integer >= 1, got " + v);
    return v;
  }
  function checkPositiveFloat(name, v) {
    if (typeof v === "boolean" || !isNum(v)) throw typeError(name + " must be a real number, got " + repr(v) + " of type " + pyType(v));
    if (!Number.isFinite(v) || v <= 0) throw valueError(name + " must be a finite number > 0, got " + pyFloat(v));
    return v;
  }
  function checkBool(name, v) {
    if (typeof v !== "boolean") throw typeError(name + " must be True or False, got " + repr(v));
    return v;
  }

  // ------------------------------------------------------------------ frequencies (posenc/rope/scaling.py)
  // omega_j = base**(-2j/dim), j < dim/2 (posenc.rope.core.inv_frequencies)
  function invFrequencies(dim, base) {
    var out = [];
    for (var j = 0; j < Math.floor(dim / 2); j++) out.push(1.0 / Math.pow(base, (2 * j) / dim));
    return out;
  }
  function ntkBase(dim, base, factor, kind) {
    if (dim < 4) {
      throw valueError("scaling of type " + pyStr(kind) + " needs at least 4 rotated coordinates (its base change " +
        "base * s**(d/(d-2)) is undefined for d=2), got " + dim);
    }
    return base * Math.pow(factor, dim / (dim - 2));
  }
  function atLeastOne(kind, factor) {
    if (factor < 1.0) throw valueError("scaling['factor'] must be >= 1 for type " + pyStr(kind) + ", got " + pyFloat(factor));
  }
  function yarnMscale(scale, mscale) {
    if (mscale === undefined) mscale = 1.0;
    return scale <= 1 ? 1.0 : 0.1 * mscale * Math.log(scale) + 1.0;
  }

  // each type: its fields (defaults: undefined = required, null = None), validation, formulas
  var SCALINGS = {
    linear: { fields: { factor: undefined } },
    ntk: { fields: { factor: undefined } },
    dynamic: { fields: { factor: undefined, original_max_position_embeddings: undefined } },
    yarn: { fields: { factor: undefined, original_max_position_embeddings: undefined, beta_fast: 32.0, beta_slow: 1.0,
      mscale: null, mscale_all_dim: null, attention_factor: null, truncate: true } },
    llama3: { fields: { factor: undefined, low_freq_factor: undefined, high_freq_factor: undefined,
      original_max_position_embeddings: undefined } },
    longrope: { fields: { short_factor: undefined, long_factor: undefined, original_max_position_embeddings: undefined,
      factor: 1.0, attention_factor: null } },
    proportional: { fields: { partial_rotary_factor: 1.0, factor: 1.0 } },
  };
  var SCALING_NAMES = Object.keys(SCALINGS);
  var NOT_SCALING = ["type", "rope_type", "rope_theta", "partial_rotary_factor"];
  var MULTIMODAL = ["mrope_section", "mrope_interleaved", "xdrope_section"];
  var LENGTH_FROM_MODEL = ["dynamic", "yarn", "llama3", "longrope"];
  var L_KEY = "scaling['original_max_position_embeddings']";

  // the scaling object: {type, ...fields}, validated as each dataclass's __post_init__
  function makeScaling(type, args) {
    var s = { type: type }, f = SCALINGS[type].fields;
    Object.keys(f).forEach(function (k) { s[k] = has(args, k) ? args[k] : f[k]; });
    if (type === "linear" || type === "ntk") {
      s.factor = checkPositiveFloat("scaling['factor']", s.factor);
      atLeastOne(type, s.factor);
    } else if (type === "dynamic") {
      s.factor = checkPositiveFloat("scaling['factor']", s.factor);
      atLeastOne(type, s.factor);
      checkInt(L_KEY, s.original_max_position_embeddings);
    } else if (type === "yarn") {
      ["factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor"].forEach(function (k) {
        if (s[k] !== null) s[k] = checkPositiveFloat("scaling[" + pyStr(k) + "]", s[k]);
      });
      checkInt(L_KEY, s.original_max_position_embeddings);
      checkBool("scaling['truncate']", s.truncate);
    } else if (type === "llama3") {
      ["factor", "low_freq_factor", "high_freq_factor"].forEach(function (k) {
        s[k] = checkPositiveFloat("scaling[" + pyStr(k) + "]", s[k]);
      });
      atLeastOne(type, s.factor);
      if (s.high_freq_factor < s.low_freq_factor) throw valueError("scaling['high_freq_factor'] must be at least scaling['low_freq_factor']");
      checkInt(L_KEY, s.original_max_position_embeddings);
    } else if (type === "longrope") {
      ["short_factor", "long_factor"].forEach(function (k) {
        if (!Array.isArray(s[k])) {
          throw typeError("scaling[" + pyStr(k) + "] must be a list of numbers (one per rotated pair), got " + repr(s[k]));
        }
        s[k] = s[k].map(function (v) { return checkPositiveFloat("scaling[" + pyStr(k) + "]", v); });
      });
      ["factor", "attention_factor"].forEach(function (k) {
        if (s[k] !== null) s[k] = checkPositiveFloat("scaling[" + pyStr(k) + "]", s[k]);
      });
      checkInt(L_KEY, s.original_max_position_embeddings);
    } else if (type === "proportional") {
      var p = checkPositiveFloat("scaling['partial_rotary_factor']", s.partial_rotary_factor);
      if (p > 1.0) throw valueError("scaling['partial_rotary_factor'] must be in (0, 1], got " + pyFloat(p));
      s.factor = checkPositiveFloat("scaling['factor']", s.factor);
    }
    return s;
  }

  // the frequencies of a rotation of width dim (opts.seqLen: dynamic's call length; opts.long: LongRoPE's long factors)
  function scaledFrequencies(s, dim, base, opts) {
    opts = opts || {};
    var inv = invFrequencies(dim, base);
    if (s === null) return inv;
    var L = s.original_max_position_embeddings;
    switch (s.type) {
      case "linear":
        return inv.map(function (w) { return w / s.factor; });
      case "ntk":
        return invFrequencies(dim, ntkBase(dim, base, s.factor, "ntk"));
      case "dynamic": {
        var n = opts.seqLen === undefined || opts.seqLen === null ? L : opts.seqLen;
        var g = s.factor * Math.max(n, L) / L - (s.factor - 1);
        return invFrequencies(dim, ntkBase(dim, base, g, "dynamic"));
      }
      case "yarn": {
        var corr = function (r) { return dim * Math.log(L / (r * 2 * Math.PI)) / (2 * Math.log(base)); };
        var low = corr(s.beta_fast), high = corr(s.beta_slow);
        if (s.truncate) { low = Math.floor(low); high = Math.ceil(high); }
        low = Math.max(low, 0);
        high = Math.min(high, dim - 1);
        if (low === high) high = high + 0.001;
        return inv.map(function (w, j) {
          var keep = 1.0 - Math.min(Math.max((j - low) / (high - low), 0.0), 1.0);
          return w / s.factor * (1.0 - keep) + w * keep;
        });
      }
      case "llama3": {
        var lo = s.low_freq_factor, hi = s.high_freq_factor;
        return inv.map(function (w) {
          var wavelength = 2 * Math.PI / w;
          if (wavelength > L / lo) return w / s.factor;
          if (wavelength < L / hi || hi === lo) return w;
          var smooth = (L / wavelength - lo) / (hi - lo);
          return (1.0 - smooth) * w / s.factor + smooth * w;
        });
      }
      case "longrope": {
        var ext = opts.long ? s.long_factor : s.short_factor;
        if (ext.length !== Math.floor(dim / 2)) {
          throw valueError("scaling['" + (opts.long ? "long" : "short") + "_factor'] must hold rotary_dim / 2 = " +
            Math.floor(dim / 2) + " numbers, got " + ext.length);
        }
        return inv.map(function (w, j) { return w / ext[j]; });
      }
      case "proportional": {
        var rotated = Math.floor(s.partial_rotary_factor * dim / 2);
        return inv.map(function (w, j) { return (j < rotated ? w : 0.0) / s.factor; });
      }
    }
    throw valueError("unknown scaling " + s.type);
  }

  function attentionScaling(s) {
    if (s === null) return 1.0;
    if (s.type === "yarn") {
      if (s.attention_factor !== null) return s.attention_factor;
      if (s.mscale && s.mscale_all_dim) return yarnMscale(s.factor, s.mscale) / yarnMscale(s.factor, s.mscale_all_dim);
      return yarnMscale(s.factor);
    }
    if (s.type === "longrope") {
      if (s.attention_factor !== null) return s.attention_factor;
      if (s.factor <= 1.0) return 1.0;
      return Math.sqrt(1 + Math.log(s.factor) / Math.log(s.original_max_position_embeddings));
    }
    return 1.0;
  }

  // posenc.rope.scaling.as_dict: the type and its parameters, None fields left out
  function scalingParams(s) {
    if (s === null) return null;
    var out = { type: s.type };
    Object.keys(SCALINGS[s.type].fields).forEach(function (k) { if (s[k] !== null) out[k] = s[k]; });
    return out;
  }

  // posenc.rope.scaling.from_hf: [rope_theta, partial_rotary_factor, scaling]
  function fromHf(params, maxPos) {
    if (maxPos !== null && maxPos !== undefined) maxPos = checkInt("max_position_embeddings", maxPos);
    else maxPos = null;
    if (params === null || params === undefined) return [null, null, null];
    if (!isDict(params)) {
      throw typeError("scaling must be None, a scaling such as Linear(4.0) or a dict such as " +
        "{'rope_type': 'linear', 'factor': 4}, got " + pyType(params));
    }
    var nested = Object.keys(params).filter(function (k) { return isDict(params[k]); });
    if (nested.length) {
      throw valueError("scaling is nested by layer type (" + keysRepr(nested) + "): pass one layer type's dict, " +
        "e.g. rope_parameters[" + pyStr(nested[0]) + "], or read the whole config with " +
        "posenc.rope.rope_layers_from_config(config), which returns one scaling per layer type");
    }
    var multimodal = Object.keys(params).filter(function (k) { return MULTIMODAL.indexOf(k) >= 0; }).sort();
    if (multimodal.length) {
      throw valueError("scaling[" + pyStr(multimodal[0]) + "] configures multimodal RoPE (which pairs follow time, height or width; " +
        "'mrope_interleaved' is that assignment, not the pairing layout): build " +
        "posenc.MultimodalRotaryEmbedding(head_dim, sections=..., interleaved=...), or read the whole config " +
        "with posenc.rope.rope_layers_from_config(config)");
    }
    var theta = get(params, "rope_theta");
    theta = theta === null ? null : checkPositiveFloat("scaling['rope_theta']", theta);
    var partial = get(params, "partial_rotary_factor");
    if (partial !== null) {
      partial = checkPositiveFloat("scaling['partial_rotary_factor']", partial);
      if (partial > 1.0) throw valueError("scaling['partial_rotary_factor'] must be in (0, 1], got " + pyFloat(partial));
    }
    var kind = get(params, "type"), ropeType = get(params, "rope_type");
    if (kind !== null && ropeType !== null && kind !== ropeType) {
      throw valueError("scaling['type']=" + repr(kind) + " and scaling['rope_type']=" + repr(ropeType) + " differ; pass one");
    }
    kind = kind === null ? ropeType : kind;
    var names = keysRepr(SCALING_NAMES);
    if (kind === null || kind === "default") {
      var unknown = Object.keys(params).filter(function (k) { return NOT_SCALING.indexOf(k) < 0; }).sort();
      if (unknown.length || kind === null) {
        throw valueError("scaling needs a 'rope_type' in 'default', " + names +
          (unknown.length && kind ? "; type 'default' does not take " + unknown.join(", ") : ""));
      }
      return [theta, partial, null];
    }
    if (typeof kind !== "string" || !has(SCALINGS, kind)) {
      throw valueError("scaling['rope_type'] must be one of 'default', " + names + ", got " + repr(kind));
    }
    if (kind === "dynamic" && get(params, "alpha")) {
      // HunYuan: transformers reads "dynamic" with an alpha as fixed NTK-alpha
      return [theta, partial, makeScaling("ntk", { factor: checkPositiveFloat("scaling['alpha']", params.alpha) })];
    }
    var fields = Object.keys(SCALINGS[kind].fields), args = {};
    Object.keys(params).forEach(function (k) {
      if (NOT_SCALING.indexOf(k) < 0 && params[k] !== null && params[k] !== undefined) args[k] = params[k];
    });
    var bad = Object.keys(args).filter(function (k) { return fields.indexOf(k) < 0; }).sort();
    if (bad.length) {
      throw valueError("scaling of type " + pyStr(kind) + " does not take " + bad.join(", ") + "; accepted keys: " + fields.join(", "));
    }
    if (kind === "proportional") {
      if (partial !== null) args.partial_rotary_factor = partial;
      partial = null;
    }
    if (LENGTH_FROM_MODEL.indexOf(kind) >= 0 && maxPos !== null) {
      if (kind === "dynamic" || !has(args, "original_max_position_embeddings")) args.original_max_position_embeddings = maxPos;
    }
    if ((kind === "yarn" || kind === "longrope") && !has(args, "factor") && maxPos !== null) {
      if (has(args, "original_max_position_embeddings")) args.factor = maxPos / checkInt(L_KEY, args.original_max_position_embeddings);
    }
    var required = fields.filter(function (k) { return SCALINGS[kind].fields[k] === undefined && !has(args, k); });
    if (required.length) {
      var hint = required.indexOf("original_max_position_embeddings") >= 0
        ? "; transformers takes it from the model config's max_position_embeddings: pass " +
          "max_position_embeddings=<the model's maximum length>"
        : "";
      throw valueError("scaling of type " + pyStr(kind) + " needs the key(s) " + required.join(", ") + hint);
    }
    return [theta, partial, makeScaling(kind, args)];
  }

  // ------------------------------------------------------------------ reading a config (posenc/rope/hf_config.py)
  var INTERLEAVED_MODELS = ["cohere", "cohere2", "gptj", "llama4", "llama4_text", "deepseek_v2"];
  var INTERLEAVE_BY_DEFAULT = ["deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1"];
  var MROPE_INTERLEAVED_MODELS = ["qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_5",
    "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_omni_moe"];
  var MROPE_DEFAULT_SECTIONS = {
    qwen2_vl: [16, 24, 24], qwen2_vl_text: [16, 24, 24], qwen2_5_vl: [16, 24, 24], qwen2_5_vl_text: [16, 24, 24],
    qwen3_vl: [24, 20, 20], qwen3_vl_text: [24, 20, 20], qwen3_vl_moe: [24, 20, 20], qwen3_vl_moe_text: [24, 20, 20],
    qwen3_5: [11, 11, 10], qwen3_5_text: [11, 11, 10], qwen3_5_moe: [11, 11, 10], qwen3_5_moe_text: [11, 11, 10],
  };
  var ROPE_ON_SLIDING_ONLY = ["cohere2"];
  var SCALING_ON_FULL_ONLY = ["olmo3"];
  var NO_ATTENTION = ["linear_attention", "mamba", "conv", "short_conv", "recurrent", "deltanet"];

  function asDict(config) {
    if (!isDict(config)) {
      throw typeError("config must be a dict (config.json) or a transformers PretrainedConfig, got " + pyType(config));
    }
    var hasRope = ["rope_parameters", "rope_scaling", "rope_theta"].some(function (k) { return has(config, k); });
    if (!hasRope && isDict(config.text_config)) return asDict(config.text_config);
    return config;
  }

  function positiveInt(cfg, key) {
    var v = get(cfg, key);
    if (v === null) return null;
    if (typeof v === "boolean" || !isInt(v) || v <= 0) throw valueError("config[" + pyStr(key) + "] must be a positive int, got " + repr(v));
    return v;
  }

  function layerTypes(cfg) {
    var n = positiveInt(cfg, "num_hidden_layers");
    var types = get(cfg, "layer_types");
    if (types !== null) {
      if (!Array.isArray(types) || !types.every(function (t) { return typeof t === "string"; })) {
        throw typeError("config['layer_types'] must be a list of strings, got " + repr(types));
      }
      if (n !== null && types.length !== n) {
        throw valueError("config['layer_types'] has " + types.length + " entries for num_hidden_layers=" + n + "; give one per layer");
      }
      return types.slice();
    }
    if (n === null) throw valueError("config needs 'num_hidden_layers' (or 'layer_types', one per layer)");
    var pattern = positiveInt(cfg, "sliding_window_pattern");
    var out = [];
    for (var i = 0; i < n; i++) {
      out.push(pattern !== null && cfg.sliding_window ? ((i + 1) % pattern === 0 ? "full_attention" : "sliding_attention") : "full_attention");
    }
    return out;
  }

  function unique(xs) { return xs.filter(function (x, i) { return xs.indexOf(x) === i; }); }
  function copy(o) { var c = {}; Object.keys(o).forEach(function (k) { c[k] = o[k]; }); return c; }
  function setdefault(o, k, v) { if (!has(o, k)) o[k] = v; }

  function perTypeParams(cfg, types) {
    var rp = get(cfg, "rope_parameters");
    if (rp === null) rp = get(cfg, "rope_scaling");
    var attentionTypes = unique(types).filter(function (t) { return NO_ATTENTION.indexOf(t) < 0; });
    if (rp !== null && !isDict(rp)) throw typeError("config['rope_parameters'] must be a dict, got " + pyType(rp));
    rp = rp === null ? {} : copy(rp);
    var nestedKeys = Object.keys(rp).filter(function (k) { return isDict(rp[k]) || (rp[k] === null && types.indexOf(k) >= 0); });
    var out = {};
    if (nestedKeys.length) {
      var stray = Object.keys(rp).filter(function (k) { return nestedKeys.indexOf(k) < 0; }).sort();
      if (stray.length) {
        throw valueError("config['rope_parameters'] mixes layer types (" + keysRepr(nestedKeys) + ") with the keys " +
          keysRepr(stray) + ": move them into each layer type's dict");
      }
      var missing = attentionTypes.filter(function (t) { return nestedKeys.indexOf(t) < 0; });
      if (missing.length) {
        throw valueError("config['rope_parameters'] has no entry for layer type " + pyStr(missing[0]) + " (it has " +
          keysRepr(nestedKeys) + "): add rope_parameters[" + pyStr(missing[0]) + "] or fix config['layer_types']");
      }
      var theta = get(cfg, "rope_theta"), partial = get(cfg, "partial_rotary_factor");
      attentionTypes.forEach(function (t) {
        var p = rp[t];
        if (p !== null) {
          p = copy(p);
          if (!has(p, "type")) setdefault(p, "rope_type", "default");
          if (theta !== null) setdefault(p, "rope_theta", theta);
          if (partial !== null) setdefault(p, "partial_rotary_factor", partial);
        }
        out[t] = p;
      });
      return out;
    }
    var flat = copy(rp);
    if (!has(flat, "type")) setdefault(flat, "rope_type", "default");
    ["rope_theta", "partial_rotary_factor"].forEach(function (k) { if (get(cfg, k) !== null) setdefault(flat, k, cfg[k]); });
    if (!has(flat, "partial_rotary_factor") && get(cfg, "rotary_pct") !== null) flat.partial_rotary_factor = cfg.rotary_pct;
    var local = get(cfg, "rope_local_base_freq");
    var fullOnly = SCALING_ON_FULL_ONLY.indexOf(get(cfg, "model_type")) >= 0;
    attentionTypes.forEach(function (t) {
      if (local !== null && t === "sliding_attention") {
        out[t] = { rope_type: "default", rope_theta: local };
      } else if (fullOnly && t !== "full_attention") {
        var plain = {};
        ["rope_theta", "partial_rotary_factor"].forEach(function (k) { if (has(flat, k)) plain[k] = flat[k]; });
        plain.rope_type = "default";
        out[t] = plain;
      } else {
        out[t] = flat;
      }
    });
    return out;
  }

  function headDim(cfg, layerType, index) {
    var perLayer = get(cfg, "per_layer_config");
    if (isDict(perLayer)) {
      var keys = Object.keys(perLayer);
      for (var i = 0; i < keys.length; i++) {
        var o = perLayer[keys[i]];
        if (/^[0-9]+$/.test(keys[i]) && parseInt(keys[i], 10) === index && isDict(o) && o.head_dim) {
          var d0 = positiveInt(o, "head_dim");
          return [d0, d0, 0];
        }
      }
    }
    if (layerType === "full_attention" && cfg.global_head_dim) {
      var g = positiveInt(cfg, "global_head_dim");
      return [g, g, 0];
    }
    var ropeDim = positiveInt(cfg, "qk_rope_head_dim");
    if (ropeDim !== null) {
      var nope = positiveInt(cfg, "qk_nope_head_dim") || 0;
      return [nope + ropeDim, ropeDim, nope];
    }
    var d = positiveInt(cfg, "head_dim");
    if (d === null) {
      var hidden = positiveInt(cfg, "hidden_size"), heads = positiveInt(cfg, "num_attention_heads");
      if (hidden === null || heads === null) throw valueError("config needs 'head_dim' (or 'hidden_size' and 'num_attention_heads')");
      d = Math.floor(hidden / heads);
    }
    return [d, d, 0];
  }

  function layoutOf(cfg, modelType) {
    var flag = get(cfg, "rope_interleave");
    if (flag !== null && typeof flag !== "boolean") throw typeError("config['rope_interleave'] must be true or false, got " + repr(flag));
    if (flag !== null) return flag ? "interleaved" : "half";
    return INTERLEAVED_MODELS.indexOf(modelType) >= 0 || INTERLEAVE_BY_DEFAULT.indexOf(modelType) >= 0 ? "interleaved" : "half";
  }

  function sectionsOf(p, modelType) {
    var section = has(p, "mrope_section") ? p.mrope_section : get(p, "xdrope_section");
    if (section === null || section === undefined) section = has(MROPE_DEFAULT_SECTIONS, modelType || "") ? MROPE_DEFAULT_SECTIONS[modelType] : null;
    var flag = get(p, "mrope_interleaved");
    if (flag !== null && typeof flag !== "boolean") {
      throw typeError("rope_parameters['mrope_interleaved'] must be true or false, got " + repr(flag));
    }
    if (section === null) {
      if (flag !== null) {
        throw valueError("rope_parameters['mrope_interleaved'] is given without 'mrope_section': it assigns pairs to the " +
          "time, height and width axes (it is not the pairing layout, which 'rope_interleave' sets); add the sections");
      }
      return [null, false];
    }
    if (!Array.isArray(section)) throw typeError("rope_parameters['mrope_section'] must be a list of ints, got " + repr(section));
    var interleaved = Boolean(flag) || MROPE_INTERLEAVED_MODELS.indexOf(modelType) >= 0;
    return [section.map(function (s) { return Math.trunc(Number(s)); }), interleaved];
  }

  function checkPerLayer(cfg, key, n) {
    var v = get(cfg, key);
    if (v === null) return null;
    if (!Array.isArray(v) || v.length !== n) {
      throw valueError("config[" + pyStr(key) + "] must be a list with one entry per layer (" + n + "), got " + repr(v));
    }
    return v.slice();
  }

  // posenc.rope_layers_from_config: {model_type, layer_types, rope: [layer, ...], nope_layers, no_attention_layers}
  function ropeLayersFromConfig(config) {
    var cfg = asDict(config);
    var modelType = get(cfg, "model_type");
    var types = layerTypes(cfg), n = types.length;
    var maxPos = positiveInt(cfg, "max_position_embeddings");
    var params = perTypeParams(cfg, types);
    var noRope = checkPerLayer(cfg, "no_rope_layers", n);
    var layerTheta = checkPerLayer(cfg, "layer_rope_theta", n);
    var layout = layoutOf(cfg, modelType);

    var dims = types.map(function (t, i) { return NO_ATTENTION.indexOf(t) >= 0 ? null : headDim(cfg, t, i); });
    var groups = [], byName = {}, nope = [], noAttention = [];
    types.forEach(function (t, i) {
      if (NO_ATTENTION.indexOf(t) >= 0) { noAttention.push(i); return; }
      if (params[t] === null || (noRope !== null && !noRope[i])) { nope.push(i); return; }
      if (ROPE_ON_SLIDING_ONLY.indexOf(modelType) >= 0 && t !== "sliding_attention") { nope.push(i); return; }
      var name = t, base = null;
      var widths = unique(dims.filter(function (d, k) { return types[k] === t; }).map(function (d) { return d[0]; }));
      if (widths.length > 1) name = t + " (head_dim " + dims[i][0] + ")";
      if (layerTheta !== null) {
        var theta = layerTheta[i];
        if (typeof theta !== "number" || theta < 0) {
          throw valueError("config['layer_rope_theta'][" + i + "] must be a base >= 0 (0: NoPE), got " + repr(theta));
        }
        if (theta === 0) { nope.push(i); return; }
        base = theta;
        var bases = unique(layerTheta.filter(function (th, k) { return types[k] === t && th; }));
        if (bases.length > 1) name = t + "@" + fmtG(base);
      }
      if (!has(byName, name)) { byName[name] = { name: name, layers: [], base: base }; groups.push(byName[name]); }
      byName[name].layers.push(i);
      byName[name].base = base;
    });

    var rope = groups.map(function (grp) {
      var t = types[grp.layers[0]];
      var p = copy(params[t]);
      var sec = sectionsOf(p, modelType);
      var oneD = {};
      Object.keys(p).forEach(function (k) { if (MULTIMODAL.indexOf(k) < 0) oneD[k] = p[k]; });
      var kinds = unique([get(oneD, "type"), get(oneD, "rope_type")].filter(function (k) { return k !== null; }));
      if (kinds.indexOf("mrope") >= 0 && kinds.every(function (k) { return k === "mrope" || k === "default"; })) {
        delete oneD.type; // Qwen2-VL's config.json: transformers reads "mrope" as "default"
        oneD.rope_type = "default";
      }
      var read = fromHf(oneD, maxPos), theta = read[0], partial = read[1], scaling = read[2];
      var base = grp.base !== null ? grp.base : theta;
      if (base === null) {
        throw valueError("config has no rope_theta for layer type " + pyStr(t) + ": add rope_parameters['rope_theta'] (transformers' " +
          "default differs between model classes; 10,000 is not always right)");
      }
      var dim = dims[grp.layers[0]], width = dim[1];
      var rotaryDim = scaling !== null && scaling.type === "proportional" ? width : Math.trunc(width * (partial === null ? 1.0 : partial));
      if (rotaryDim < 2 || rotaryDim % 2) {
        throw valueError("layer type " + pyStr(t) + ": rotary width " + rotaryDim + " (head_dim " + width + " x partial_rotary_factor " +
          (partial === null ? "None" : pyFloat(partial)) + ") must be even and >= 2");
      }
      if (sec[0] !== null && sec[0].reduce(function (a, b) { return a + b; }, 0) !== rotaryDim / 2) {
        throw valueError("rope_parameters['mrope_section']=" + repr(sec[0]) + " must sum to rotary_dim / 2 = " + rotaryDim / 2 +
          " for layer type " + pyStr(t));
      }
      return {
        name: grp.name, layer_type: t, layers: grp.layers, head_dim: dim[0], rotary_dim: rotaryDim, base: base,
        scaling: scaling, layout: layout, rotary_offset: dim[2], mrope_section: sec[0], mrope_interleaved: sec[1],
        max_position_embeddings: maxPos,
      };
    });
    return { model_type: modelType, layer_types: types, rope: rope, nope_layers: nope, no_attention_layers: noAttention,
      max_position_embeddings: maxPos };
  }

  // LayerRoPE.frequencies, .trained_length
  function layerFrequencies(layer, seqLen) {
    var s = layer.scaling;
    if (s !== null && s.type === "dynamic") return scaledFrequencies(s, layer.rotary_dim, layer.base, { seqLen: seqLen });
    if (s !== null && s.type === "longrope") {
      var long = seqLen !== undefined && seqLen !== null && seqLen > s.original_max_position_embeddings;
      return scaledFrequencies(s, layer.rotary_dim, layer.base, { long: long });
    }
    return scaledFrequencies(s, layer.rotary_dim, layer.base);
  }
  function trainedLength(layer) {
    var s = layer.scaling;
    if (s !== null && has(s, "original_max_position_embeddings")) return s.original_max_position_embeddings;
    if (s === null || (s.type === "proportional" && s.factor === 1.0)) return layer.max_position_embeddings;
    return null;
  }
  // the unscaled ladder the pairs were trained with (proportional: that of the whole head)
  function trainedFrequencies(layer) {
    var width = layer.scaling !== null && layer.scaling.type === "proportional" ? layer.head_dim : layer.rotary_dim;
    return invFrequencies(width, layer.base).slice(0, Math.floor(layer.rotary_dim / 2));
  }

  // posenc.rope.hf_config.reach
  function reach(layer, L) {
    if (L === undefined) L = trainedLength(layer);
    if (L === null || (layer.scaling !== null && layer.scaling.type === "dynamic")) return null;
    var trained = trainedFrequencies(layer);
    var long = layer.scaling !== null && layer.scaling.type === "longrope";
    var scaled = layerFrequencies(layer, long ? L + 1 : null);
    var out = Infinity;
    for (var j = 0; j < trained.length; j++) {
      var w = trained[j], w2 = scaled[j];
      if (w2 === 0.0 || L * w >= 2 * Math.PI) continue;
      out = Math.min(out, L * w / w2);
    }
    return out;
  }

  function rule(s) {
    if (s === null) return "none";
    if (s.type === "longrope") return "longrope (factor " + fmtG(s.factor) + ")";
    if (s.type === "proportional") return "proportional " + fmtG(s.partial_rotary_factor) + (s.factor === 1 ? "" : " / " + fmtG(s.factor));
    if (s.type === "ntk") return "ntk (alpha " + fmtG(s.factor) + ")";
    return s.type + " x" + fmtG(s.factor);
  }

  function ranges(idx) {
    var parts = [], i = 0;
    while (i < idx.length) {
      var j = i;
      while (j + 1 < idx.length && idx[j + 1] === idx[j] + 1) j++;
      parts.push(i === j ? String(idx[i]) : idx[i] + "-" + idx[j]);
      i = j + 1;
    }
    return parts.join(", ");
  }

  // posenc.inspect_config; each row also holds `frequencies` (the remapped ones, as
  // LayerRoPE.frequencies()), `trained_frequencies` and `scaling_params` (scaling.as_dict)
  function inspectConfig(config, trainedLengthArg) {
    if (trainedLengthArg !== undefined && trainedLengthArg !== null) checkInt("trained_length", trainedLengthArg);
    else trainedLengthArg = null;
    var rc = ropeLayersFromConfig(config);
    var rows = [], notes = [];
    rc.rope.forEach(function (r) {
      var w = layerFrequencies(r);
      var L = trainedLengthArg === null ? trainedLength(r) : trainedLengthArg;
      var turning = null, firstSlow = null;
      if (L !== null) {
        turning = 0;
        w.forEach(function (x, j) {
          if (x > 0 && 2 * Math.PI / x <= L) turning++;
          else if (x > 0 && firstSlow === null) firstSlow = j;
        });
      }
      var sections = null;
      if (r.mrope_section !== null) {
        sections = repr(r.mrope_section) + " " + (r.mrope_interleaved ? "interleaved" : "blocks");
        if (r.mrope_section.length !== 3) {
          notes.push(r.name + ": " + r.mrope_section.length + " position axes (XD-RoPE); an engine with three axes cannot run it");
        }
      }
      rows.push({
        layer_type: r.name, layers: r.layers, head_dim: r.head_dim, rotary_dim: r.rotary_dim, rotary_offset: r.rotary_offset,
        rotated_pairs: w.filter(function (x) { return x !== 0; }).length, layout: r.layout, base: r.base,
        scaling: rule(r.scaling), attention_scaling: attentionScaling(r.scaling), trained_length: L,
        turning_pairs: turning, first_slow_pair: firstSlow, reach: reach(r, L), sections: sections,
        frequencies: w, trained_frequencies: trainedFrequencies(r), scaling_params: scalingParams(r.scaling),
      });
      if (r.scaling !== null && r.scaling.type === "dynamic") {
        notes.push(r.name + ": dynamic NTK, frequencies recomputed from each call's length beyond " + L.toLocaleString("en-US"));
      }
    });
    return { model_type: rc.model_type, num_layers: rc.layer_types.length, rows: rows, nope_layers: rc.nope_layers,
      no_attention_layers: rc.no_attention_layers, notes: notes, layer_types: rc.layer_types };
  }

  // ------------------------------------------------------------------ examples (position keys of released config.json files)
  function repeat(xs, n) { var out = []; for (var i = 0; i < n; i++) out = out.concat(xs); return out; }
  var EXAMPLES = {
    "Llama 3.1 8B": {
      architectures: ["LlamaForCausalLM"], model_type: "llama", hidden_size: 4096, num_attention_heads: 32,
      num_key_value_heads: 8, num_hidden_layers: 32, max_position_embeddings: 131072, rope_theta: 500000.0,
      rope_scaling: { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192,
        rope_type: "llama3" },
    },
    "Gemma 3 4B (text model, as transformers 5 saves it)": {
      architectures: ["Gemma3ForCausalLM"], model_type: "gemma3_text", hidden_size: 2560, head_dim: 256,
      num_attention_heads: 8, num_key_value_heads: 4, num_hidden_layers: 34, max_position_embeddings: 131072,
      sliding_window: 1024, layer_types: repeat(["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
        "sliding_attention", "full_attention"], 6).slice(0, 34),
      rope_parameters: { sliding_attention: { rope_type: "default", rope_theta: 10000.0 },
        full_attention: { rope_type: "linear", factor: 8.0, rope_theta: 1000000.0 } },
    },
    "Qwen2-VL 7B": {
      architectures: ["Qwen2VLForConditionalGeneration"], model_type: "qwen2_vl", hidden_size: 3584, num_attention_heads: 28,
      num_key_value_heads: 4, num_hidden_layers: 28, max_position_embeddings: 32768, rope_theta: 1000000.0,
      sliding_window: 32768, use_sliding_window: false, rope_scaling: { type: "mrope", mrope_section: [16, 24, 24] },
    },
    "DeepSeek-V3": {
      architectures: ["DeepseekV3ForCausalLM"], model_type: "deepseek_v3", hidden_size: 7168, num_attention_heads: 128,
      num_key_value_heads: 128, num_hidden_layers: 61, kv_lora_rank: 512, q_lora_rank: 1536, qk_nope_head_dim: 128,
      qk_rope_head_dim: 64, v_head_dim: 128, max_position_embeddings: 163840, rope_theta: 10000,
      rope_scaling: { beta_fast: 32, beta_slow: 1, factor: 40, mscale: 1.0, mscale_all_dim: 1.0,
        original_max_position_embeddings: 4096, type: "yarn" },
    },
    "gpt-oss-20b": {
      architectures: ["GptOssForCausalLM"], model_type: "gpt_oss", hidden_size: 2880, head_dim: 64, num_attention_heads: 64,
      num_key_value_heads: 8, num_hidden_layers: 24, layer_types: repeat(["sliding_attention", "full_attention"], 12),
      sliding_window: 128, initial_context_length: 4096, max_position_embeddings: 131072, rope_theta: 150000,
      rope_scaling: { beta_fast: 32.0, beta_slow: 1.0, factor: 32.0, original_max_position_embeddings: 4096, rope_type: "yarn",
        truncate: false },
    },
    "OLMo 3 7B": {
      architectures: ["Olmo3ForCausalLM"], model_type: "olmo3", hidden_size: 4096, num_attention_heads: 32,
      num_key_value_heads: 32, num_hidden_layers: 32, max_position_embeddings: 65536, sliding_window: 4096,
      layer_types: repeat(["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], 8),
      rope_theta: 500000, rope_scaling: { attention_factor: 1.2079441541679836, beta_fast: 32.0, beta_slow: 1.0, factor: 8.0,
        original_max_position_embeddings: 8192, rope_type: "yarn" },
    },
    "SmolLM3 3B (NoPE every fourth layer)": {
      architectures: ["SmolLM3ForCausalLM"], model_type: "smollm3", hidden_size: 2048, num_attention_heads: 16,
      num_key_value_heads: 4, num_hidden_layers: 36, max_position_embeddings: 65536, rope_theta: 5000000.0,
      rope_scaling: null, no_rope_layer_interval: 4, no_rope_layers: repeat([1, 1, 1, 0], 9), use_sliding_window: false,
    },
  };

  // ------------------------------------------------------------------ the page
  var STYLE = [
    ".posenc-config-explorer { margin: 1.5rem 0; }",
    ".posenc-config-explorer .cx-live { border: 1px solid var(--pst-color-border); border-radius: 0.4rem; padding: 0.75rem 1rem;",
    "  background: var(--pst-color-surface); }",
    ".posenc-config-explorer label { font-weight: 600; margin-right: 0.5rem; }",
    ".posenc-config-explorer .cx-row { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: center; margin: 0.4rem 0; }",
    ".posenc-config-explorer textarea { width: 100%; min-height: 10rem; font-family: var(--pst-font-family-monospace, monospace);",
    "  font-size: 0.8rem; color: var(--pst-color-text-base); background: var(--pst-color-background);",
    "  border: 1px solid var(--pst-color-border); border-radius: 0.3rem; padding: 0.4rem; box-sizing: border-box; }",
    ".posenc-config-explorer select, .posenc-config-explorer input { color: var(--pst-color-text-base);",
    "  background: var(--pst-color-background); border: 1px solid var(--pst-color-border); border-radius: 0.3rem; padding: 0.15rem 0.3rem;",
    "  max-width: 100%; box-sizing: border-box; }",
    ".posenc-config-explorer .cx-error { border-left: 4px solid var(--pst-color-danger); padding: 0.4rem 0.75rem; margin: 0.5rem 0;",
    "  background: var(--pst-color-background); color: var(--pst-color-text-base); }",
    ".posenc-config-explorer .cx-out { overflow-x: auto; }",
    ".posenc-config-explorer table { font-size: 0.85rem; font-variant-numeric: tabular-nums; margin: 0.5rem 0; }",
    ".posenc-config-explorer th, .posenc-config-explorer td { padding: 0.2rem 0.5rem; vertical-align: top; }",
    ".posenc-config-explorer table.cx-summary th { text-align: left; white-space: nowrap; }",
    ".posenc-config-explorer td.num { text-align: right; }",
    ".posenc-config-explorer table.cx-overview th, .posenc-config-explorer table.cx-overview td,",
    ".posenc-config-explorer table.cx-freq th, .posenc-config-explorer table.cx-freq td { white-space: nowrap; }",
    ".posenc-config-explorer table.cx-overview td.cx-layers { white-space: normal; min-width: 7rem; }",
    ".posenc-config-explorer details { margin: 0.5rem 0 1rem; }",
    ".posenc-config-explorer summary { cursor: pointer; }",
    "@media print { .posenc-config-explorer .cx-input, .posenc-config-explorer details { display: none; }",
    "  .posenc-config-explorer table.cx-overview th, .posenc-config-explorer table.cx-overview td { white-space: normal; } }",
    ".posenc-config-explorer table.cx-summary caption { caption-side: top; text-align: left; font-weight: 700; font-size: 1.1rem;",
    "  color: var(--pst-color-text-base); padding: 0.75rem 0 0.25rem; }",
  ].join("\n");

  function h(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c !== null) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function grouped(n) { return n.toLocaleString("en-US", { maximumFractionDigits: 0 }); }
  function length(x, dynamic) {
    if (x === null) return dynamic ? "per call" : "-";
    return x === Infinity ? "all" : grouped(Math.round(x));
  }
  function sig(x) { return fmtG(x, 4); }
  function paramsText(p) {
    if (p === null) return "-";
    return Object.keys(p).filter(function (k) { return k !== "type"; }).map(function (k) {
      var v = p[k];
      if (Array.isArray(v)) return k + " = [" + v.length + " numbers]";
      return k + " = " + (typeof v === "number" ? fmtG(v) : String(v));
    }).join(", ") || "-";
  }

  function summaryTable(rep, i) {
    var r = rep.rows[i], dynamic = r.scaling.indexOf("dynamic") === 0;
    var rows = [
      ["layers", ranges(r.layers) + " (" + r.layers.length + " of " + rep.num_layers + ")"],
      ["rotated pairs", r.rotated_pairs + " of the head's " + Math.floor(r.head_dim / 2) +
        (r.rotary_offset ? " (coordinates " + r.rotary_offset + " to " + (r.rotary_offset + r.rotary_dim - 1) + " of " + r.head_dim + ")" : "")],
      ["layout", r.layout === "half" ? "half: pairs (j, j + d/2)" : "interleaved: pairs (2j, 2j + 1)"],
      ["base", fmtG(r.base)],
      ["scaling", r.scaling],
      ["its parameters", paramsText(r.scaling_params)],
      ["trained length L", r.trained_length === null ? "not stated: give it below" : grouped(r.trained_length)],
      ["pairs that turn within L", r.turning_pairs === null ? "-" : r.turning_pairs + " of " + r.rotated_pairs +
        (r.first_slow_pair === null ? "" : " (the first that does not: pair " + r.first_slow_pair + ")")],
      ["reach of the scaling", length(r.reach, dynamic)],
      ["attention factor", fmtG(r.attention_scaling)],
      ["multimodal sections", r.sections === null ? "-" : r.sections],
    ];
    return h("table", { class: "cx-summary" }, [h("caption", { text: r.layer_type }), h("tbody", {}, rows.map(function (kv) {
      return h("tr", {}, [h("th", { scope: "row", text: kv[0] }), h("td", { text: kv[1] })]);
    }))]);
  }

  function frequencyTable(r) {
    var L = r.trained_length;
    var head = ["pair j", "trained frequency", "remapped", "ratio", "wavelength (positions)", "turns within L"];
    var body = r.frequencies.map(function (w2, j) {
      var w = r.trained_frequencies[j], wl = w2 > 0 ? 2 * Math.PI / w2 : Infinity;
      return h("tr", {}, [
        h("td", { class: "num", text: String(j) }), h("td", { class: "num", text: sig(w) }), h("td", { class: "num", text: sig(w2) }),
        h("td", { class: "num", text: w2 === 0 ? "0 (still)" : fmtG(w2 / w) }),
        h("td", { class: "num", text: wl === Infinity ? "none" : grouped(Math.round(wl)) }),
        h("td", { text: L === null || w2 === 0 ? "-" : wl <= L ? "yes" : "no" }),
      ]);
    });
    return h("table", { class: "cx-freq" }, [h("thead", {}, [h("tr", {}, head.map(function (c) { return h("th", { scope: "col", text: c }); }))]),
      h("tbody", {}, body)]);
  }

  function render(out, rep) {
    out.textContent = "";
    out.appendChild(h("p", {}, [h("strong", { text: (rep.model_type || "model") + ": " + rep.num_layers + " layers, " +
      rep.rows.length + " rotating layer type" + (rep.rows.length === 1 ? "" : "s") })]));
    // the overview, one row per layer type
    var cols = ["layer type", "layers", "pairs", "layout", "base", "scaling", "attention factor", "turn within L", "L", "reach", "sections"];
    var table = h("table", { class: "cx-overview" }, [
      h("thead", {}, [h("tr", {}, cols.map(function (c) { return h("th", { scope: "col", text: c }); }))]),
      h("tbody", {}, rep.rows.map(function (r) {
        var cells = [r.layer_type, ranges(r.layers), r.rotated_pairs + "/" + Math.floor(r.head_dim / 2), r.layout, fmtG(r.base), r.scaling,
          fmtG(r.attention_scaling), r.turning_pairs === null ? "-" : String(r.turning_pairs),
          r.trained_length === null ? "-" : grouped(r.trained_length), length(r.reach, r.scaling.indexOf("dynamic") === 0),
          r.sections === null ? "-" : r.sections];
        return h("tr", { "data-layer-type": r.layer_type }, cells.map(function (c, k) {
          return h("td", k === 1 ? { class: "cx-layers", text: c } : { text: c });
        }));
      })),
    ]);
    out.appendChild(table);
    out.appendChild(h("p", { class: "cx-nope", text: "NoPE layers (attention without positions): " + (ranges(rep.nope_layers) || "none") }));
    if (rep.no_attention_layers.length) {
      out.appendChild(h("p", { text: "Layers without attention (no positions): " + ranges(rep.no_attention_layers) }));
    }
    rep.notes.forEach(function (n) { out.appendChild(h("p", { class: "cx-note", text: "Note: " + n })); });
    rep.rows.forEach(function (r, i) {
      out.appendChild(summaryTable(rep, i));
      out.appendChild(h("details", {}, [h("summary", { text: "The " + r.frequencies.length + " frequencies, remapped, against L" }),
        frequencyTable(r)]));
    });
  }

  function mount(el) {
    if (el.getAttribute("data-mounted")) return;
    el.setAttribute("data-mounted", "1");
    var id = "cx" + Math.random().toString(36).slice(2, 8);
    var select = h("select", { id: id + "-example", name: "example" }, [h("option", { value: "", text: "(your own)" })]
      .concat(Object.keys(EXAMPLES).map(function (k) { return h("option", { value: k, text: k }); })));
    var area = h("textarea", { id: id + "-config", name: "config", spellcheck: "false", rows: "12" });
    var lengthInput = h("input", { id: id + "-length", name: "trained_length", type: "number", min: "1", step: "1",
      placeholder: "from the config" });
    var out = h("div", { class: "cx-out", "aria-live": "polite" });
    var live = h("div", { class: "cx-live" }, [
      h("div", { class: "cx-row" }, [h("label", { for: id + "-example", text: "Example config" }), select]),
      h("div", { class: "cx-input" }, [h("label", { for: id + "-config", text: "config.json" }), area,
        h("div", { class: "cx-row" }, [h("label", { for: id + "-length", text: "Trained length (optional)" }), lengthInput])]),
      out,
    ]);
    el.textContent = "";
    el.appendChild(live);

    function update() {
      var text = area.value.trim();
      el.setAttribute("data-state", "");
      if (!text) { out.textContent = ""; return; }
      var cfg;
      try {
        cfg = JSON.parse(text);
      } catch (e) {
        out.textContent = "";
        out.appendChild(h("div", { class: "cx-error", role: "alert", text: "This is not valid JSON: " + e.message }));
        el.setAttribute("data-state", "error");
        return;
      }
      var L = lengthInput.value.trim() === "" ? null : Number(lengthInput.value);
      try {
        var rep = inspectConfig(cfg, L);
        render(out, rep);
        el.setAttribute("data-state", "ok");
        el._report = rep;
      } catch (e) {
        out.textContent = "";
        out.appendChild(h("div", { class: "cx-error", role: "alert" }, [
          h("strong", { text: (e.isConfigError ? e.name : "Error") + ": " }), e.message]));
        el.setAttribute("data-state", "error");
      }
    }
    select.addEventListener("change", function () {
      if (select.value) area.value = JSON.stringify(EXAMPLES[select.value], null, 2);
      update();
    });
    area.addEventListener("input", function () { select.value = ""; update(); });
    lengthInput.addEventListener("input", update);
    var first = el.getAttribute("data-example") || Object.keys(EXAMPLES)[0];
    if (has(EXAMPLES, first)) {
      select.value = first;
      area.value = JSON.stringify(EXAMPLES[first], null, 2);
    }
    update();
  }

  function mountAll() {
    if (!document.getElementById("posenc-config-explorer-style")) {
      document.head.appendChild(h("style", { id: "posenc-config-explorer-style", text: STYLE }));
    }
    Array.prototype.forEach.call(document.querySelectorAll(".posenc-config-explorer"), mount);
  }

  var api = {
    inspectConfig: inspectConfig, ropeLayersFromConfig: ropeLayersFromConfig, fromHf: fromHf, reach: reach,
    scaledFrequencies: scaledFrequencies, invFrequencies: invFrequencies, fmtG: fmtG, EXAMPLES: EXAMPLES, mount: mount,
  };
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.posencConfigExplorer = api;
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
    else mountAll();
  }
})(typeof window !== "undefined" ? window : globalThis);
