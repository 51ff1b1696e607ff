/* Interactive explorers of the book (book/explore.md), hand-written, no library.
 *
 * Each explorer is a <div class="posenc-explorer" data-explorer="NAME"> written by the
 * `explorer` directive (book/_ext/explorers.py), which also puts a static figure made by
 * posenc at build time inside it (shown in print, and where scripts do not run). The
 * formulas below are those of posenc (posenc/sinusoidal.py, posenc/rotary.py); the
 * browser test (tests/site/test_site.py) checks their numbers against posenc.
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------ the formulas
  // omega_i = 1 / base**(2i/d), i = 0 .. ceil(d/2)-1 (posenc.sinusoidal_frequencies)
  function frequencies(d, base) {
    var out = [];
    for (var i = 0; i < Math.floor((d + 1) / 2); i++) out.push(1 / Math.pow(base, (2 * i) / d));
    return out;
  }

  // PE[pos, 2i] = sin(pos / base**(2i/d)), PE[pos, 2i+1] = cos(...) (posenc.sinusoidal_encoding)
  function encoding(pos, d, base) {
    var row = new Array(d);
    for (var i = 0; 2 * i < d; i++) {
      var angle = pos / Math.pow(base, (2 * i) / d);
      row[2 * i] = Math.sin(angle);
      if (2 * i + 1 < d) row[2 * i + 1] = Math.cos(angle);
    }
    return row;
  }

  function dot(a, b) {
    var s = 0;
    for (var i = 0; i < a.length; i++) s += a[i] * b[i];
    return s;
  }

  // PE(p) . PE(p + k) for k = -kmax .. kmax
  function dotCurve(p, d, base, kmax) {
    var pe = encoding(p, d, base), out = [];
    for (var k = -kmax; k <= kmax; k++) out.push(dot(pe, encoding(p + k, d, base)));
    return out;
  }

  // RoPE, interleaved pairs (x_2j, x_2j+1) rotated by the angle pos * omega_j
  function rotate(x, pos, freqs) {
    var out = x.slice();
    for (var j = 0; j < freqs.length; j++) {
      var c = Math.cos(pos * freqs[j]), s = Math.sin(pos * freqs[j]);
      out[2 * j] = x[2 * j] * c - x[2 * j + 1] * s;
      out[2 * j + 1] = x[2 * j] * s + x[2 * j + 1] * c;
    }
    return out;
  }

  function ropeScore(q, k, m, n, base) {
    var f = frequencies(q.length, base);
    return dot(rotate(q, m, f), rotate(k, n, f));
  }

  // Context extension (posenc.rotary_frequencies with `scaling`): the frequencies of a
  // head of width dim after the remap of `kind` with factor `factor`.
  function scaledFrequencies(kind, dim, base, p) {
    var inv = frequencies(dim, base), factor = p.factor;
    if (kind === "default") return inv;
    if (kind === "linear") return inv.map(function (w) { return w / factor; });
    if (kind === "ntk") return frequencies(dim, base * Math.pow(factor, dim / (dim - 2)));
    if (kind === "yarn") {
      var original = p.original_max_position_embeddings;
      var fast = p.beta_fast === undefined ? 32 : p.beta_fast;
      var slow = p.beta_slow === undefined ? 1 : p.beta_slow;
      var corr = function (r) { return (dim * Math.log(original / (r * 2 * Math.PI))) / (2 * Math.log(base)); };
      var low = Math.floor(corr(fast)), high = Math.ceil(corr(slow));
      low = Math.max(low, 0); high = Math.min(high, dim - 1);
      if (low === high) high += 0.001;
      return inv.map(function (w, j) {
        var ramp = Math.min(Math.max((j - low) / (high - low), 0), 1);
        var keep = 1 - ramp;
        return (w / factor) * (1 - keep) + w * keep;
      });
    }
    if (kind === "llama3") {
      var L = p.original_max_position_embeddings, lo = p.low_freq_factor, hi = p.high_freq_factor;
      return inv.map(function (w) {
        var wavelen = (2 * Math.PI) / w;
        if (wavelen > L / lo) return w / factor;
        if (wavelen < L / hi) return w;
        var smooth = (L / wavelen - lo) / (hi - lo);
        return (1 - smooth) * (w / factor) + smooth * w;
      });
    }
    throw new Error("unknown scaling " + kind);
  }

  // ------------------------------------------------------------------ drawing helpers
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, parent) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(x, digits) {
    if (x === 0) return "0";
    var a = Math.abs(x);
    if (a >= 1e5 || a < 1e-3) return x.toExponential(digits === undefined ? 2 : digits);
    return x.toFixed(digits === undefined ? 3 : digits);
  }

  // The width a chart is drawn at, in CSS pixels (240 to 640). A chart's viewBox is that
  // wide, so one unit is one pixel and its text keeps its size on a phone (a fixed
  // 640-unit box shrank 13 px text to 6.9 px at 390 px).
  function drawWidth(svg) {
    var w = svg.getBoundingClientRect().width || (svg.parentNode && svg.parentNode.clientWidth) || 640;
    return Math.max(240, Math.min(640, Math.round(w)));
  }

  // Call draw() again when the width svg is drawn at changes (a phone turned, a window
  // resized), at most once per 150 ms.
  function redrawOnResize(svg, draw) {
    var drawnAt = drawWidth(svg), pending = null;
    window.addEventListener("resize", function () {
      if (pending) return;
      pending = window.setTimeout(function () {
        pending = null;
        if (drawWidth(svg) !== drawnAt) { drawnAt = drawWidth(svg); draw(); }
      }, 150);
    });
  }

  // A line chart, its viewBox as wide as the page draws it (drawWidth) and a little
  // taller than wide on a phone; series: [{values, label, cls}], x values xs.
  function lineChart(svg, xs, series, opts) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = drawWidth(svg), H = W >= 480 ? 300 : Math.round(Math.max(220, 0.72 * W)), L = 62, R = 12, T = 12, B = 42;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    var ylog = !!opts.ylog;
    var tr = function (v) { return ylog ? Math.log10(v) : v; };
    var ymin = opts.ymin, ymax = opts.ymax;
    var xmin = xs[0], xmax = xs[xs.length - 1];
    var X = function (x) { return L + ((x - xmin) / (xmax - xmin)) * (W - L - R); };
    var Y = function (y) { return T + (1 - (tr(y) - tr(ymin)) / (tr(ymax) - tr(ymin))) * (H - T - B); };
    var axes = el("g", { class: "axes" }, svg);
    el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B }, axes);
    el("line", { x1: L, y1: T, x2: L, y2: H - B }, axes);
    (opts.yticks || []).forEach(function (t) {
      el("line", { x1: L - 4, y1: Y(t), x2: W - R, y2: Y(t), class: "grid" }, axes);
      el("text", { x: L - 7, y: Y(t) + 4, "text-anchor": "end" }, axes).textContent = opts.yfmt ? opts.yfmt(t) : fmt(t, 1);
    });
    (opts.xticks || []).forEach(function (t) {
      el("line", { x1: X(t), y1: H - B, x2: X(t), y2: H - B + 4 }, axes);
      el("text", { x: X(t), y: H - B + 17, "text-anchor": "middle" }, axes).textContent = String(t);
    });
    el("text", { x: W >= 480 ? (L + W - R) / 2 : W / 2, y: H - 6, "text-anchor": "middle", class: "label" }, axes).textContent = opts.xlabel;
    el("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "label",
                 transform: "rotate(-90 14 " + (T + H - B) / 2 + ")" }, axes).textContent = opts.ylabel;
    series.forEach(function (s) {
      var d = "";
      s.values.forEach(function (v, i) {
        var y = Math.min(Math.max(tr(v), tr(ymin)), tr(ymax));
        var py = T + (1 - (y - tr(ymin)) / (tr(ymax) - tr(ymin))) * (H - T - B);
        d += (i ? "L" : "M") + X(xs[i]).toFixed(1) + " " + py.toFixed(1);
      });
      el("path", { d: d, class: "series " + (s.cls || "") }, svg);
    });
  }

  // A row of the controls' grid: its label, the control (given its id), a third cell.
  function controlRow(box, name, label, make, third) {
    var row = document.createElement("div");
    row.className = "explorer-control";
    var id = "explorer-" + name + "-" + Math.random().toString(36).slice(2, 8);
    var lab = document.createElement("label");
    lab.setAttribute("for", id);
    lab.textContent = label;
    var control = make(id);
    row.appendChild(lab); row.appendChild(control); row.appendChild(third(id, control));
    box.appendChild(row);
    return control;
  }

  // A slider with its label and live value; returns the <input>.
  function slider(box, name, label, min, max, step, value, show) {
    return controlRow(box, name, label, function (id) {
      var input = document.createElement("input");
      input.type = "range"; input.id = id; input.name = name;
      input.min = min; input.max = max; input.step = step; input.value = value;
      return input;
    }, function (id, input) {
      var out = document.createElement("output");
      out.setAttribute("for", id);
      var update = function () { out.textContent = show ? show(+input.value) : input.value; };
      input.addEventListener("input", update);
      update();
      return out;
    });
  }

  // A choice among named options (a categorical control is a <select>, not a slider);
  // options: [[value, label]]; returns the <select>.
  function select(box, name, label, options, value) {
    return controlRow(box, name, label, function (id) {
      var sel = document.createElement("select");
      sel.id = id; sel.name = name;
      options.forEach(function (o) {
        var opt = document.createElement("option");
        opt.value = o[0]; opt.textContent = o[1];
        if (o[0] === value) opt.selected = true;
        sel.appendChild(opt);
      });
      return sel;
    }, function () { return document.createElement("span"); });
  }

  // The static figure (print, no JavaScript) sets its panels side by side and its caption
  // says "(left" and "(right"; the live explorer stacks its panels, so on screen the
  // caption says "(above" and "(below" (both words are kept, explorers.css shows one).
  function stackedCaption(root) {
    var cap = root.querySelector("figcaption");
    if (!cap) return;
    var walker = document.createTreeWalker(cap, NodeFilter.SHOW_TEXT);
    var texts = [];
    for (var t = walker.nextNode(); t; t = walker.nextNode()) texts.push(t);
    texts.forEach(function (t) {
      var re = /\((left|right)(?=[,)\s])/g;
      if (!re.test(t.nodeValue)) return;
      var frag = document.createDocumentFragment(), at = 0, m;
      re.lastIndex = 0;
      while ((m = re.exec(t.nodeValue))) {
        frag.appendChild(document.createTextNode(t.nodeValue.slice(at, m.index) + "("));
        var side = document.createElement("span");
        side.className = "explorer-static-word";
        side.textContent = m[1];
        var stacked = document.createElement("span");
        stacked.className = "explorer-live-word";
        stacked.textContent = m[1] === "left" ? "above" : "below";
        frag.appendChild(side);
        frag.appendChild(stacked);
        at = m.index + m[0].length;
      }
      frag.appendChild(document.createTextNode(t.nodeValue.slice(at)));
      t.parentNode.replaceChild(frag, t);
    });
  }

  function panel(root, title) {
    var live = document.createElement("div");
    live.className = "explorer-live";
    var controls = document.createElement("div");
    controls.className = "explorer-controls";
    live.appendChild(controls);
    var note = document.createElement("p");
    note.className = "explorer-readout";
    note.setAttribute("aria-live", "polite");
    root.insertBefore(live, root.firstChild);
    root.classList.add("is-live");
    stackedCaption(root);
    return { live: live, controls: controls, note: note, title: title };
  }

  // ------------------------------------------------------------------ 1. the table
  function sinusoidalExplorer(root) {
    var ui = panel(root);
    var d = slider(ui.controls, "d", "d (width)", 8, 256, 8, 96);
    var b = slider(ui.controls, "base", "base", 1, 6, 0.1, 4, function (v) { return fmt(Math.pow(10, v), 0); });
    var canvas = document.createElement("canvas");
    canvas.width = 640; canvas.height = 320;  // redrawn at the width shown (draw)
    canvas.setAttribute("role", "img");
    ui.live.appendChild(canvas);
    ui.live.appendChild(ui.note);
    var N = 64;
    // the table in a frame: positions down the left, dimensions along the bottom, a
    // colour bar (-1 blue, 0 white, +1 red) at the right; text in the theme's colour
    var box = { L: 58, R: 86, T: 10, B: 46 };
    function shade(v) {
      var a = Math.round(255 * (1 - Math.abs(v)));
      return [v > 0 ? 255 : a, a, v < 0 ? 255 : a];
    }
    // one pixel per cell of the table, scaled up into the frame without smoothing
    var cells = document.createElement("canvas");
    function draw() {
      var dm = +d.value, base = Math.pow(10, +b.value);
      var ctx = canvas.getContext("2d");
      // drawn at the width shown, in CSS pixels (drawWidth), at the screen's resolution:
      // 13 px text stays 13 px on a phone (a fixed 640-pixel canvas drew 6.9 px at 390 px)
      var W = drawWidth(canvas), H = W >= 480 ? 320 : Math.round(Math.max(240, 0.75 * W));
      var dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      var pw = W - box.L - box.R, ph = H - box.T - box.B;
      ctx.clearRect(0, 0, W, H);
      cells.width = dm; cells.height = N;
      var cctx = cells.getContext("2d"), img = cctx.createImageData(dm, N);
      for (var p = 0; p < N; p++) {
        var row = encoding(p, dm, base);
        for (var x = 0; x < dm; x++) {
          var rgb = shade(row[x]), o = 4 * (p * dm + x);
          img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
        }
      }
      cctx.putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(cells, box.L, box.T, pw, ph);
      var ink = getComputedStyle(canvas).color || "#222";
      ctx.strokeStyle = ink; ctx.fillStyle = ink; ctx.lineWidth = 1;
      ctx.strokeRect(box.L - 0.5, box.T - 0.5, pw + 1, ph + 1);
      ctx.font = "13px sans-serif";
      canvas.dataset.textPx = "13";  // its text size in the canvas's own units (the site test reads it)
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      [0, 16, 32, 48, 63].forEach(function (t) {
        var yy = box.T + ((t + 0.5) * ph) / N;
        ctx.beginPath(); ctx.moveTo(box.L - 5, yy); ctx.lineTo(box.L, yy); ctx.stroke();
        ctx.fillText(String(t), box.L - 8, yy);
      });
      ctx.textAlign = "center"; ctx.textBaseline = "top";
      var step = dm <= 32 ? 8 : dm <= 128 ? 32 : 64;
      for (var t = 0; t < dm; t += step) {
        var xx = box.L + ((t + 0.5) * pw) / dm;
        ctx.beginPath(); ctx.moveTo(xx, box.T + ph); ctx.lineTo(xx, box.T + ph + 5); ctx.stroke();
        ctx.fillText(String(t), xx, box.T + ph + 8);
      }
      ctx.fillText("dimension i (column)", box.L + pw / 2, H - 18);
      ctx.save();
      ctx.translate(14, box.T + ph / 2); ctx.rotate(-Math.PI / 2);
      ctx.textBaseline = "middle"; ctx.fillText("position p (row)", 0, 0);
      ctx.restore();
      // the colour bar
      var bx = W - box.R + 22, bw = 16;
      for (var k = 0; k < ph; k++) {
        var rgb2 = shade(1 - (2 * (k + 0.5)) / ph);
        ctx.fillStyle = "rgb(" + rgb2.join(",") + ")";
        ctx.fillRect(bx, box.T + k, bw, 1);
      }
      ctx.strokeRect(bx - 0.5, box.T - 0.5, bw + 1, ph + 1);
      ctx.fillStyle = ink; ctx.textAlign = "left"; ctx.textBaseline = "middle";
      [["+1", 0], ["0", 0.5], ["\u22121", 1]].forEach(function (t) {
        ctx.fillText(t[0], bx + bw + 5, box.T + t[1] * ph);
      });
      var longest = 2 * Math.PI * Math.pow(base, (2 * (Math.ceil(dm / 2) - 1)) / dm);
      var label = "Sinusoidal encoding, " + N + " positions (rows, top to bottom) by " + dm +
          " dimensions (columns), base " + fmt(base, 0) + ": red +1, white 0, blue -1.";
      canvas.setAttribute("aria-label", label);
      ui.note.textContent = "Wavelengths from 2\u03c0 \u2248 6.28 (columns 0, 1) to " + fmt(longest, 1) +
          " positions (last pair), a geometric progression of ratio base^(2/d) = " +
          fmt(Math.pow(base, 2 / dm), 4) + ".";
      root.dataset.state = dm + "/" + fmt(base, 0);
    }
    d.addEventListener("input", draw); b.addEventListener("input", draw);
    redrawOnResize(canvas, draw);
    // the axes' text follows the theme (light or dark) when the reader switches it
    new MutationObserver(draw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    draw();
  }

  // ------------------------------------------------------------------ 2. the dot product
  function dotExplorer(root) {
    var ui = panel(root);
    var d = slider(ui.controls, "d", "d (width)", 8, 256, 8, 128);
    var b = slider(ui.controls, "base", "base", 1, 6, 0.1, 4, function (v) { return fmt(Math.pow(10, v), 0); });
    var p = slider(ui.controls, "p", "position p", 0, 1000, 1, 0);
    var svg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(svg);
    ui.live.appendChild(ui.note);
    var K = 100, xs = [];
    for (var k = -K; k <= K; k++) xs.push(k);
    function draw() {
      var dm = +d.value, base = Math.pow(10, +b.value), pv = +p.value;
      var ys = dotCurve(pv, dm, base, K);
      var minv = Math.min.apply(null, ys);
      lineChart(svg, xs, [{ values: ys, cls: "s0" }], {
        ymin: Math.min(-dm / 8, 1.1 * minv), ymax: dm / 2 + dm / 40, xlabel: "offset k (the key at p + k)",
        ylabel: "PE(p) \u00b7 PE(p + k)", xticks: [-100, -50, 0, 50, 100], yticks: [0, dm / 8, dm / 4, (3 * dm) / 8, dm / 2],
      });
      svg.setAttribute("aria-label", "PE(p)\u00b7PE(p+k) against the offset k from -100 to 100 for d = " + dm +
          ", base " + fmt(base, 0) + ", p = " + pv + ": maximum d/2 = " + dm / 2 + " at k = 0, symmetric in k.");
      ui.note.textContent = "At k = 0 the dot product is d/2 = " + dm / 2 + "; the curve is symmetric " +
          "(PE(p)\u00b7PE(p+k) = PE(p)\u00b7PE(p\u2212k)) and oscillates, its smallest value here " + fmt(minv, 2) +
          ". Move p: the curve does not change, it depends on the offset only.";
      root.dataset.state = dm + "/" + fmt(base, 0) + "/" + pv;
    }
    [d, b, p].forEach(function (s) { s.addEventListener("input", draw); });
    redrawOnResize(svg, draw);
    draw();
  }

  // ------------------------------------------------------------------ 3. RoPE
  var Q = [0.9, 0.3, -0.4, 0.8, 0.5, -0.7, 0.2, 0.6];
  var KEY = [0.6, -0.5, 0.7, 0.2, -0.3, 0.8, 0.9, -0.1];

  function ropeExplorer(root) {
    var ui = panel(root);
    var m = slider(ui.controls, "m", "query position m", 0, 50, 1, 7);
    var n = slider(ui.controls, "n", "key position n", 0, 50, 1, 3);
    var s = slider(ui.controls, "shift", "shift both by s", 0, 200, 1, 0);
    var j = slider(ui.controls, "pair", "pair j shown", 0, 3, 1, 0);
    var svg = el("svg", { role: "img", class: "explorer-chart explorer-square" });
    ui.live.appendChild(svg);
    ui.live.appendChild(ui.note);
    var base = 10000, f = frequencies(Q.length, base);
    function draw() {
      var mv = +m.value + +s.value, nv = +n.value + +s.value, jv = +j.value;
      var qr = rotate(Q, mv, f), kr = rotate(KEY, nv, f);
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      // 100 user units per unit length (Chromium draws tiny font sizes at a minimum size)
      svg.setAttribute("viewBox", "-130 -130 260 260");
      el("circle", { cx: 0, cy: 0, r: 100, class: "grid" }, svg);
      el("line", { x1: -120, y1: 0, x2: 120, y2: 0, class: "grid" }, svg);
      el("line", { x1: 0, y1: -120, x2: 0, y2: 120, class: "grid" }, svg);
      var arrow = function (x, y, cls, text) {
        el("line", { x1: 0, y1: 0, x2: 100 * x, y2: -100 * y, class: "arrow " + cls }, svg);
        el("circle", { cx: 100 * x, cy: -100 * y, r: 4, class: "tip " + cls }, svg);
        el("text", { x: 114 * x, y: -114 * y + 5, "text-anchor": "middle", class: "vec " + cls }, svg).textContent = text;
      };
      arrow(qr[2 * jv], qr[2 * jv + 1], "s0", "q");
      arrow(kr[2 * jv], kr[2 * jv + 1], "s1", "k");
      var score = dot(qr, kr), plain = ropeScore(Q, KEY, +m.value - +n.value, 0, base);
      svg.setAttribute("aria-label", "Pair " + jv + " of the rotated query (position " + mv + ") and key (position " +
          nv + ") in the plane; both turn by the same angle when both positions shift.");
      ui.note.textContent = "Pair " + jv + " turns by " + fmt(f[jv], 4) + " rad per position. Query at " + mv +
          ", key at " + nv + ", offset " + (mv - nv) + ": score \u27e8R(m)q, R(n)k\u27e9 = " + score.toFixed(6) +
          " (the same for every shift s: it equals \u27e8R(m\u2212n)q, k\u27e9 = " + plain.toFixed(6) + ").";
      root.dataset.state = mv + "/" + nv + "/" + jv;
      root.dataset.score = score.toFixed(9);
    }
    [m, n, s, j].forEach(function (x) { x.addEventListener("input", draw); });
    draw();
  }

  // ------------------------------------------------------------------ 4. context extension
  var SCALING = { dim: 128, base: 500000, original: 8192 };

  function scalingExplorer(root) {
    var ui = panel(root);
    var fct = slider(ui.controls, "factor", "factor s", 1, 32, 1, 8);
    var svg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(svg);
    var legend = document.createElement("ul");
    legend.className = "explorer-legend";
    [["s1", "position interpolation (PI)"], ["s2", "NTK-aware"], ["s3", "YaRN"], ["s4", "Llama 3"]].forEach(function (it) {
      var li = document.createElement("li");
      li.innerHTML = '<span class="swatch ' + it[0] + '"></span>' + it[1];
      legend.appendChild(li);
    });
    ui.live.appendChild(legend);
    ui.live.appendChild(ui.note);
    var xs = [];
    for (var i = 0; i < SCALING.dim / 2; i++) xs.push(i);
    function draw() {
      var s = +fct.value, dim = SCALING.dim, base = SCALING.base, L = SCALING.original;
      var inv = scaledFrequencies("default", dim, base, {});
      var ratio = function (kind, p) {
        return scaledFrequencies(kind, dim, base, p).map(function (w, i) { return w / inv[i]; });
      };
      var series = [
        { values: ratio("linear", { factor: s }), cls: "s1" },
        { values: ratio("ntk", { factor: s }), cls: "s2" },
        { values: ratio("yarn", { factor: s, original_max_position_embeddings: L }), cls: "s3" },
        { values: ratio("llama3", { factor: s, original_max_position_embeddings: L, low_freq_factor: 1, high_freq_factor: 4 }), cls: "s4" },
      ];
      lineChart(svg, xs, series, {
        ylog: true, ymin: 1 / 40, ymax: 1.2, xlabel: "pair index j (wavelength grows to the right)",
        ylabel: "new frequency / old", xticks: [0, 16, 32, 48, 63],
        yticks: [1, 0.5, 0.25, 0.125, 0.0625, 0.03125], yfmt: function (t) { return t === 1 ? "1" : "1/" + Math.round(1 / t); },
      });
      svg.setAttribute("aria-label", "Ratio of the new to the original RoPE frequency for each of the 64 pairs " +
          "of a 128-wide head (base 500000, trained length 8192), factor " + s + ", for PI, NTK-aware, YaRN and Llama 3.");
      ui.note.textContent = "Factor " + s + ": PI divides every frequency by " + s + "; NTK-aware keeps the fastest " +
          "pair and divides the slowest by exactly " + s + "; YaRN and Llama 3 keep the fast pairs, divide the pairs " +
          "whose wavelength exceeds the trained length by " + s + ", and blend in between.";
      root.dataset.state = String(s);
    }
    fct.addEventListener("input", draw);
    redrawOnResize(svg, draw);
    draw();
  }

  // ------------------------------------------------------------------ the registry
  // Explorers in other scripts (loaded after this one, see book/_ext/explorers.py) add
  // themselves with window.posencExplorers.register(name, make); make(root) builds the
  // live explorer inside root (the <div class="posenc-explorer" data-explorer="name">).
  var EXPLORERS = {};
  var started = false;

  function startAll(name) {
    var sel = '.posenc-explorer[data-explorer' + (name ? '="' + name + '"' : "") + "]";
    var roots = document.querySelectorAll(sel);
    for (var i = 0; i < roots.length; i++) {
      var make = EXPLORERS[roots[i].dataset.explorer];
      if (make && !roots[i].classList.contains("is-live")) make(roots[i]);
    }
  }

  function register(name, make) {
    EXPLORERS[name] = make;
    if (started) startAll(name);
  }

  register("sinusoidal", sinusoidalExplorer);
  register("dot", dotExplorer);
  register("rope", ropeExplorer);
  register("scaling", scalingExplorer);

  window.posencExplorers = {
    register: register,
    // helpers for the explorers of other scripts
    slider: slider, select: select, panel: panel, lineChart: lineChart, svgElement: el, fmt: fmt,
    drawWidth: drawWidth, redrawOnResize: redrawOnResize,
    // the formulas (the browser test checks them against posenc)
    frequencies: frequencies, encoding: encoding, dotCurve: dotCurve, rotate: rotate,
    ropeScore: ropeScore, scaledFrequencies: scaledFrequencies, Q: Q, K: KEY,
  };

  function start() {
    started = true;
    startAll();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
