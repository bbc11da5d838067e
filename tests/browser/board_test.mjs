// The checks of tests/browser/board_test.sh, in headless Chromium: the board's run list and
// charts, a training run advancing without a reload, a comparison's view, and report.html opened
// from disk with no network. Fails with the first check that does not hold.
// Usage: node board_test.mjs PLAYWRIGHT_INDEX_MJS BOARD_URL REPORT_HTML SWEEP_REPORT_HTML OUT_DIR
import { pathToFileURL } from "node:url";

const [playwrightPath, boardUrl, reportHtml, sweepHtml, outDir] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(playwrightPath).href);

let failures = 0;
function check(ok, what, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? ": " + detail : ""}`);
  if (!ok) failures++;
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(boardUrl);

  // The list: a finished run, the run in training and the comparison's four arms.
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length >= 6,
                             null, { timeout: 30000 });
  const rows = await page.$$eval("#runs tbody tr", (trs) => trs.map((tr) => ({
    id: tr.dataset.id, state: tr.dataset.state, step: tr.querySelector(".step").textContent })));
  const row = (id) => rows.find((r) => r.id === id) || {};
  check(rows.length === 6, "six runs listed", rows.map((r) => r.id).join(", "));
  check(row("finished").state === "finished" && row("finished").step === "40/40",
        "the finished run: finished, step 40/40", JSON.stringify(row("finished")));
  check(row("training").state === "running", "the training run: running", JSON.stringify(row("training")));
  check(rows.filter((r) => r.id.startsWith("compare/arms/") && r.state === "finished").length === 4,
        "the comparison's four arms, finished");
  const comparisons = await page.$$eval("#comparisons li", (lis) => lis.map((li) => li.dataset.id));
  check(comparisons.includes("compare"), "the comparison listed", comparisons.join(", "));

  // The first open: the newest comparison (the only one here), drawn with nothing clicked.
  await page.waitForFunction(() => window.xsaBoard.view().comparison === "compare" &&
                             window.xsaBoard.charts().some((c) => c.title.startsWith("similarity bias")),
                             null, { timeout: 30000 });
  let first = await page.evaluate(() => window.xsaBoard.charts());
  check(first.length >= 5 && first.every((c) => c.points > 0),
        "on opening, the comparison's charts drawn", first.map((c) => `${c.title}: ${c.points}`).join("; "));
  // Colours by variant, the same on every chart: SA blue, XSA red (and "xsa − sa" red).
  const colourOf = (label) => label.startsWith("xsa") ? "#d62728" : label.startsWith("sa") ? "#1f77b4" : null;
  const wrong = first.flatMap((c) => c.labels.map((l, k) => [c.title, l, c.colors[k]]))
    .filter(([, l, colour]) => colourOf(l) !== colour);
  check(wrong.length === 0 && first.some((c) => c.labels.includes("sa")),
        "SA blue and XSA red on every chart", JSON.stringify(wrong.slice(0, 4)));
  const distinct = (ticks) => { const t = ticks.filter((x) => x !== ""); return new Set(t).size === t.length; };
  const repeated = first.filter((c) => !distinct(c.yTicks) || !distinct(c.xTicks));
  check(repeated.length === 0, "every axis's tick labels distinct",
        repeated.map((c) => `${c.title}: ${c.yTicks.join("|")} / ${c.xTicks.join("|")}`).join("; "));
  const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(widths[0] <= widths[1], "the comparison view within the window's width", widths.join(" ≤ "));
  // "ignore outliers" (on): the validation loss's y range leaves out step 0's loss; off: takes it.
  const valTop = async () => (await page.evaluate(() => window.xsaBoard.charts()))
    .find((c) => c.title.startsWith("validation loss (mean")).yRange[1];
  const step0 = await page.evaluate(async () => {
    const c = await (await fetch("api/comparison?id=compare")).json();
    return Math.min(...c.seeds.flatMap((s) => s.arms.map((a) => a.val_curve[0][1])));
  });
  const trimmedTop = await valTop();
  await page.uncheck("#outliers");
  const wholeTop = await valTop();
  check(trimmedTop < step0 && wholeTop >= step0,
        "ignoring outliers leaves step 0's loss out of the y range, unticked it is in",
        `step 0 ${step0.toFixed(3)}, top ${trimmedTop.toFixed(3)} → ${wholeTop.toFixed(3)}`);
  await page.check("#outliers");
  const root = await page.evaluate(async () => (await (await fetch("api/runs")).json()).root);
  check(root === "runs", "the list names the folder, not its path", root);
  await page.screenshot({ path: `${outDir}/board-first-open.png` });

  // Two runs picked: seven charts, two series each, with points.
  await page.click('#runs tr[data-id="finished"]');
  await page.click('#runs tr[data-id="training"]');
  await page.waitForFunction(() => window.xsaBoard.view().comparison === null &&
                             window.xsaBoard.view().runs.length === 2 &&
                             window.xsaBoard.charts().length === 7 &&
                             window.xsaBoard.charts()[0].title.startsWith("training loss") &&
                             window.xsaBoard.charts()[0].series === 2, null, { timeout: 30000 });
  let charts = await page.evaluate(() => window.xsaBoard.charts());
  check(charts.every((c) => c.series === 2), "every chart overlays the two runs",
        charts.map((c) => `${c.title}: ${c.series}`).join("; "));
  check(charts.every((c) => c.points > 0), "every chart has points",
        charts.map((c) => `${c.title}: ${c.points}`).join("; "));
  check(await page.$$eval(".chart canvas", (cs) => cs.length) === 7, "seven canvases drawn");

  // Live: the training run's step and its loss chart grow with no reload.
  await page.evaluate(() => { window.notReloaded = true; });
  const stepOf = () => page.$eval('#runs tr[data-id="training"] .step',
                                  (td) => parseInt(td.textContent, 10));
  const before = await stepOf(), pointsBefore = charts[0].points;
  await page.waitForFunction((b) => parseInt(document.querySelector(
      '#runs tr[data-id="training"] .step').textContent, 10) > b, before, { timeout: 30000 });
  const after = await stepOf();
  charts = await page.evaluate(() => window.xsaBoard.charts());
  check(after > before, "the training run's step advances", `${before} → ${after}`);
  check(charts[0].points > pointsBefore, "its loss chart gains points",
        `${pointsBefore} → ${charts[0].points}`);
  check(await page.evaluate(() => window.notReloaded === true), "without a reload");
  const steps = await page.evaluate(() => window.xsaBoard.steps("training"));
  check(steps.length > 0 && steps.every((s, i) => s === i + 1),
        "each of its records read once, in order (steps 1, 2, 3, ...)",
        `${steps.length} records, first ${steps.slice(0, 3)}, bad at ${steps.findIndex((s, i) => s !== i + 1)}`);

  // The axes: tokens and wall-clock, log y.
  await page.selectOption("#x-axis", "tokens");
  await page.check("#log-y");
  charts = await page.evaluate(() => window.xsaBoard.charts());
  check(charts.length === 7 && charts[0].points > 0, "against tokens with a log y axis");
  await page.screenshot({ path: `${outDir}/board.png` });

  // The comparison: validation curves with seed bands, Δ vs SA, similarity bias per layer.
  await page.click('#comparisons li[data-id="compare"]');
  await page.waitForFunction(() => window.xsaBoard.charts().some(
      (c) => c.title.startsWith("similarity bias")), null, { timeout: 30000 });
  charts = await page.evaluate(() => window.xsaBoard.charts());
  const titled = (t) => charts.find((c) => c.title.startsWith(t)) || {};
  check(titled("validation loss (mean").series === 2 && titled("validation loss (mean").points >= 8,
        "the variants' validation curves (sa, xsa; 4 passes each)", JSON.stringify(titled("validation loss (mean")));
  check(titled("Δ validation loss").series === 1, "Δ vs SA", JSON.stringify(titled("Δ validation loss")));
  check(titled("similarity bias").series === 2 && titled("similarity bias").points === 4,
        "similarity bias per layer (2 variants × 2 layers)", JSON.stringify(titled("similarity bias")));
  // Loss by position: xsa's difference to SA in each bucket of positions (1–16, 17–64 at the tiny
  // preset's context 64), with its interval band.
  const byPosition = titled("Δ loss vs SA by position in the window, validation");
  check(byPosition.series >= 1 && byPosition.points === 2,
        "loss by position: xsa − sa in 2 buckets", JSON.stringify(byPosition));
  const summary = await page.$$eval("#comparison table.summary tbody tr", (trs) => trs.length);
  check(summary === 2, "the summary table: a row per variant (Δ and p)", String(summary));
  await page.screenshot({ path: `${outDir}/board-comparison.png`, fullPage: true });
  check(errors.length === 0, "no script errors on the board", errors.join(" | "));

  // report.html from disk: the same charts, nothing fetched.
  const report = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  const requests = [];
  const reportErrors = [];
  report.on("request", (r) => { if (!r.url().startsWith("file:")) requests.push(r.url()); });
  report.on("pageerror", (e) => reportErrors.push(e.message));
  await report.goto(pathToFileURL(reportHtml).href);
  await report.waitForFunction(() => window.xsaBoard && window.xsaBoard.charts().length >= 5, null,
                               { timeout: 30000 });
  const reportCharts = await report.evaluate(() => window.xsaBoard.charts());
  check(reportCharts.length === charts.length &&
        reportCharts.every((c, k) => c.series === charts[k].series && c.points === charts[k].points),
        "report.html draws the comparison's charts, the same series and points",
        reportCharts.map((c) => `${c.title}: ${c.series}/${c.points}`).join("; "));
  check(requests.length === 0, "report.html fetches nothing", requests.join(" "));
  check(reportErrors.length === 0, "no script errors in report.html", reportErrors.join(" | "));
  await report.screenshot({ path: `${outDir}/report.png`, fullPage: true });

  // A sweep's report.html: Δ against the swept value, then each value's comparison.
  const sweep = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  const sweepRequests = [], sweepErrors = [];
  sweep.on("request", (r) => { if (!r.url().startsWith("file:")) sweepRequests.push(r.url()); });
  sweep.on("pageerror", (e) => sweepErrors.push(e.message));
  await sweep.goto(pathToFileURL(sweepHtml).href);
  await sweep.waitForFunction(() => window.xsaBoard && window.xsaBoard.charts().length >= 1, null,
                              { timeout: 30000 });
  const sweepCharts = await sweep.evaluate(() => window.xsaBoard.charts());
  check(sweepCharts[0].title.startsWith("Δ final validation loss vs SA by seq-len") &&
        sweepCharts[0].series === 1 && sweepCharts[0].points === 2,
        "the sweep's Δ against seq-len (xsa; 2 values)", JSON.stringify(sweepCharts[0]));
  const configs = await sweep.$$eval("#comparisons li", (lis) => lis.map((li) => li.dataset.id));
  check(configs.length === 3 && configs.includes("seq-len-32") && configs.includes("seq-len-64"),
        "the sweep and its two comparisons listed", configs.join(", "));
  await sweep.click('#comparisons li[data-id="seq-len-64"]');
  await sweep.waitForFunction(() => window.xsaBoard.charts().some(
      (c) => c.title.startsWith("validation loss (mean")), null, { timeout: 30000 });
  const configCharts = await sweep.evaluate(() => window.xsaBoard.charts());
  check(configCharts.find((c) => c.title.startsWith("validation loss (mean")).points === 6,
        "a value's comparison: sa and xsa, 3 validation passes each");
  check(sweepRequests.length === 0 && sweepErrors.length === 0,
        "the sweep's report.html: no request, no script error", sweepRequests.concat(sweepErrors).join(" "));
} finally {
  await browser.close();
}
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
