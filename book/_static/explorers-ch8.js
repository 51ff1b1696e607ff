/* Explorer of chapter 8 (notebooks/08_multidim.ipynb), hand-written, no library:
 *
 * - "multidim": an image or video grid of merged tokens with its position ids (1-D index
 *   of the flattened sequence, 2-D (row, column), or M-RoPE (time, height, width) after a
 *   text prefix), and the score of one query patch over the first frame under axial RoPE,
 *   RoPE-Mixed (one direction, the paper's initialisation) or the 2-D sin-cos table, for
 *   query and key vectors that are equal (all ones) so that only position differs.
 *
 * Registered with explorers.js (loaded first, see book/_ext/explorers.py). The formulas
 * are posenc's (posenc/multimodal.py, posenc/book/vision.py query_scores); the browser
 * test (tests/site/test_site.py) checks their numbers against posenc.
 */
(function () {
  "use strict";
  var X = window.posencExplorers;
  if (!X || !X.register) return;
  var el = X.svgElement, fmt = X.fmt;

  // ------------------------------------------------------------------ the formulas
  // lengths base**(-4j/d), j < d/4 (posenc.AxialRotaryEmbedding, sinusoidal_encoding_2d)
  function ladder(d, base) {
    var out = [];
    for (var j = 0; j < Math.floor(d / 4); j++) out.push(Math.pow(base, (-4 * j) / d));
    return out;
  }

  // <R(r,c) 1, R(r+dr, c+dc) 1> for axial RoPE: every pair (1, 1) gives 2 cos(angle)
  function axialScore(dr, dc, d, base) {
    var w = ladder(d, base), s = 0;
    for (var j = 0; j < w.length; j++) s += 2 * Math.cos(dr * w[j]) + 2 * Math.cos(dc * w[j]);
    return s;
  }

  // RoPE-Mixed at the paper's initialisation with direction `angle` (radians): pair t
  // has frequency length base**(-4t/d) pointing at angle (row part sin, column part cos),
  // pair d/4 + t the same length at angle + pi/2.
  function mixedScore(dr, dc, d, base, angle) {
    var w = ladder(d, base), s = 0;
    for (var t = 0; t < w.length; t++) {
      for (var k = 0; k < 2; k++) {
        var a = angle + (k * Math.PI) / 2;
        s += 2 * Math.cos(w[t] * (Math.sin(a) * dr + Math.cos(a) * dc));
      }
    }
    return s;
  }

  // rows of the 2-D sin-cos table (d wide): sum_k cos(dc w_k) + cos(dr w_k), base 10000
  function sincosScore(dr, dc, d) {
    var w = ladder(d, 10000), s = 0;
    for (var k = 0; k < w.length; k++) s += Math.cos(dc * w[k]) + Math.cos(dr * w[k]);
    return s;
  }

  // scores of query (qr, qc) against every patch of an H x W grid, row-major
  function scoreMap(scheme, H, W, qr, qc, d, angle) {
    var out = [];
    for (var r = 0; r < H; r++) {
      for (var c = 0; c < W; c++) {
        var dr = r - qr, dc = c - qc;
        if (scheme === "rope_axial") out.push(axialScore(dr, dc, d, 100));
        else if (scheme === "rope_mixed") out.push(mixedScore(dr, dc, d, 10, angle));
        else out.push(sincosScore(dr, dc, d));
      }
    }
    return out;
  }

  // Ids of the T x H x W merged tokens after `text` text tokens, frame by frame, row by
  // row: "1d" (index in the sequence), "2d" ([row, column]) or "mrope" ([time, height,
  // width], posenc.mrope_position_ids: s + frame, s + row, s + column with s = text).
  function gridIds(T, H, W, kind, text) {
    var out = [];
    for (var t = 0; t < T; t++) {
      for (var r = 0; r < H; r++) {
        for (var c = 0; c < W; c++) {
          if (kind === "1d") out.push([text + (t * H + r) * W + c]);
          else if (kind === "2d") out.push([r, c]);
          else out.push([text + t, text + r, text + c]);
        }
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ the explorer
  var KINDS = ["1d", "2d", "mrope"], KIND_NAMES = ["1-D index", "2-D (row, column)", "M-RoPE (t, h, w)"];
  var SCHEMES = ["rope_axial", "rope_mixed", "sincos_2d"], SCHEME_NAMES = ["axial RoPE", "RoPE-Mixed", "2-D sin-cos"];
  var D = 32, TEXT = 2;

  function color(v, vmax) {
    // diverging: blue (-vmax), white (0), red (+vmax)
    var x = Math.max(-1, Math.min(1, v / vmax)), a = Math.round(255 * (1 - Math.abs(x)));
    return x >= 0 ? "rgb(255," + a + "," + a + ")" : "rgb(" + a + "," + a + ",255)";
  }

  function multidimExplorer(root) {
    var ui = X.panel(root);
    var T = X.slider(ui.controls, "frames", "frames (video)", 1, 3, 1, 2);
    var H = X.slider(ui.controls, "height", "height (tokens)", 1, 8, 1, 4);
    var W = X.slider(ui.controls, "width", "width (tokens)", 1, 8, 1, 6);
    var kind = X.slider(ui.controls, "ids", "position ids", 0, 2, 1, 2, function (v) { return KIND_NAMES[v]; });
    var scheme = X.slider(ui.controls, "scheme", "score under", 0, 2, 1, 0, function (v) { return SCHEME_NAMES[v]; });
    var qr = X.slider(ui.controls, "qrow", "query row", 0, 7, 1, 1);
    var qc = X.slider(ui.controls, "qcol", "query column", 0, 7, 1, 2);
    var ang = X.slider(ui.controls, "angle", "Mixed direction (degrees)", 0, 180, 5, 30);
    var idsSvg = el("svg", { role: "img", class: "explorer-chart" });
    var mapSvg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(idsSvg);
    ui.live.appendChild(mapSvg);
    ui.live.appendChild(ui.note);

    function draw() {
      var t = +T.value, h = +H.value, w = +W.value, k = KINDS[+kind.value], sc = SCHEMES[+scheme.value];
      var r0 = Math.min(+qr.value, h - 1), c0 = Math.min(+qc.value, w - 1), angle = (+ang.value * Math.PI) / 180;
      var ids = gridIds(t, h, w, k, TEXT);
      // the ids: T frames side by side
      while (idsSvg.firstChild) idsSvg.removeChild(idsSvg.firstChild);
      var VW = 640, VH = 260, gap = 16;
      var cell = Math.min((VW - gap * (t - 1)) / (t * w), (VH - 24) / h);
      idsSvg.setAttribute("viewBox", "0 0 " + VW + " " + VH);
      for (var f = 0; f < t; f++) {
        var x0 = f * (w * cell + gap);
        el("text", { x: x0, y: 14, class: "label" }, idsSvg).textContent = t > 1 ? "frame " + f : "image";
        for (var r = 0; r < h; r++) {
          for (var c = 0; c < w; c++) {
            var isQ = f === 0 && r === r0 && c === c0;
            el("rect", { x: x0 + c * cell, y: 20 + r * cell, width: cell - 2, height: cell - 2,
                         class: isQ ? "tip s0" : "grid", fill: isQ ? "#fde68a" : "none" }, idsSvg);
            var label = ids[(f * h + r) * w + c].join(",");
            var size = Math.max(8, Math.min(15, cell / (0.62 * label.length + 0.8)));
            el("text", { x: x0 + c * cell + (cell - 2) / 2, y: 20 + r * cell + (cell - 2) / 2 + size / 3,
                         "text-anchor": "middle", "font-size": size.toFixed(1) }, idsSvg).textContent = label;
          }
        }
      }
      idsSvg.setAttribute("aria-label", KIND_NAMES[+kind.value] + " ids of a " + (t > 1 ? t + "-frame video" : "image") +
          " of " + h + " by " + w + " merged tokens after " + TEXT + " text tokens; the query patch highlighted.");
      // the score map of the first frame
      var s = scoreMap(sc, h, w, r0, c0, D, angle), vmax = 0;
      s.forEach(function (v) { vmax = Math.max(vmax, Math.abs(v)); });
      while (mapSvg.firstChild) mapSvg.removeChild(mapSvg.firstChild);
      var mc = Math.min(600 / w, 236 / h);
      mapSvg.setAttribute("viewBox", "0 0 640 260");
      for (var i = 0; i < s.length; i++) {
        var rr = Math.floor(i / w), cc = i % w;
        el("rect", { x: 20 + cc * mc, y: 12 + rr * mc, width: mc - 1, height: mc - 1, fill: color(s[i], vmax) }, mapSvg);
        el("text", { x: 20 + cc * mc + mc / 2, y: 12 + rr * mc + mc / 2 + 4, "text-anchor": "middle",
                     "font-size": Math.max(8, Math.min(13, mc / 4)).toFixed(1) }, mapSvg).textContent = s[i].toFixed(1);
      }
      mapSvg.setAttribute("aria-label", "Score of the query patch at row " + r0 + ", column " + c0 + " against every " +
          "patch of the first frame under " + SCHEME_NAMES[+scheme.value] + " (head width " + D + "): red high, blue low.");
      var lo = Math.min.apply(null, s), qid = ids[r0 * w + c0].join(", ");
      ui.note.textContent = "Query ids: (" + qid + "). Score from " + fmt(lo, 2) + " to " + fmt(vmax, 2) +
          " (the query against itself: " + fmt(s[r0 * w + c0], 1) + "). " +
          (sc === "rope_mixed" ? "Mixed frequencies point at " + (+ang.value) + " and " + (+ang.value + 90) +
            " degrees: the pattern is tilted." : "Axial: a sum of a row wave and a column wave.") +
          (k === "mrope" ? " Text after this segment starts at id " + (TEXT + Math.max(t, h, w)) + "." : "");
      root.dataset.state = [t, h, w, k, sc, r0, c0, +ang.value].join("/");
    }
    [T, H, W, kind, scheme, qr, qc, ang].forEach(function (x) { x.addEventListener("input", draw); });
    draw();
  }

  X.register("multidim", multidimExplorer);
  X.multidim = { axialScore: axialScore, mixedScore: mixedScore, sincosScore: sincosScore, scoreMap: scoreMap, gridIds: gridIds };
})();
