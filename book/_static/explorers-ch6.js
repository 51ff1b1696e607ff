/* Explorers of chapter 6 (notebooks/06_alternatives.ipynb), hand-written, no library:
 *
 * - "biases": ALiBi's slope per head and T5's bucket per offset, with sliders for the
 *   number of heads, the number of buckets, T5's max distance and one distance;
 * - "alias": RoPE's score q.R(d)k against the distance d for a chosen head width and
 *   base, with the peaks at d0 + 2*pi*m/omega_j where pair j alone cannot tell d from d0;
 * - "results": the experiment's accuracy at each position of the 4x sequences, one line
 *   per scheme, with selectors for the task and the variant (data embedded in the page;
 *   a scheme with no seed that fits has no line).
 *
 * Registered with explorers.js (loaded first, see book/_ext/explorers.py), which puts
 * each into the <div> the `explorer` directive wrote around its static figure. The
 * formulas are posenc's (posenc/bias.py, posenc/rotary.py); the browser test
 * (tests/site/test_site.py) checks their numbers against posenc.
 */
(function () {
  "use strict";
  var X = window.posencExplorers;
  if (!X || !X.register) return;
  var el = X.svgElement, fmt = X.fmt, select = X.select;

  // three significant digits, no digit-group ambiguity: 10.0, 14.1, 0.0781 (not "10.000")
  function sig(x) { return Number(x.toPrecision(3)).toString().replace(/^(-?\d+)$/, "$1.0"); }

  // ------------------------------------------------------------------ the formulas
  // posenc.alibi_slopes: 2**(-8h/p) for the largest power of two p <= n, then the first
  // n - p odd-numbered slopes of the rule for 2p heads; float64, rounded once to float32.
  function alibiSlopes(n) {
    var p = 1;
    while (2 * p <= n) p *= 2;
    var out = [];
    for (var h = 1; h <= p; h++) out.push(Math.pow(2, (-8 * h) / p));
    for (var i = 0; out.length < n; i++) out.push(Math.pow(2, (-8 * (2 * i + 1)) / (2 * p)));
    return out.map(Math.fround);
  }

  // posenc.t5_relative_bucket for an offset j - i (the logarithm in float32, as T5)
  function t5Bucket(offset, bidirectional, numBuckets, maxDistance) {
    var n = bidirectional ? Math.floor(numBuckets / 2) : numBuckets;
    var maxExact = Math.floor(n / 2);
    var bucket = 0, distance;
    if (bidirectional) {
      if (offset > 0) bucket = n;
      distance = Math.abs(offset);
    } else {
      distance = Math.max(-offset, 0);
    }
    if (distance < maxExact) return bucket + distance;
    var f = Math.fround;
    var ratio = f(f(distance) / f(maxExact));
    var scaled = f(f(f(Math.log(ratio)) / f(Math.log(maxDistance / maxExact))) * f(n - maxExact));
    var large = maxExact + Math.trunc(scaled);
    return bucket + Math.min(large, n - 1);
  }

  // omega_j = base**(-2j/dh), j = 0 .. dh/2 - 1 (posenc.rotary_frequencies)
  function ropeFrequencies(dh, base) {
    var out = [];
    for (var j = 0; j < dh / 2; j++) out.push(1 / Math.pow(base, (2 * j) / dh));
    return out;
  }

  // q.R(d)k with q = R(d0)k and k of unit norm spread evenly over the dh/2 pairs: the
  // mean over pairs of cos(omega_j (d - d0)); 1 at d = d0.
  function aliasScore(dh, base, d0, ds) {
    var w = ropeFrequencies(dh, base);
    return ds.map(function (d) {
      var s = 0;
      for (var j = 0; j < w.length; j++) s += Math.cos(w[j] * (d - d0));
      return s / w.length;
    });
  }

  // the distances d0 + 2 pi m / omega_j (m = ..., -1, 1, 2, ...) within [lo, hi]
  function aliasPeaks(dh, base, j, d0, lo, hi) {
    var period = (2 * Math.PI) / ropeFrequencies(dh, base)[j], out = [];
    for (var m = Math.ceil((lo - d0) / period); d0 + m * period <= hi; m++) {
      if (m !== 0) out.push(d0 + m * period);
    }
    return out;
  }

  // The whole head's highest local maximum in (lo, hi) other than its peak at d0: the
  // score is sampled every 0.1 position (its pairs turn by at most 1 rad per position, so
  // a sample lies within 0.05 of each maximum and at most 0.00125 below it), the sampled
  // maxima that can still be the highest refined by golden section to 1e-9, the peak at
  // d0 left out. Returns [score, d], or [null, null] where there is none.
  function aliasBestOther(dh, base, d0, lo, hi) {
    var w = ropeFrequencies(dh, base), nw = w.length;
    var f = function (d) {
      var s = 0;
      for (var j = 0; j < nw; j++) s += Math.cos(w[j] * (d - d0));
      return s / nw;
    };
    var step = 0.1, n = Math.floor((hi - lo) / step), v = new Float64Array(n + 1);
    for (var i = 0; i <= n; i++) v[i] = f(lo + i * step);
    var cand = [], top = -Infinity;
    for (var k = 1; k < n; k++) {
      var a0 = lo + (k - 1) * step, b0 = lo + (k + 1) * step;
      if (!(v[k] >= v[k - 1] && v[k] >= v[k + 1]) || (a0 <= d0 && d0 <= b0)) continue;
      cand.push(k);
      top = Math.max(top, v[k]);
    }
    var best = null, at = null, g = (Math.sqrt(5) - 1) / 2;
    cand.forEach(function (k) {
      if (v[k] < top - 0.005) return;  // cannot be the highest
      var a = lo + (k - 1) * step, b = lo + (k + 1) * step;
      var c = b - g * (b - a), e = a + g * (b - a), fc = f(c), fe = f(e);
      while (b - a > 1e-9) {
        if (fc >= fe) { b = e; e = c; fe = fc; c = b - g * (b - a); fc = f(c); }
        else { a = c; c = e; fc = fe; e = a + g * (b - a); fe = f(e); }
      }
      var x = (a + b) / 2, fx = f(x);
      if (best === null || fx > best + 1e-12) { best = fx; at = x; }
    });
    return [best, at];
  }

  // ------------------------------------------------------------------ drawing helpers
  // A chart's frame: as wide as the page draws svg (explorers.js, drawWidth: one unit one
  // CSS pixel, so its 13 px text stays 13 px on a phone; a fixed 640-unit box drew 6.9 px
  // at 390 px), H units tall on a wide screen, a little taller than wide on a narrow one.
  function frame(svg, H) {
    var W = X.drawWidth(svg);
    return { W: W, H: W >= 480 ? H : Math.round(Math.max(220, 0.72 * W)), L: 62, R: 12, T: 12, B: 42 };
  }

  function clear(svg, W, H) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  }

  function axes(svg, box, xr, yr, opts) {
    var g = el("g", { class: "axes" }, svg);
    var X0 = function (x) { return box.L + ((x - xr[0]) / (xr[1] - xr[0])) * (box.W - box.L - box.R); };
    var Y0 = function (y) { return box.T + (1 - (y - yr[0]) / (yr[1] - yr[0])) * (box.H - box.T - box.B); };
    el("line", { x1: box.L, y1: box.H - box.B, x2: box.W - box.R, y2: box.H - box.B }, g);
    el("line", { x1: box.L, y1: box.T, x2: box.L, y2: box.H - box.B }, g);
    (opts.yticks || []).forEach(function (t) {
      el("line", { x1: box.L - 4, y1: Y0(t), x2: box.W - box.R, y2: Y0(t), class: "grid" }, g);
      el("text", { x: box.L - 7, y: Y0(t) + 4, "text-anchor": "end" }, g).textContent = opts.yfmt ? opts.yfmt(t) : String(t);
    });
    (opts.xticks || []).forEach(function (t) {
      el("line", { x1: X0(t), y1: box.H - box.B, x2: X0(t), y2: box.H - box.B + 4 }, g);
      el("text", { x: X0(t), y: box.H - box.B + 17, "text-anchor": "middle" }, g).textContent = opts.xfmt ? opts.xfmt(t) : String(t);
    });
    el("text", { x: (box.L + box.W - box.R) / 2, y: box.H - 6, "text-anchor": "middle", class: "label" }, g).textContent = opts.xlabel;
    var cy = (box.T + box.H - box.B) / 2;
    el("text", { x: 14, y: cy, "text-anchor": "middle", class: "label", transform: "rotate(-90 14 " + cy + ")" }, g).textContent = opts.ylabel;
    return { X: X0, Y: Y0 };
  }

  function ticks(lo, hi, n) {
    var raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; }).filter(function (s) { return s >= raw; })[0];
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + 1e-9; t += step) out.push(Math.round(t * 1e6) / 1e6);
    return out;
  }

  function checkbox(box, name, label, checked) {
    var row = document.createElement("div");
    row.className = "explorer-control explorer-check";
    var id = "explorer-" + name + "-" + Math.random().toString(36).slice(2, 8);
    var input = document.createElement("input");
    input.type = "checkbox"; input.id = id; input.name = name; input.checked = !!checked;
    var lab = document.createElement("label");
    lab.setAttribute("for", id);
    lab.textContent = label;
    row.appendChild(input); row.appendChild(lab);
    box.appendChild(row);
    return input;
  }

  // ------------------------------------------------------------------ 1. attention biases
  function biasesExplorer(root) {
    var ui = X.panel(root);
    var heads = X.slider(ui.controls, "heads", "heads n (ALiBi)", 1, 64, 1, 12);
    var buckets = X.slider(ui.controls, "buckets", "buckets (T5)", 4, 64, 2, 32);
    var maxd = X.slider(ui.controls, "max_distance", "max distance (T5)", 16, 512, 16, 128);
    var dist = X.slider(ui.controls, "distance", "distance i \u2212 j", 0, 300, 1, 20);
    var causal = checkbox(ui.controls, "causal", "causal T5 (a decoder: no buckets for later keys)", false);
    var slopesSvg = el("svg", { role: "img", class: "explorer-chart" });
    var bucketSvg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(slopesSvg);
    ui.live.appendChild(bucketSvg);
    ui.live.appendChild(ui.note);

    function draw() {
      var n = +heads.value, nb = +buckets.value, md = +maxd.value, D = +dist.value, bidi = !causal.checked;
      if (!bidi && nb < 2) nb = 2;
      var m = alibiSlopes(n);
      // slopes: one bar per head, log2 scale from 2^-9 to 1
      var box = frame(slopesSvg, 260);
      clear(slopesSvg, box.W, box.H);
      var a = axes(slopesSvg, box, [0.5, n + 0.5], [-9, 0], {
        xlabel: "head h", ylabel: "slope m_h (log scale)", yticks: [0, -2, -4, -6, -8],
        yfmt: function (t) { return t === 0 ? "1" : "2^" + t; },
        xticks: ticks(1, n, Math.min(n, 8)).filter(function (t) { return t >= 1 && t === Math.round(t); }),
      });
      var bw = Math.max(1, 0.7 * (a.X(2) - a.X(1)));
      m.forEach(function (v, i) {
        var y = a.Y(Math.log2(v));
        el("rect", { x: a.X(i + 1) - bw / 2, y: y, width: bw, height: a.Y(-9) - y, class: "bar s1" }, slopesSvg);
      });
      slopesSvg.setAttribute("aria-label", "ALiBi slopes of " + n + " heads, from " + fmt(m[0], 4) + " (head 1) to " +
          fmt(Math.min.apply(null, m), 4) + " (the gentlest), on a log scale.");

      // T5 buckets over the offset j - i
      var span = Math.max(Math.ceil(1.25 * md), D + 10);
      var xs = [], ys = [];
      for (var o = -span; o <= span; o++) { xs.push(o); ys.push(t5Bucket(o, bidi, nb, md)); }
      var box2 = frame(bucketSvg, 280);
      clear(bucketSvg, box2.W, box2.H);
      var b = axes(bucketSvg, box2, [-span, span], [0, nb], {
        xlabel: "offset j \u2212 i (key minus query position)", ylabel: "T5 bucket",
        xticks: ticks(-span, span, 6), yticks: ticks(0, nb, 4),
      });
      var d = "";
      xs.forEach(function (x, i) { d += (i ? "L" : "M") + b.X(x).toFixed(1) + " " + b.Y(ys[i]).toFixed(1); });
      el("path", { d: d, class: "series s0" }, bucketSvg);
      [-D, D].forEach(function (x) {
        el("line", { x1: b.X(x), y1: box2.T, x2: b.X(x), y2: box2.H - box2.B, class: "marker" }, bucketSvg);
      });
      var back = t5Bucket(-D, bidi, nb, md), ahead = t5Bucket(D, bidi, nb, md);
      // the offsets at or before the query that share the bucket of -D
      var far = -4 * md, lo = null, hi = null;
      for (var q = far; q <= 0; q++) {
        if (t5Bucket(q, bidi, nb, md) === back) { if (lo === null) lo = q; hi = q; }
      }
      var shared = lo === hi ? "a bucket of its own" :
          (lo === far ? "with every offset ≤ " + hi : "with the offsets " + lo + " to " + hi);
      bucketSvg.setAttribute("aria-label", "T5 bucket of every offset from " + -span + " to " + span + ", " + nb +
          " buckets, max distance " + md + (bidi ? ", bidirectional" : ", causal") + "; the offsets \u00b1" + D + " marked.");
      ui.note.textContent = "ALiBi, " + n + " heads: at distance " + D + " head 1 subtracts " + sig(m[0] * D) +
          " from the score and the gentlest head " + sig(Math.min.apply(null, m) * D) + " (a fixed line per head, " +
          "no parameter). T5, " + nb + " buckets: the key " + D + " before the query falls in bucket " + back + " (" +
          shared + ")" + (bidi ? ", the key " + D + " after it in bucket " + ahead : "; later keys are masked (bucket 0)") +
          "; each bucket has one learned bias per head.";
      root.dataset.state = [n, nb, md, D, bidi ? "bi" : "causal"].join("/");
    }
    [heads, buckets, maxd, dist].forEach(function (s) { s.addEventListener("input", draw); });
    causal.addEventListener("change", draw);
    X.redrawOnResize(slopesSvg, draw);
    draw();
  }

  // ------------------------------------------------------------------ 2. RoPE aliasing
  function aliasExplorer(root) {
    var ui = X.panel(root);
    var dh = X.slider(ui.controls, "head_dim", "head width d_h", 4, 256, 4, 64);
    var b = X.slider(ui.controls, "base", "base", 1, 6, 0.1, 4, function (v) { return fmt(Math.pow(10, v), 0); });
    var d0 = X.slider(ui.controls, "d0", "the offset the query looks for, d\u2080", 0, 100, 1, 10);
    var pair = X.slider(ui.controls, "pair", "pair j marked", 0, 31, 1, 2);
    var range = X.slider(ui.controls, "range", "distances shown, up to", 64, 2048, 64, 256);
    var svg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(svg);
    var legend = document.createElement("ul");
    legend.className = "explorer-legend";
    [["s0", "q\u00b7R(d)k, the whole head (mean over pairs)"], ["s1", "pair j alone"], ["marker", "d\u2080 + 2\u03c0m/\u03c9_j"]].forEach(function (it) {
      var li = document.createElement("li");
      li.innerHTML = '<span class="swatch ' + it[0] + '"></span>' + it[1];
      legend.appendChild(li);
    });
    ui.live.appendChild(legend);
    ui.live.appendChild(ui.note);

    function draw() {
      var w = +dh.value, base = Math.pow(10, +b.value), t = +d0.value, hi = +range.value;
      pair.max = String(w / 2 - 1);
      if (+pair.value > w / 2 - 1) pair.value = String(w / 2 - 1);
      if (pair.nextSibling) pair.nextSibling.textContent = pair.value;
      var j = +pair.value;
      var ds = [];
      var step = hi / 1024;
      for (var x = 0; x <= hi + 1e-9; x += step) ds.push(x);
      var whole = aliasScore(w, base, t, ds);
      var omega = ropeFrequencies(w, base)[j];
      var single = ds.map(function (d) { return Math.cos(omega * (d - t)); });
      var peaks = aliasPeaks(w, base, j, t, 0, hi);
      var box = frame(svg, 300);
      clear(svg, box.W, box.H);
      var a = axes(svg, box, [0, hi], [-1, 1], {
        xlabel: "distance d (key position minus query position)", ylabel: "score / |q||k|",
        xticks: ticks(0, hi, 6), yticks: [-1, -0.5, 0, 0.5, 1],
      });
      peaks.forEach(function (p) {
        el("line", { x1: a.X(p), y1: box.T, x2: a.X(p), y2: box.H - box.B, class: "marker" }, svg);
      });
      [[single, "s1"], [whole, "s0"]].forEach(function (sr) {
        var d = "";
        sr[0].forEach(function (v, i) { d += (i ? "L" : "M") + a.X(ds[i]).toFixed(1) + " " + a.Y(v).toFixed(1); });
        el("path", { d: d, class: "series " + sr[1] }, svg);
      });
      // the whole head's highest local maximum other than d0 (not the flank of the peak at d0)
      var other = aliasBestOther(w, base, t, 0, hi), best = other[0], at = other[1];
      if (best !== null) {
        el("circle", { cx: a.X(at), cy: a.Y(best), r: 4, class: "tip s0" }, svg);
      }
      var period = (2 * Math.PI) / omega;
      svg.setAttribute("aria-label", "RoPE score against the distance 0 to " + hi + " for head width " + w + ", base " +
          fmt(base, 0) + ", query matching offset " + t + "; pair " + j + " alone peaks again every " + fmt(period, 1) + " positions.");
      ui.note.textContent = "Pair " + j + " turns by \u03c9_j = " + fmt(omega, 4) + " rad per position: alone it repeats every " +
          fmt(period, 1) + " positions, so it scores d\u2080 + " + fmt(period, 1) + "\u00b7m exactly like d\u2080 = " + t +
          (peaks.length ? " (" + peaks.length + " such peaks shown)" : " (none in this range)") + ". The whole head's " +
          w / 2 + " pairs disagree there: " + (best === null ? "no other peak in this range" :
          "its highest peak other than d\u2080 (the dot) is " + best.toFixed(3) + " at d \u2248 " + fmt(at, 2)) +
          ", against 1 at d\u2080.";
      root.dataset.state = [w, fmt(base, 0), t, j, hi].join("/");
    }
    [dh, b, d0, pair, range].forEach(function (s) { s.addEventListener("input", draw); });
    X.redrawOnResize(svg, draw);
    draw();
  }

  // ------------------------------------------------------------------ 3. the results
  // Accuracy at each position of the 4x sequences (mean over the seeds), one line per
  // scheme, from the saved results embedded in the page by book/_ext/explorers.py.
  function resultsData(root) {
    var holder = root.querySelector("script.explorer-data");
    return holder ? JSON.parse(holder.textContent) : null;
  }

  function resultsExplorer(root) {
    var data = resultsData(root);
    if (!data) return;
    var ui = X.panel(root);
    var task = select(ui.controls, "task", "task", data.tasks.map(function (t) { return [t, t.replace(/_/g, " ")]; }), data.tasks[0]);
    var variant = select(ui.controls, "variant", "variant", [["plain", "plain"], ["bos", "with a BOS token"]], "plain");
    var svg = el("svg", { role: "img", class: "explorer-chart" });
    ui.live.appendChild(svg);
    var legend = document.createElement("ul");
    legend.className = "explorer-legend";
    ui.live.appendChild(legend);
    ui.live.appendChild(ui.note);

    function draw() {
      var curves = (data.curves[task.value] || {})[variant.value] || {};
      var names = data.schemes.filter(function (s) { return curves[s]; });
      var n = names.length ? curves[names[0]].length : 64;
      var box = frame(svg, 300);
      clear(svg, box.W, box.H);
      var a = axes(svg, box, [0, n - 1], [0, 1.05], {
        xlabel: "position (dashed: the training length, " + data.train_len + ")", ylabel: "accuracy",
        xticks: ticks(0, n - 1, 6), yticks: [0, 0.25, 0.5, 0.75, 1],
      });
      el("line", { x1: a.X(data.train_len - 0.5), y1: box.T, x2: a.X(data.train_len - 0.5), y2: box.H - box.B, class: "marker" }, svg);
      el("line", { x1: box.L, y1: a.Y(data.chance), x2: box.W - box.R, y2: a.Y(data.chance), class: "grid" }, svg);
      while (legend.firstChild) legend.removeChild(legend.firstChild);
      var beyond = [];
      names.forEach(function (sch) {
        var d = "", pen = false;
        curves[sch].forEach(function (v, i) {
          if (v === null) { pen = false; return; }
          d += (pen ? "L" : "M") + a.X(i).toFixed(1) + " " + a.Y(v).toFixed(1);
          pen = true;
        });
        var path = el("path", { d: d, class: "series" }, svg);
        path.style.stroke = data.colors[sch] || "currentColor";
        path.style.strokeWidth = "1.6";
        var li = document.createElement("li");
        var sw = document.createElement("span");
        sw.className = "swatch";
        sw.style.background = data.colors[sch] || "currentColor";
        li.appendChild(sw);
        li.appendChild(document.createTextNode(sch));
        legend.appendChild(li);
        var tail = curves[sch].slice(data.train_len).filter(function (v) { return v !== null; });
        var mean = tail.reduce(function (x, y) { return x + y; }, 0) / Math.max(tail.length, 1);
        beyond.push([sch, mean]);
      });
      beyond.sort(function (p, q) { return q[1] - p[1]; });
      svg.setAttribute("aria-label", "Accuracy at each position 0 to " + (n - 1) + " of sequences four times the " +
          "training length, task " + task.value.replace(/_/g, " ") + ", " + (variant.value === "bos" ? "with" : "without") +
          " a BOS token, one line per scheme (" + names.join(", ") + ").");
      ui.note.textContent = "Beyond the training length (positions " + data.train_len + " to " + (n - 1) + "), mean " +
          "accuracy: " + beyond.map(function (p) { return p[0] + " " + p[1].toFixed(2); }).join(", ") +
          " (chance " + data.chance.toFixed(4) + ")." +
          (names.length < data.schemes.length ? " Not drawn (no seed fits): " +
           data.schemes.filter(function (s) { return !curves[s]; }).join(", ") + "." : "");
      root.dataset.state = task.value + "/" + variant.value;
    }
    task.addEventListener("change", draw);
    variant.addEventListener("change", draw);
    X.redrawOnResize(svg, draw);
    draw();
  }

  X.register("biases", biasesExplorer);
  X.register("results", resultsExplorer);
  X.resultsData = resultsData;
  X.register("alias", aliasExplorer);
  X.alibiSlopes = alibiSlopes;
  X.t5Bucket = t5Bucket;
  X.ropeFrequencies = ropeFrequencies;
  X.aliasScore = aliasScore;
  X.aliasPeaks = aliasPeaks;
  X.aliasBestOther = aliasBestOther;
  X.sig = sig;
})();
