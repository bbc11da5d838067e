// xsa board's page. Live (served by `xsa board`): polls /api/runs, the chosen runs' metrics (read
// on from where the last read stopped) and the open comparison every two seconds, and redraws
// without a reload. Static (report.html): window.XSA_STATIC holds the comparisons; no requests.
// Charts are uPlot's (drag to zoom, double-click to reset).
"use strict";
(function () {
  const STATIC = window.XSA_STATIC || null;
  const POLL_MS = 2000;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                  "#17becf", "#bcbd22", "#7f7f7f"];
  const $ = (id) => document.getElementById(id);
  const S = {
    list: { runs: [], comparisons: [] },
    selected: [],          // run ids, in the order picked
    runs: {},              // id → records so far (newRun)
    comparisonId: null,
    comparison: null,      // comparison_json of the open one
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
  const tick = (v) => (v == null ? "" : v !== 0 && Math.abs(v) < 0.01 ? v.toExponential(1)
                                       : Math.abs(v) >= 1e4 ? fmtCount(v) : +v.toPrecision(4) + "");
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
      next: 0, tokens: 0, seconds: 0, bad_lines: 0,
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
      const c = await getJSON("api/metrics?id=" + encodeURIComponent(id) + "&from=" + run.next);
      if (c.reset) run = S.runs[id] = newRun();
      addRecords(run, c.records);
      run.next = c.next;
      run.bad_lines += c.bad_lines;
      if (!c.more) break;
    }
  }

  // ---- the lists ------------------------------------------------------------------------------
  function colorOf(id) {
    const k = S.selected.indexOf(id);
    return COLORS[(k < 0 ? 0 : k) % COLORS.length];
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
    const k = S.selected.indexOf(id);
    if (k >= 0) S.selected.splice(k, 1); else S.selected.push(id);
    S.comparisonId = null; S.comparison = null;
    refresh();
  }

  function openComparison(id) {
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
             smoothing: parseFloat($("smoothing").value) };
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
      label: s.label, stroke: s.band ? s.color + "55" : s.color, width: s.band ? 1 : 1.6,
      spanGaps: true, points: { show: s.points || false, size: 6 },
      value: (u, v) => (v == null ? "–" : Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)),
    })));
    const chart = { spec, div, zoomed: false, named: spec.series.filter((s) => !s.band).length };
    chart.u = new uPlot({
      width: chartWidth(), height: 250,
      scales: { x: { time: false, distr: spec.logX ? 3 : 1 }, y: { distr: spec.logY ? 3 : 1 } },
      axes: [{ label: spec.xLabel, size: 40, incrs: spec.xLabel === "layer" ? [1, 2, 5, 10] : undefined },
             { size: 60, values: (u, ticks) => ticks.map(tick) }],
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
        xLabel: X_LABELS[o.x], logX: o.logX, logY,
        series: S.selected.map((id) => ({ label: id, color: colorOf(id), points: c.points })),
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
    groups.forEach((g, k) => {
      const color = COLORS[k % COLORS.length];
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
        groups.map((g) => ({ label: g.variant, ...bandOver(g.curves, (cv, i) => cv.loss[i]) })), o));
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
                 xLabel: "training wall-clock (s)", logX: o.logX, logY: false,
                 series: groups.map((g, k) => ({ label: g.variant, color: COLORS[k % COLORS.length] })),
                 data: timeGroups.length ? uPlot.join(timeGroups) : [[]] });
    const sa = groups.find((g) => g.variant === "sa");
    if (sa) {
      const deltas = groups.filter((g) => g !== sa).map((g) => {
        const paired = g.curves.map((cv) => {
          const ref = sa.curves.find((r) => r.seed === cv.seed);
          if (!ref) return null;
          const refAt = new Map(ref.step.map((s, i) => [s, ref.loss[i]]));
          return { seed: cv.seed, step: cv.step, loss: cv.loss.map((y, i) => (isNum(y) && isNum(refAt.get(cv.step[i])) ? y - refAt.get(cv.step[i]) : null)) };
        }).filter(Boolean);
        return { label: g.variant + " − sa", ...bandOver(paired, (cv, i) => cv.loss[i]) };
      });
      if (deltas.length) specs.push(bandSpec("Δ validation loss vs SA, paired by seed (mean ± sd)", "step", deltas, o));
    }
    // Loss by position: each variant's difference to SA per bucket of positions in the window
    // (x: the bucket's last position), with its 95 % interval over seeds; a chart per set.
    const lbp = c.report && c.report.loss_by_position;
    if (lbp && lbp.buckets && lbp.buckets.length && c.report.summary) {
      const xs = lbp.buckets.map((b) => b[1]);
      (lbp.sets || []).forEach((name, set) => {
        const g = c.report.summary
          .filter((s) => s.variant !== "sa" && s.loss_by_position && s.loss_by_position[set])
          .map((s) => {
            const d = s.loss_by_position[set].delta_vs_sa || [];
            const at = (i, k) => (d[i] && d[i].ci95 && isNum(d[i].ci95[k]) ? d[i].ci95[k] : null);
            return { label: s.variant + " − sa", xs, mean: xs.map((x, i) => (d[i] ? d[i].mean : null)),
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
                                  ["self_weight", "attention to oneself a_ii by layer (mean over heads)"]]) {
        const data = [layers];
        for (const v of variants)
          data.push(layers.map((l) => {
            const vals = bias.filter((b) => b.variant === v && b.layer === l && isNum(b[key])).map((b) => b[key]);
            return vals.length ? mean(vals) : null;
          }));
        specs.push({ title, xLabel: "layer", logX: false, logY: false,
                     series: variants.map((v, k) => ({ label: v, color: COLORS[k % COLORS.length], points: true })),
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
      return { label: v + " − sa", xs, mean: m,
               hi: mine.map((r, i) => (withCi ? ci(r, 1) : m[i] + d[i])),
               lo: mine.map((r, i) => (withCi ? ci(r, 0) : m[i] - d[i])) };
    });
    const xs = rows.map((r) => r[param]).filter((x) => isNum(x) && x > 0);
    const spec = bandSpec("Δ final validation loss vs SA by " + param + " (mean and its band over seeds)", param,
                          groups, { logX: xs.length > 1 && Math.max(...xs) / Math.min(...xs) >= 8 });
    spec.series.forEach((s) => (s.points = !s.band));
    return spec;
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
      box.append(t);
    } else if (r && r.summary) {
      const t = document.createElement("table");
      t.className = "summary";
      const head = ["variant", "seeds", "val loss", "Δ vs SA [95 % CI]", "p (t; Holm)", "median steps to SA's loss",
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
        for (const x of [s.variant, s.n_seeds, fmt(s.val_loss_mean) + " ± " + fmt(s.val_loss_sd),
                         s.variant === "sa" ? "–" : withInterval(s.delta_vs_sa_mean, ci),
                         (isNum(s.p_value) ? s.p_value.toPrecision(2) : "–") +
                           (isNum(s.p_holm) && r.summary.length > 2 ? "; " + s.p_holm.toPrecision(2) : ""),
                         isNum(median) ? median.toFixed(0) + (el.seeds ? " (" + el.seeds_reached + " of " + el.seeds + " reached)" : "") : "–",
                         isNum(speedup) ? speedup.toFixed(3) + " / " + fmt(timeSpeedup, 3) : "–",
                         s.variant === "sa" ? "–" : (100 * s.overhead_vs_sa).toFixed(1) + " %", s.verdict || ""])
          cell(row, String(x));
      }
      box.append(t);
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
    const structure = JSON.stringify([S.comparisonId, S.selected, o.x, o.logX, o.logY,
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
    charts: () => S.charts.map((c) => ({
      title: c.spec.title, series: c.named,
      points: c.u.data.slice(1).reduce((n, col, k) =>
        n + (c.spec.series[k].band ? 0 : col.filter((y) => y != null).length), 0),
    })),
  };

  for (const id of ["x-axis", "log-x", "log-y"]) $(id).onchange = () => render();
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
