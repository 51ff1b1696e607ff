/* Explorer of chapter 8 (notebooks/08_multidim.ipynb), hand-written, no library:
 *
 * - "multidim": an image or video grid of merged tokens with its position ids (1-D index
 *   of the flattened sequence, 2-D (row, column), or M-RoPE (time, height, width) after a
 *   text prefix), and the score of one query patch over the first frame under axial RoPE,
 *   RoPE-Mixed (one direction, the paper's initialisation) or the 2-D sin-cos table, for
 *   query and key vectors that are equal (all ones) so that only position differs; with
 *   1-D ids the map is the score over the index offset (RoPE over the index, or the
 *   1-D sin-cos table). The map has its rows, columns, query cell and a colour bar.
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

  // With 1-D ids the grid is a sequence: the score depends on the index offset k only.
  // RoPE over the index (base 100, as axial RoPE): every pair (1, 1) of the d/2 gives
  // 2 cos(k base**(-2j/d)) (posenc.apply_rotary); the 1-D sin-cos table (base 10000):
  // sum_j cos(k 10000**(-2j/d)) (posenc.sinusoidal_encoding).
  function ropeScore1d(k, d, base) {
    var s = 0;
    for (var j = 0; j < Math.floor(d / 2); j++) s += 2 * Math.cos(k * Math.pow(base, (-2 * j) / d));
    return s;
  }

  function sincosScore1d(k, d) {
    var s = 0;
    for (var j = 0; j < Math.floor(d / 2); j++) s += Math.cos(k * Math.pow(10000, (-2 * j) / d));
    return s;
  }

  // scores of query (qr, qc) against every patch of an H x W grid, row-major, under
  // `scheme` with the ids of `kind` ("2d" and "mrope" give the same offsets within a
  // frame; "1d" gives the index offset (r - qr) W + (c - qc), and both RoPE schemes
  // become RoPE over the index)
  function scoreMap(scheme, H, W, qr, qc, d, angle, kind) {
    var out = [];
    for (var r = 0; r < H; r++) {
      for (var c = 0; c < W; c++) {
        var dr = r - qr, dc = c - qc;
        if (kind === "1d") out.push(scheme === "sincos_2d" ? sincosScore1d(dr * W + dc, d) : ropeScore1d(dr * W + dc, d, 100));
        else if (scheme === "rope_axial") out.push(axialScore(dr, dc, d, 100));
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

  // The width a chart is drawn at, in CSS pixels: its viewBox is that wide (explorers.js).
  var drawWidth = X.drawWidth;

  // the width of a label of digits and commas, in em (digits ~0.6 em, commas ~0.32 em),
  // with a little room on either side
  function labelEm(label) {
    var n = 0.3;
    for (var i = 0; i < label.length; i++) n += label[i] === "," ? 0.32 : 0.6;
    return n;
  }

  var MIN_TEXT_PX = 11; // the smallest text the explorer draws where it has the room

  // the score map of the first frame: rows and columns numbered, the query cell outlined,
  // a colour bar from -vmax to +vmax (at the right; under the map on a narrow screen)
  function drawMap(svg, s, h, w, r0, c0, vmax) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var VW = drawWidth(svg), narrow = VW < 480;
    var L = narrow ? 44 : 70, T = 30;
    var mc = narrow ? Math.min((VW - L - 8) / w, 56) : Math.min((VW - L - 100) / w, 232 / h);
    var gw = w * mc, gh = h * mc;
    svg.setAttribute("viewBox", "0 0 " + VW + " " + (narrow ? T + gh + 62 : 280));
    el("text", { x: L + gw / 2, y: 14, "text-anchor": "middle", class: "label" }, svg).textContent = "column";
    el("text", { x: 16, y: T + gh / 2, "text-anchor": "middle", class: "label",
                 transform: "rotate(-90 16 " + (T + gh / 2) + ")" }, svg).textContent = "row";
    for (var c = 0; c < w; c++) {
      el("text", { x: L + c * mc + mc / 2, y: T - 4, "text-anchor": "middle", class: "tick" }, svg).textContent = String(c);
    }
    for (var r = 0; r < h; r++) {
      el("text", { x: L - 6, y: T + r * mc + mc / 2 + 4, "text-anchor": "end", class: "tick" }, svg).textContent = String(r);
    }
    // the value in each cell where it fits at a readable size (the colours carry it otherwise)
    var fs = Math.min(13, (mc - 4) / 2.3);
    for (var i = 0; i < s.length; i++) {
      var rr = Math.floor(i / w), cc = i % w;
      el("rect", { x: L + cc * mc, y: T + rr * mc, width: mc - 1, height: mc - 1, fill: color(s[i], vmax) }, svg);
      if (fs >= MIN_TEXT_PX - 1) {
        el("text", { x: L + cc * mc + mc / 2, y: T + rr * mc + mc / 2 + fs / 3, "text-anchor": "middle", class: "cell",
                     style: "font-size:" + fs.toFixed(1) + "px" }, svg).textContent = s[i].toFixed(1);
      }
    }
    el("rect", { x: L + c0 * mc - 1, y: T + r0 * mc - 1, width: mc + 1, height: mc + 1, class: "query-cell" }, svg);
    // the colour bar: -vmax (blue) to +vmax (red)
    var n = 40, k, v;
    if (!narrow) {
      var bx = VW - 60, bw = 16, bh = 232;
      for (k = 0; k < n; k++) {
        v = vmax * (1 - (2 * (k + 0.5)) / n);
        el("rect", { x: bx, y: T + (k * bh) / n, width: bw, height: bh / n + 0.5, fill: color(v, vmax) }, svg);
      }
      el("rect", { x: bx, y: T, width: bw, height: bh, class: "frame" }, svg);
      [[vmax, T + 4], [0, T + bh / 2 + 4], [-vmax, T + bh + 4]].forEach(function (t) {
        el("text", { x: bx + bw + 4, y: t[1], class: "tick" }, svg).textContent = t[0] === 0 ? "0" : fmt(t[0], 1);
      });
      el("text", { x: bx + bw / 2, y: T + bh + 22, "text-anchor": "middle", class: "label" }, svg).textContent = "score";
    } else {
      var by = T + gh + 12, bl = gw, bt = 12;
      for (k = 0; k < n; k++) {
        v = vmax * ((2 * (k + 0.5)) / n - 1);
        el("rect", { x: L + (k * bl) / n, y: by, width: bl / n + 0.5, height: bt, fill: color(v, vmax) }, svg);
      }
      el("rect", { x: L, y: by, width: bl, height: bt, class: "frame" }, svg);
      [[-vmax, L, "start"], [0, L + bl / 2, "middle"], [vmax, L + bl, "end"]].forEach(function (t) {
        el("text", { x: t[1], y: by + bt + 15, "text-anchor": t[2], class: "tick" }, svg).textContent =
            t[0] === 0 ? "0" : fmt(t[0], 1);
      });
      el("text", { x: L - 6, y: by + bt - 1, "text-anchor": "end", class: "label" }, svg).textContent = "score";
    }
  }

  function multidimExplorer(root) {
    var ui = X.panel(root);
    var T = X.slider(ui.controls, "frames", "frames (video)", 1, 3, 1, 2);
    var H = X.slider(ui.controls, "height", "height (tokens)", 1, 8, 1, 4);
    var W = X.slider(ui.controls, "width", "width (tokens)", 1, 8, 1, 6);
    var kind = X.select(ui.controls, "ids", "position ids", KINDS.map(function (k, i) { return [k, KIND_NAMES[i]]; }), "mrope");
    var scheme = X.select(ui.controls, "scheme", "score under", SCHEMES.map(function (k, i) { return [k, SCHEME_NAMES[i]]; }), "rope_axial");
    var qr = X.slider(ui.controls, "qrow", "query row", 0, 7, 1, 1);
    var qc = X.slider(ui.controls, "qcol", "query column", 0, 7, 1, 2);
    var ang = X.slider(ui.controls, "angle", "Mixed direction (degrees)", 0, 180, 5, 30);
    var idsSvg = el("svg", { role: "img", class: "explorer-chart" });
    var mapSvg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(idsSvg);
    ui.live.appendChild(mapSvg);
    ui.live.appendChild(ui.note);

    function draw() {
      var t = +T.value, h = +H.value, w = +W.value, k = kind.value, sc = scheme.value;
      var kname = KIND_NAMES[KINDS.indexOf(k)], sname = SCHEME_NAMES[SCHEMES.indexOf(sc)];
      var r0 = Math.min(+qr.value, h - 1), c0 = Math.min(+qc.value, w - 1), angle = (+ang.value * Math.PI) / 180;
      var ids = gridIds(t, h, w, k, TEXT);
      // the ids: the frames side by side where their labels fit at MIN_TEXT_PX, else fewer
      // to a row (one under another on a phone)
      while (idsSvg.firstChild) idsSvg.removeChild(idsSvg.firstChild);
      var VW = drawWidth(idsSvg), gap = 16, head = 20;
      var labels = ids.map(function (x) { return x.join(","); });
      var em = Math.max.apply(null, labels.map(labelEm));
      var need = MIN_TEXT_PX * em + 4; // the smallest cell that holds every label at that size
      var perRow = t, fit = (VW - gap * (t - 1)) / (t * w);
      while (perRow > 1 && fit < need) {
        perRow -= 1;
        fit = (VW - gap * (perRow - 1)) / (perRow * w);
      }
      var cell = Math.min(fit, 64, Math.max(need, 236 / h));
      var size = Math.max(8, Math.min(15, (cell - 4) / em));
      var blockH = head + h * cell, nRows = Math.ceil(t / perRow);
      idsSvg.setAttribute("viewBox", "0 0 " + VW + " " + (nRows * blockH + (nRows - 1) * gap));
      for (var f = 0; f < t; f++) {
        var x0 = (f % perRow) * (w * cell + gap), y0 = Math.floor(f / perRow) * (blockH + gap);
        el("text", { x: x0, y: y0 + 14, class: "label" }, idsSvg).textContent = t > 1 ? "frame " + f : "image";
        for (var r = 0; r < h; r++) {
          for (var c = 0; c < w; c++) {
            var isQ = f === 0 && r === r0 && c === c0;
            el("rect", { x: x0 + c * cell, y: y0 + head + r * cell, width: cell - 2, height: cell - 2,
                         class: isQ ? "tip s0" : "grid", fill: isQ ? "#fde68a" : "none" }, idsSvg);
            el("text", { x: x0 + c * cell + (cell - 2) / 2, y: y0 + head + r * cell + (cell - 2) / 2 + size / 3,
                         "text-anchor": "middle", style: "font-size:" + size.toFixed(1) + "px" },
               idsSvg).textContent = labels[(f * h + r) * w + c];
          }
        }
      }
      idsSvg.setAttribute("aria-label", kname + " ids of a " + (t > 1 ? t + "-frame video" : "image") +
          " of " + h + " by " + w + " merged tokens after " + TEXT + " text tokens; the query patch highlighted.");
      // the score map of the first frame
      var s = scoreMap(sc, h, w, r0, c0, D, angle, k), vmax = 0;
      s.forEach(function (v) { vmax = Math.max(vmax, Math.abs(v)); });
      drawMap(mapSvg, s, h, w, r0, c0, vmax);
      var under = k === "1d" ? (sc === "sincos_2d" ? "the 1-D sin-cos table" : "RoPE over the index") : sname;
      mapSvg.setAttribute("aria-label", "Score of the query patch at row " + r0 + ", column " + c0 + " (outlined) against " +
          "every patch of the first frame under " + under + " (head width " + D + "): red high, blue low, colour bar " +
          "from " + fmt(-vmax, 1) + " to " + fmt(vmax, 1) + ".");
      var lo = Math.min.apply(null, s), qid = ids[r0 * w + c0].join(", ");
      var how;
      if (k === "1d") {
        how = "1-D ids: the grid is read as a sequence, so the score depends on the index offset (row offset × " + w +
            " + column offset) only, here under " + under + ": the patch below the query scores like the one " + w +
            " places to its right.";
      } else if (sc === "rope_mixed") {
        how = "Mixed frequencies point at " + (+ang.value) + " and " + (+ang.value + 90) + " degrees: the pattern is tilted.";
      } else if (sc === "rope_axial") {
        how = "Axial RoPE: a sum of a row wave and a column wave.";
      } else {
        how = "2-D sin-cos: half the table encodes the row, half the column; a sum of a row wave and a column wave.";
      }
      ui.note.textContent = "Query ids: (" + qid + "). Score from " + fmt(lo, 2) + " to " + fmt(vmax, 2) +
          " (the query against itself: " + fmt(s[r0 * w + c0], 1) + "). " + how +
          (k === "mrope" ? " Text after this segment starts at id " + (TEXT + Math.max(t, h, w)) + "." : "");
      root.dataset.state = [t, h, w, k, sc, r0, c0, +ang.value].join("/");
    }
    [T, H, W, qr, qc, ang].forEach(function (x) { x.addEventListener("input", draw); });
    [kind, scheme].forEach(function (x) { x.addEventListener("change", draw); });
    // drawn at the width the page gives it: redrawn when that changes (a phone turned)
    X.redrawOnResize(idsSvg, draw);
    draw();
  }

  X.register("multidim", multidimExplorer);
  X.multidim = { axialScore: axialScore, mixedScore: mixedScore, sincosScore: sincosScore, scoreMap: scoreMap, gridIds: gridIds,
                 ropeScore1d: ropeScore1d, sincosScore1d: sincosScore1d };
})();
