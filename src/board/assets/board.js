// xsa board's page. Live (served by `xsa board`): polls /api/runs, the chosen runs' metrics (read
// on from where the last read stopped) and the open comparison every two seconds, and redraws
// without a reload. Static (report.html): window.XSA_STATIC holds the comparisons; no requests.
// Charts are uPlot's (drag to zoom, double-click to reset).
"use strict";
(function () {
  const STATIC = window.XSA_STATIC || null;
  const POLL_MS = 2000;
  // A variant has one colour on every chart and in every view: SA blue, XSA red, the rivals
  // their own; a variant not named here takes one of the rest by a hash of its name.
  const VARIANT_COLORS = { "sa": "#1f77b4", "xsa": "#d62728", "gated-attn": "#2ca02c",
    "value-residual": "#ff7f0e", "no-self": "#9467bd", "xsa+gated-attn": "#8c564b",
    "xsa-gated": "#e377c2", "xsa-gated-one": "#17becf" };
  const OTHER_COLORS = ["#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39",
                        "#7b4173", "#3182bd", "#e6550d", "#31a354"];
  // Runs of one variant on one chart: solid, then dashed, dotted, dash-dotted.
  const DASHES = [undefined, [8, 4], [2, 3], [8, 3, 2, 3]];
  // The first steps' losses sit far above the rest: "ignore outliers" leaves the first tenth of
  // the x range out of the y range (TensorBoard's option of that name), so late differences show.
  const OUTLIER_SHARE = 0.1;
  const $ = (id) => document.getElementById(id);
  const S = {
    list: { runs: [], comparisons: [] },
    selected: [],          // run ids, in the order picked
    runs: {},              // id → records so far (newRun)
    comparisonId: null,
    comparison: null,      // comparison_json of the open one
    chosen: false,         // a view was picked (by the first open or a click): no more choosing
    charts: [],
    structure: "",
    updates: 0,
  };

  // ---- numbers -------------------------------------------------------------------------------
  const isNum = (x) => typeof x === "number" && isFinite(x);
  const fmt = (x, d = 4) => (isNum(x) ? x.toFixed(d) : "–");
  const fmtCount = (x) => !isNum(x) ? "–" : x >= 1e6 ? (x / 1e6).toFixed(2) + "M"
                                          : x >= 1e3 ? (x / 1e3).toFixed(1) + "k" : x.toFixed(0);
  const fmtAge = (s) => !isNum(s) ? "–" : s < 60 ? s.toFixed(0) + "s" : s < 3600
      ? (s / 60).toFixed(0) + "m" : s < 86400 ? (s / 3600).toFixed(1) + "h" : (s / 86400).toFixed(1) + "d";
  const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
  const sd = (v) => {
    if (v.length < 2) return 0;
    const m = mean(v);
    return Math.sqrt(v.reduce((a, b) => a + (b - m) * (b - m), 0) / (v.length - 1));
  };
  // An axis's tick labels: the fewest significant digits (3 or more) that tell every tick apart.
  const tickAt = (v, p) => {
    if (v == null) return "";
    const a = Math.abs(v);
    if (v === 0) return "0";
    if (a < 0.01) return v.toExponential(Math.max(1, p - 3));
    if (a < 1e4) return +v.toPrecision(p) + "";
    const [div, unit] = a >= 1e9 ? [1e9, "G"] : a >= 1e6 ? [1e6, "M"] : [1e3, "k"];
    return +(v / div).toPrecision(p) + unit;
  };
  function tickLabels(ticks) {
    for (let p = 3; p <= 12; p++) {
      const labels = ticks.map((v) => tickAt(v, p)), shown = labels.filter((l) => l !== "");
      if (new Set(shown).size === shown.length) return labels;
    }
    return ticks.map((v) => tickAt(v, 12));
  }
  const hashOf = (text) => [...text].reduce((h, ch) => (h * 31 + ch.charCodeAt(0)) >>> 0, 7);
  const variantColor = (v) => VARIANT_COLORS[v] || OTHER_COLORS[hashOf(v || "") % OTHER_COLORS.length];
  // TensorBoard's smoothing: an exponential moving average, debiased at the start.
  function smooth(ys, a) {
    if (!(a > 0)) return ys;
    let last = 0, n = 0;
    return ys.map((y) => {
      if (!isNum(y)) return null;
      n++;
      last = last * a + (1 - a) * y;
      return last / (1 - Math.pow(a, n));
    });
  }

  // ---- data ------------------------------------------------------------------------------------
  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  }

  function newRun() {
    return {
      next: 0, check: "", tokens: 0, seconds: 0, bad_lines: 0,
      s: { step: [], loss: [], lr: [], grad_norm: [], tokens_per_s: [], rss_mb: [], tokens: [], time: [] },
      v: { step: [], loss: [], bpb: [], tokens: [], time: [] },
    };
  }

  // Tokens and wall-clock are summed from each step's ms and tokens/s; a validation record comes
  // after its step's, so it takes the sums so far.
  function addRecords(run, records) {
    for (const r of records) {
      if (!isNum(r.step)) continue;
      if (r.split === "val") {
        run.v.step.push(r.step); run.v.loss.push(isNum(r.loss) ? r.loss : null);
        run.v.bpb.push(isNum(r.bpb) ? r.bpb : null);
        run.v.tokens.push(run.tokens); run.v.time.push(run.seconds);
        continue;
      }
      const ms = isNum(r.ms) ? r.ms : 0;
      run.tokens += (isNum(r.tokens_per_s) ? r.tokens_per_s : 0) * ms / 1000;
      run.seconds += ms / 1000;
      for (const k of ["step", "loss", "lr", "grad_norm", "tokens_per_s", "rss_mb"])
        run.s[k].push(isNum(r[k]) ? r[k] : null);
      run.s.tokens.push(run.tokens); run.s.time.push(run.seconds);
    }
  }

  async function pullRun(id) {
    let run = S.runs[id] || (S.runs[id] = newRun());
    for (let i = 0; i < 64; i++) {
      const c = await getJSON("api/metrics?id=" + encodeURIComponent(id) + "&from=" + run.next +
                              "&check=" + encodeURIComponent(run.check));
      if (c.reset) run = S.runs[id] = newRun();
      addRecords(run, c.records);
      run.next = c.next;
      run.check = c.check || "";
      run.bad_lines += c.bad_lines;
      if (!c.more) break;
    }
  }

  // ---- the lists ------------------------------------------------------------------------------
  // A run takes its variant's colour (train's runs: their attention); runs of one variant on
  // one chart are told apart by their dashes, in the order picked.
  function variantOf(id) {
    const row = S.list.runs.find((r) => r.id === id);
    return (row && row.variant) || "";
  }
  const colorOf = (id) => variantColor(variantOf(id));
  function dashOf(id) {
    const v = variantOf(id);
    const k = S.selected.filter((other) => variantOf(other) === v).indexOf(id);
    return DASHES[Math.max(0, k) % DASHES.length];
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.append(td);
    return td;
  }

  function renderLists() {
    const tbody = $("runs").tBodies[0];
    tbody.textContent = "";
    for (const r of S.list.runs) {
      const tr = document.createElement("tr");
      tr.dataset.id = r.id;
      tr.dataset.state = r.state;
      const picked = S.selected.includes(r.id);
      if (picked) tr.className = "selected";
      const sw = cell(tr, picked ? "■" : "□", "pick");
      if (picked) sw.style.color = colorOf(r.id);
      cell(tr, r.id, "name").title = r.variant ? r.variant + (r.seed != null ? ", seed " + r.seed : "") : "";
      cell(tr, r.state, "state state-" + r.state);
      cell(tr, r.step + (r.steps != null ? "/" + r.steps : ""), "step");
      cell(tr, fmt(r.loss), "loss");
      cell(tr, fmt(r.val_loss), "val");
      cell(tr, fmtCount(r.tokens_per_s), "tps");
      cell(tr, fmtAge(r.age_s), "age");
      tr.onclick = () => toggleRun(r.id);
      tbody.append(tr);
    }
    $("no-runs").hidden = S.list.runs.length > 0 || !!STATIC;
    $("runs").hidden = !!STATIC;
    const ul = $("comparisons");
    ul.textContent = "";
    for (const c of S.list.comparisons) {
      const li = document.createElement("li");
      li.dataset.id = c.id;
      li.textContent = c.id + " (" + (c.kind || "comparison") + ", " + c.state +
                       (c.seeds_done != null && c.kind !== "sweep" ? ", " + c.seeds_done + " seeds done" : "") + ")";
      if (c.id === S.comparisonId) li.className = "selected";
      li.onclick = () => openComparison(c.id);
      ul.append(li);
    }
  }

  function toggleRun(id) {
    S.chosen = true;
    const k = S.selected.indexOf(id);
    if (k >= 0) S.selected.splice(k, 1); else S.selected.push(id);
    S.comparisonId = null; S.comparison = null;
    refresh();
  }

  function openComparison(id) {
    S.chosen = true;
    S.comparisonId = S.comparisonId === id ? null : id;
    S.comparison = null;
    S.selected = [];
    refresh();
  }

  // ---- charts ---------------------------------------------------------------------------------
  function chartWidth() {
    // The view's width less its padding and a scroll bar that the charts may bring; two charts a
    // row (less the gap and each chart's own padding and border) when that leaves them 340 px.
    const w = $("view").clientWidth - 32 - 20;
    const half = (w - 16) / 2 - 12;
    return Math.floor(Math.min(720, half >= 340 ? half : w - 12));
  }

  function options() {
    return { x: $("x-axis").value, logX: $("log-x").checked, logY: $("log-y").checked,
             outliers: $("outliers").checked, smoothing: parseFloat($("smoothing").value) };
  }

  // The first open: the newest comparison; with none, the runs in training; with none of those,
  // the newest runs (those written to within ten minutes of the newest, at most four).
  function chooseFirstView() {
    if (S.chosen || STATIC) return;
    S.chosen = true;
    const byAge = (a, b) => (isNum(a.age_s) ? a.age_s : 1e18) - (isNum(b.age_s) ? b.age_s : 1e18);
    const comparisons = S.list.comparisons.slice().sort(byAge);
    if (comparisons.length) { S.comparisonId = comparisons[0].id; return; }
    const running = S.list.runs.filter((r) => r.state === "running");
    const runs = S.list.runs.slice().sort(byAge);
    const newest = runs.length && isNum(runs[0].age_s) ? runs[0].age_s : 0;
    S.selected = (running.length ? running : runs.filter((r) => !isNum(r.age_s) || r.age_s <= newest + 600))
      .slice(0, running.length ? 8 : 4).map((r) => r.id);
  }

  // The y range without the first tenth of the x range (outliers: the first steps' losses),
  // padded by 5 %; everything where that leaves fewer than two values.
  function trimmedRange(u) {
    const xs = u.data[0];
    if (!xs || !xs.length) return [0, 1];
    const first = xs[0], last = xs[xs.length - 1], from = first + OUTLIER_SHARE * (last - first);
    let lo = Infinity, hi = -Infinity, n = 0, loAll = Infinity, hiAll = -Infinity;
    for (let k = 1; k < u.data.length; k++)
      u.data[k].forEach((y, i) => {
        if (!isNum(y)) return;
        loAll = Math.min(loAll, y); hiAll = Math.max(hiAll, y);
        if (xs[i] >= from) { lo = Math.min(lo, y); hi = Math.max(hi, y); n++; }
      });
    if (n < 2) [lo, hi] = [loAll, hiAll];
    if (!isFinite(lo)) return [0, 1];
    const pad = hi > lo ? 0.05 * (hi - lo) : Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  // spec: {title, xLabel, logX, logY, series: [{label, color, band}], bands: [[hi, lo, color]]}
  function makeChart(parent, spec, data) {
    const div = document.createElement("div");
    div.className = "chart";
    div.dataset.title = spec.title;
    const h = document.createElement("h3");
    h.textContent = spec.title;
    div.append(h);
    parent.append(div);
    const series = [{ label: spec.xLabel }].concat(spec.series.map((s) => ({
      label: s.label, stroke: s.band ? s.color + "55" : s.color, width: s.band ? 1 : 1.6, dash: s.dash,
      spanGaps: true, points: { show: s.points || false, size: 6 },
      value: (u, v) => (v == null ? "–" : Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)),
    })));
    const chart = { spec, div, zoomed: false, named: spec.series.filter((s) => !s.band).length,
                    xTicks: [], yTicks: [] };
    const y = { distr: spec.logY ? 3 : 1 };
    if (spec.overTime && !spec.logY && options().outliers)
      y.range = (u, lo, hi) => (chart.zoomed ? uPlot.rangeNum(lo, hi, 0.05, true) : trimmedRange(u));
    chart.u = new uPlot({
      width: chartWidth(), height: 250,
      scales: { x: { time: false, distr: spec.logX ? 3 : 1 }, y },
      axes: [{ label: spec.xLabel, size: 40, incrs: spec.xLabel === "layer" ? [1, 2, 5, 10] : undefined,
               values: (u, ticks) => (chart.xTicks = tickLabels(ticks)) },
             { size: 60, values: (u, ticks) => (chart.yTicks = tickLabels(ticks)) }],
      series,
      bands: (spec.bands || []).map(([hi, lo, color]) => ({ series: [hi, lo], fill: color + "22" })),
      cursor: { sync: { key: "xsa" }, drag: { x: true, y: false } },
      hooks: { setSelect: [(u) => { if (u.select.width > 0) chart.zoomed = true; }] },
    }, data, div);
    chart.u.over.addEventListener("dblclick", () => { chart.zoomed = false; });
    return chart;
  }

  // Draws the charts again when what they show changed; else only gives them the new data, zoom
  // kept.
  function draw(structure, specs) {
    const grid = $("charts");
    if (structure !== S.structure) {
      for (const c of S.charts) c.u.destroy();
      grid.textContent = "";
      S.charts = specs.map((s) => makeChart(grid, s, s.data));
      S.structure = structure;
    } else {
      S.charts.forEach((c, k) => c.u.setData(specs[k].data, !c.zoomed));
    }
    $("empty-view").hidden = specs.length > 0 || !!S.comparisonId;
  }

  const X_LABELS = { step: "step", tokens: "tokens", time: "training wall-clock (s)" };

  // One table per run, joined on x (uPlot.join): [[x...], [y of run 1...], ...].
  function joinRuns(pick, o, logY, smoothIt) {
    const tables = [];
    for (const id of S.selected) {
      const run = S.runs[id];
      if (!run) { tables.push([[], []]); continue; }
      const cols = pick(run);
      let ys = cols.y;
      if (smoothIt) ys = smooth(ys, o.smoothing);
      const xs = [], kept = [];
      cols[o.x].forEach((x, i) => {
        const y = ys[i];
        if (!isNum(x) || (o.logX && x <= 0)) return;
        if (!isNum(y) || (logY && y <= 0)) return;
        if (xs.length && x <= xs[xs.length - 1]) return;  // x strictly rising (a resumed run)
        xs.push(x); kept.push(y);
      });
      tables.push([xs, kept]);
    }
    return tables.length ? uPlot.join(tables) : [[]];
  }

  const RUN_CHARTS = [
    { title: "training loss", cols: (r) => ({ ...r.s, y: r.s.loss }), smooth: true, logY: true },
    { title: "validation loss", cols: (r) => ({ ...r.v, y: r.v.loss }), logY: true, points: true },
    // Per byte of text: runs of different vocabularies on one scale.
    { title: "validation bits per byte", cols: (r) => ({ ...r.v, y: r.v.bpb }), logY: true, points: true },
    { title: "learning rate", cols: (r) => ({ ...r.s, y: r.s.lr }) },
    { title: "gradient norm", cols: (r) => ({ ...r.s, y: r.s.grad_norm }), smooth: true, logY: true },
    { title: "tokens / s", cols: (r) => ({ ...r.s, y: r.s.tokens_per_s }), smooth: true },
    { title: "memory (MB resident)", cols: (r) => ({ ...r.s, y: r.s.rss_mb }) },
  ];

  function runSpecs() {
    const o = options();
    return RUN_CHARTS.map((c) => {
      const logY = o.logY && c.logY === true;
      return {
        title: c.title + (c.smooth && o.smoothing > 0 ? " (smoothed " + o.smoothing.toFixed(2) + ")" : ""),
        xLabel: X_LABELS[o.x], logX: o.logX, logY, overTime: true,
        series: S.selected.map((id) => ({ label: id, color: colorOf(id), dash: dashOf(id), points: c.points })),
        data: joinRuns(c.cols, o, logY, c.smooth),
      };
    });
  }

  // ---- comparisons ----------------------------------------------------------------------------
  // Each variant's seeds' validation curves: finished seeds (seed files) and seeds still training
  // (their arms' metrics).
  function seedCurves(c) {
    const byVariant = new Map();
    const add = (variant, curve) => {
      if (!byVariant.has(variant)) byVariant.set(variant, []);
      byVariant.get(variant).push(curve);
    };
    for (const seed of c.seeds)
      for (const a of seed.arms)
        add(a.variant, { seed: a.seed, step: a.val_curve.map((p) => p[0]),
                         loss: a.val_curve.map((p) => p[1]), time: a.val_seconds });
    for (const arm of c.live) {
      const run = S.runs[arm.id];
      if (run) add(arm.variant, { seed: arm.seed, step: run.v.step, loss: run.v.loss, time: run.v.time, live: true });
    }
    const order = (c.report && c.report.variants) || [...byVariant.keys()];
    return order.filter((v) => byVariant.has(v)).map((v) => ({ variant: v, curves: byVariant.get(v) }));
  }

  // Mean and ± sd over seeds at each x (steps: the union of the seeds').
  function bandOver(curves, value) {
    const at = new Map();
    for (const c of curves)
      c.step.forEach((s, i) => {
        const y = value(c, i, s);
        if (!isNum(y)) return;
        if (!at.has(s)) at.set(s, []);
        at.get(s).push(y);
      });
    const xs = [...at.keys()].sort((a, b) => a - b);
    const m = xs.map((x) => mean(at.get(x))), d = xs.map((x) => sd(at.get(x)));
    return { xs, mean: m, lo: m.map((v, i) => v - d[i]), hi: m.map((v, i) => v + d[i]) };
  }

  // band: what the band's edges are (± sd over seeds, or an interval).
  function bandSpec(title, xLabel, groups, o, band) {
    const tables = [], series = [], bands = [];
    const [upper, lower] = band ? [" " + band + " high", " " + band + " low"] : [" +sd", " −sd"];
    groups.forEach((g) => {
      const color = variantColor(g.variant);
      tables.push([g.xs, g.mean], [g.xs, g.hi], [g.xs, g.lo]);
      const base = series.length + 1;
      series.push({ label: g.label, color }, { label: g.label + upper, color, band: true },
                  { label: g.label + lower, color, band: true });
      bands.push([base + 1, base + 2, color]);
    });
    return { title, xLabel, logX: o.logX, logY: false, series, bands,
             data: tables.length ? uPlot.join(tables) : [[]] };
  }

  function comparisonSpecs(c) {
    const o = options();
    const groups = seedCurves(c);
    const specs = [];
    specs.push(bandSpec("validation loss (mean ± sd over seeds)", "step",
        groups.map((g) => ({ label: g.variant, variant: g.variant, ...bandOver(g.curves, (cv, i) => cv.loss[i]) })), o));
    specs[specs.length - 1].overTime = true;
    // Against wall-clock: each seed's seconds at each step, averaged.
    const timeGroups = groups.map((g) => {
      const b = bandOver(g.curves, (cv, i) => cv.loss[i]);
      const t = bandOver(g.curves, (cv, i) => (cv.time ? cv.time[i] : null));
      const xs = [], ys = [];
      b.xs.forEach((s, i) => {
        const j = t.xs.indexOf(s);
        if (j >= 0 && (!xs.length || t.mean[j] > xs[xs.length - 1])) { xs.push(t.mean[j]); ys.push(b.mean[i]); }
      });
      return [xs, ys];
    });
    specs.push({ title: "validation loss by training wall-clock (mean over seeds)",
                 xLabel: "training wall-clock (s)", logX: o.logX, logY: false, overTime: true,
                 series: groups.map((g) => ({ label: g.variant, color: variantColor(g.variant) })),
                 data: timeGroups.length ? uPlot.join(timeGroups) : [[]] });
    // The baseline: the comparison's first variant, however it is spelled (sa, sa+qk-norm, sa@2e-3).
    const sa = groups.length ? groups[0] : null;
    if (sa) {
      const deltas = groups.filter((g) => g !== sa).map((g) => {
        const paired = g.curves.map((cv) => {
          const ref = sa.curves.find((r) => r.seed === cv.seed);
          if (!ref) return null;
          const refAt = new Map(ref.step.map((s, i) => [s, ref.loss[i]]));
          return { seed: cv.seed, step: cv.step, loss: cv.loss.map((y, i) => (isNum(y) && isNum(refAt.get(cv.step[i])) ? y - refAt.get(cv.step[i]) : null)) };
        }).filter(Boolean);
        return { label: g.variant + " − " + sa.variant, variant: g.variant, ...bandOver(paired, (cv, i) => cv.loss[i]) };
      });
      if (deltas.length) {
        specs.push(bandSpec("Δ validation loss vs SA, paired by seed (mean ± sd)", "step", deltas, o));
        specs[specs.length - 1].overTime = true;
      }
    }
    // Loss by position: each variant's difference to SA per bucket of positions in the window
    // (x: the bucket's last position), with its 95 % interval over seeds; a chart per set.
    const lbp = c.report && c.report.loss_by_position;
    if (lbp && lbp.buckets && lbp.buckets.length && c.report.summary) {
      const xs = lbp.buckets.map((b) => b[1]);
      (lbp.sets || []).forEach((name, set) => {
        const base = c.report.summary.length ? c.report.summary[0].variant : "";
        const g = c.report.summary
          .filter((s) => s.variant !== base && s.loss_by_position && s.loss_by_position[set])
          .map((s) => {
            const d = s.loss_by_position[set].delta_vs_sa || [];
            const at = (i, k) => (d[i] && d[i].ci95 && isNum(d[i].ci95[k]) ? d[i].ci95[k] : null);
            return { label: s.variant + " − " + base, variant: s.variant, xs, mean: xs.map((x, i) => (d[i] ? d[i].mean : null)),
                     hi: xs.map((x, i) => at(i, 1)), lo: xs.map((x, i) => at(i, 0)) };
          });
        if (!g.length) return;
        const spec = bandSpec("Δ loss vs SA by position in the window, " + name + " (band: 95 % interval)",
                              "position (last of its bucket)", g, { logX: xs.length > 1 }, "95 %");
        spec.series.forEach((s) => (s.points = !s.band));
        specs.push(spec);
      });
    }
    const bias = c.report && c.report.similarity_bias;
    if (bias && bias.length) {
      const variants = [...new Set(bias.map((b) => b.variant))];
      const layers = [...new Set(bias.map((b) => b.layer))].sort((a, b) => a - b);
      for (const [key, title] of [["cos_yv", "similarity bias: cos(y, v) by layer (mean over heads)"],
                                  ["own_lean", "own lean: cos(y_i, v_i) − cos(y_i, v_j), j < i, by layer (mean over heads)"],
                                  ["self_weight", "attention to oneself a_ii by layer (mean over heads)"]]) {
        if (!bias.some((b) => isNum(b[key]))) continue;  // reports from before it was measured
        const data = [layers];
        for (const v of variants)
          data.push(layers.map((l) => {
            const vals = bias.filter((b) => b.variant === v && b.layer === l && isNum(b[key])).map((b) => b[key]);
            return vals.length ? mean(vals) : null;
          }));
        specs.push({ title, xLabel: "layer", logX: false, logY: false,
                     series: variants.map((v) => ({ label: v, color: variantColor(v), points: true })),
                     data });
      }
    }
    return specs;
  }

  // The swept parameter's column of sweep.json: the one key that is not a result.
  const SWEEP_RESULTS = new Set(["batch", "cos_yv_mean", "d_z", "delta_at_sa_time_mean", "delta_bpb_ci95",
    "delta_bpb_mean", "delta_ci95", "delta_vs_sa_mean", "delta_vs_sa_sd", "equal_loss_reached", "lr",
    "mean_curve_step_speedup", "mean_curve_time_speedup", "overhead_vs_sa", "p_holm_sweep", "p_value",
    "p_wilcoxon", "report", "sa_cos_yv_mean", "step_speedup", "step_speedup_mean", "time_speedup",
    "time_speedup_mean", "tokens_per_step", "variant"]);
  // "−0.0123 [−0.0200, −0.0046]": a difference with its interval.
  const withInterval = (m, ci) => fmt(m) + (ci && isNum(ci[0]) ? " [" + fmt(ci[0]) + ", " + fmt(ci[1]) + "]" : "");

  function sweepSpec(rows, param) {
    param = param || Object.keys(rows[0] || {}).find((k) => !SWEEP_RESULTS.has(k));
    const variants = [...new Set(rows.map((r) => r.variant))];
    const groups = variants.map((v) => {
      const mine = rows.filter((r) => r.variant === v && isNum(r[param])).sort((a, b) => a[param] - b[param]);
      const xs = mine.map((r) => r[param]), m = mine.map((r) => r.delta_vs_sa_mean);
      // The 95 % interval where the sweep has it (older sweeps: ± sd).
      const ci = (r, k) => (r.delta_ci95 && isNum(r.delta_ci95[k]) ? r.delta_ci95[k] : null);
      const d = mine.map((r) => (isNum(r.delta_vs_sa_sd) ? r.delta_vs_sa_sd : 0));
      const withCi = mine.some((r) => r.delta_ci95);
      return { label: v + " − sa", variant: v, xs, mean: m,
               hi: mine.map((r, i) => (withCi ? ci(r, 1) : m[i] + d[i])),
               lo: mine.map((r, i) => (withCi ? ci(r, 0) : m[i] - d[i])) };
    });
    const xs = rows.map((r) => r[param]).filter((x) => isNum(x) && x > 0);
    const spec = bandSpec("Δ final validation loss vs SA by " + param + " (mean and its band over seeds)", param,
                          groups, { logX: xs.length > 1 && Math.max(...xs) / Math.min(...xs) >= 8 });
    spec.series.forEach((s) => (s.points = !s.band));
    return spec;
  }

  // A wide table scrolls inside its own box: the view keeps the window's width.
  function wrapped(table) {
    const div = document.createElement("div");
    div.className = "table-wrap";
    div.append(table);
    return div;
  }

  function summaryTable(c) {
    const box = document.createElement("div");
    const h = document.createElement("h2");
    h.textContent = (STATIC ? "" : "comparison ") + c.id;
    box.append(h);
    const r = c.report;
    if (c.sweep && c.sweep.length) {
      const t = document.createElement("table");
      t.className = "summary";
      const param = (STATIC && STATIC.param) || Object.keys(c.sweep[0]).find((k) => !SWEEP_RESULTS.has(k));
      const tr = t.createTHead().insertRow();
      for (const x of [param, "variant", "Δ vs SA [95 % CI]", "p (t; Holm over the sweep)",
                       "speed-up steps / wall-clock", "step cost vs SA"]) {
        const th = document.createElement("th"); th.textContent = x; tr.append(th);
      }
      const body = t.createTBody();
      for (const s of c.sweep) {
        const row = body.insertRow();
        const speedup = isNum(s.step_speedup) ? s.step_speedup : s.step_speedup_mean;  // older files: _mean
        const timeSpeedup = isNum(s.time_speedup) ? s.time_speedup : s.time_speedup_mean;
        for (const x of [s[param], s.variant, withInterval(s.delta_vs_sa_mean, s.delta_ci95),
                         (isNum(s.p_value) ? s.p_value.toPrecision(2) : "–") +
                           (isNum(s.p_holm_sweep) ? "; " + s.p_holm_sweep.toPrecision(2) : ""),
                         fmt(speedup, 3) + " / " + fmt(timeSpeedup, 3),
                         isNum(s.overhead_vs_sa) ? (100 * s.overhead_vs_sa).toFixed(1) + " %" : "–"])
          cell(row, String(x));
      }
      box.append(wrapped(t));
    } else if (r && r.summary) {
      const t = document.createElement("table");
      t.className = "summary";
      const head = ["variant", "seeds", "lr", "val loss", "Δ vs SA [95 % CI]", "p (t; Holm)", "median steps to SA's loss",
                    "speed-up steps / wall-clock", "step cost vs SA", "verdict"];
      const tr = t.createTHead().insertRow();
      for (const x of head) { const th = document.createElement("th"); th.textContent = x; tr.append(th); }
      const body = t.createTBody();
      for (const s of r.summary) {
        const row = body.insertRow();
        const el = s.equal_loss || {};
        const ci = s.delta_vs_sa && s.delta_vs_sa.ci95;
        const median = el.median_steps;  // (older reports had a mean over the seeds that got there)
        const speedup = isNum(el.step_speedup) ? el.step_speedup : el.step_speedup_mean;
        const timeSpeedup = isNum(el.time_speedup) ? el.time_speedup : el.time_speedup_mean;
        const base = s === r.summary[0];  // the baseline: the first variant
        for (const x of [s.variant, s.n_seeds, isNum(s.lr) ? String(s.lr) : "–",
                         fmt(s.val_loss_mean) + " ± " + fmt(s.val_loss_sd),
                         base ? "–" : withInterval(s.delta_vs_sa_mean, ci),
                         (isNum(s.p_value) ? s.p_value.toPrecision(2) : "–") +
                           (isNum(s.p_holm) && r.summary.length > 2 ? "; " + s.p_holm.toPrecision(2) : ""),
                         isNum(median) ? median.toFixed(0) + (el.seeds ? " (" + el.seeds_reached + " of " + el.seeds + " reached)" : "") : "–",
                         isNum(speedup) ? speedup.toFixed(3) + " / " + fmt(timeSpeedup, 3) : "–",
                         base ? "–" : (100 * s.overhead_vs_sa).toFixed(1) + " %", s.verdict || ""])
          cell(row, String(x));
      }
      box.append(wrapped(t));
    } else {
      const p = document.createElement("p");
      p.className = "note";
      const live = c.live.map((a) => {
        const run = S.runs[a.id];
        const step = run && run.s.step.length ? run.s.step[run.s.step.length - 1] : 0;
        return a.variant + " seed " + a.seed + " at step " + step;
      });
      p.textContent = c.seeds.length + " seed(s) finished" + (live.length ? "; training: " + live.join(", ") : "") +
                      ". The table with Δ and p comes with report.json, when every seed is done.";
      box.append(p);
    }
    if (c.samples) {
      const pre = document.createElement("pre");
      pre.className = "samples";
      pre.textContent = c.samples;
      box.append(pre);
    }
    return box;
  }

  function renderComparison() {
    const box = $("comparison");
    box.textContent = "";
    const c = S.comparison;
    if (!c) return [];
    box.append(summaryTable(c));
    const specs = [];
    if (c.sweep && c.sweep.length) specs.push(sweepSpec(c.sweep, STATIC && STATIC.param));
    return specs.concat(comparisonSpecs(c));
  }

  // ---- the loop -------------------------------------------------------------------------------
  function render() {
    renderLists();
    const o = options();
    const specs = S.comparisonId ? renderComparison() : runSpecs();
    const structure = JSON.stringify([S.comparisonId, S.selected, o.x, o.logX, o.logY, o.outliers,
                                      specs.map((s) => [s.title.replace(/ \(smoothed.*/, ""), s.series.length])]);
    draw(structure, specs);
    S.updates++;
  }

  // One refresh at a time (a click during the poll's would read the same records twice); a
  // request for another while one runs is served right after it.
  let refreshing = false, again = false;
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do { again = false; await refreshOnce(); } while (again);
    } finally {
      refreshing = false;
    }
  }

  async function refreshOnce() {
    try {
      if (STATIC) {
        S.comparison = S.comparisonId ? STATIC.comparisons.find((c) => c.id === S.comparisonId) : null;
      } else {
        S.list = await getJSON("api/runs");
        $("root").textContent = S.list.root;
        chooseFirstView();
        const known = new Set(S.list.runs.map((r) => r.id));
        S.selected = S.selected.filter((id) => known.has(id));
        for (const id of S.selected) await pullRun(id);
        if (S.comparisonId) {
          S.comparison = await getJSON("api/comparison?id=" + encodeURIComponent(S.comparisonId));
          for (const arm of S.comparison.live) await pullRun(arm.id);
        }
        $("status").textContent = "updated " + new Date().toLocaleTimeString();
      }
      render();
    } catch (e) {
      $("status").textContent = "cannot reach xsa board (" + e.message + "); retrying";
    }
  }

  async function poll() {
    await refresh();
    setTimeout(poll, POLL_MS);
  }

  // For the browser tests (tests/browser/board_test.mjs) and the curious: what is drawn.
  window.xsaBoard = {
    updates: () => S.updates,
    // The steps of a run's records as the page holds them (each once, rising).
    steps: (id) => (S.runs[id] ? S.runs[id].s.step.slice() : []),
    // What is open: the comparison, or the runs picked.
    view: () => ({ comparison: S.comparisonId, runs: S.selected.slice() }),
    charts: () => S.charts.map((c) => ({
      title: c.spec.title, series: c.named,
      labels: c.spec.series.filter((s) => !s.band).map((s) => s.label),
      colors: c.spec.series.filter((s) => !s.band).map((s) => s.color),
      dashes: c.spec.series.filter((s) => !s.band).map((s) => (s.dash ? s.dash.join(",") : "")),
      xTicks: c.xTicks.slice(), yTicks: c.yTicks.slice(),
      yRange: [c.u.scales.y.min, c.u.scales.y.max],
      points: c.u.data.slice(1).reduce((n, col, k) =>
        n + (c.spec.series[k].band ? 0 : col.filter((y) => y != null).length), 0),
    })),
  };

  for (const id of ["x-axis", "log-x", "log-y", "outliers"]) $(id).onchange = () => render();
  $("smoothing").oninput = () => {
    $("smoothing-value").textContent = parseFloat($("smoothing").value).toFixed(2);
    render();
  };
  window.addEventListener("resize", () => { S.structure = ""; render(); });
  if (STATIC) {
    document.title = "xsa report: " + STATIC.title;
    $("root").textContent = STATIC.title + " (report.html: the data is inside this file)";
    S.list = { runs: [], comparisons: STATIC.comparisons.map((c) => ({ id: c.id, kind: c.sweep ? "sweep" : "comparison", state: "finished", seeds_done: c.seeds.length })) };
    if (STATIC.kind === "sweep") {
      // The sweep's own chart above the list of its configurations' comparisons.
      STATIC.comparisons.unshift({ id: STATIC.title, sweep: STATIC.sweep, seeds: [], live: [], report: null, samples: null });
      S.list.comparisons.unshift({ id: STATIC.title, kind: "sweep", state: "finished" });
    }
    S.comparisonId = STATIC.comparisons[0] ? STATIC.comparisons[0].id : null;
    $("runs").hidden = true;
    refresh();
  } else {
    poll();
  }
})();
