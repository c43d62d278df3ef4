// dashboard.js draws a Grafana dashboard JSON from Prometheus' HTTP API:
// rows, stat panels and timeseries panels placed by gridPos, each target's
// PromQL run with query_range over the chosen window. It implements only what
// dashboards/webhookd.json uses (units, thresholds, stacking, table legends),
// so a screenshot can be taken where Grafana itself cannot be installed.
//
// When every panel is drawn, <pre id="report"> holds one JSON line per panel
// (title, series per query, errors) and body[data-done] is set: render.sh
// reads the report with --dump-dom to name the panels that showed no data.
"use strict";

// Grafana's grid: 24 columns, 30 px rows, 8 px gutters.
const GRID_COLUMNS = 24;
const CELL_HEIGHT = 30;
const CELL_MARGIN = 8;

// Grafana's classic palette, in the order it hands colours to series.
const PALETTE = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9",
  "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477"];

// Grafana's named threshold colours (dark theme).
const NAMED_COLORS = { green: "#73BF69", red: "#F2495C", orange: "#FF9830", yellow: "#FADE2A",
  blue: "#5794F2", purple: "#B877D9", "dark-red": "#C4162A", "dark-green": "#37872D", transparent: "transparent" };

function colorOf(name) {
  return NAMED_COLORS[name] ?? name;
}

// parseTime accepts "now", "now-15m" (s, m, h, d) or unix seconds.
function parseTime(text, now) {
  if (text === "now") return now;
  const m = /^now-(\d+)([smhd])$/.exec(text);
  if (m) return now - Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]];
  const n = Number(text);
  if (!Number.isFinite(n)) throw new Error(`bad time ${text}`);
  return n;
}

function settings() {
  const q = new URLSearchParams(location.search);
  const now = Math.floor(Date.now() / 1000);
  const from = parseTime(q.get("from") ?? "now-15m", now);
  const to = parseTime(q.get("to") ?? "now", now);
  return {
    from, to,
    job: q.get("job") ?? "webhookd",
    instance: q.get("instance") ?? ".*",
    scrape: Number(q.get("scrape") ?? "15"),
    // Prometheus' own name for the data source variable; shown in the bar only.
    datasource: q.get("datasource") ?? "Prometheus",
  };
}

// niceInterval rounds a step up to one Grafana would pick.
function niceInterval(seconds) {
  const steps = [1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 21600, 43200, 86400];
  return steps.find((s) => s >= seconds) ?? 86400;
}

// interpolate substitutes the template variables Grafana would: the
// dashboard's own ($job, $instance, $datasource) and the built-ins.
function interpolate(expr, vars) {
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, (all, braced, bare) => {
    const name = braced ?? bare;
    return name in vars ? String(vars[name]) : all;
  });
}

// ---- value formatting (Grafana unit ids) ----

function fixed(v, decimals) {
  if (decimals !== undefined && decimals !== null) return v.toFixed(decimals);
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1).replace(/\.0$/, "");
  if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, "");
  return v.toPrecision(2).replace(/\.?0+$/, "");
}

function scaled(v, decimals, base, units) {
  let i = 0;
  while (Math.abs(v) >= base && i < units.length - 1) { v /= base; i++; }
  return `${fixed(v, decimals)}${units[i]}`;
}

function formatValue(v, unit, decimals) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  switch (unit) {
    case "percentunit": return `${fixed(v * 100, decimals)}%`;
    case "percent": return `${fixed(v, decimals)}%`;
    case "reqps": return `${scaled(v, decimals, 1000, ["", "K", "M", "B"])} req/s`;
    case "bytes": return scaled(v, decimals, 1024, [" B", " KiB", " MiB", " GiB", " TiB"]);
    case "s": {
      const a = Math.abs(v);
      if (a === 0) return "0 s";
      if (a < 1e-3) return `${fixed(v * 1e6, decimals)} µs`;
      if (a < 1) return `${fixed(v * 1e3, decimals)} ms`;
      if (a < 60) return `${fixed(v, decimals)} s`;
      if (a < 3600) return `${fixed(v / 60, decimals)} min`;
      return `${fixed(v / 3600, decimals)} hour`;
    }
    default: return scaled(v, decimals, 1000, ["", " K", " Mil", " Bil"]);
  }
}

// ---- queries ----

function legendName(format, metric, expr) {
  if (format) return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k) => metric[k] ?? "");
  const labels = Object.entries(metric).filter(([k]) => k !== "__name__");
  if (labels.length === 0) return metric.__name__ ?? expr;
  return `${metric.__name__ ?? ""}{${labels.map(([k, v]) => `${k}="${v}"`).join(", ")}}`;
}

async function queryRange(expr, start, end, step) {
  const body = new URLSearchParams({ query: expr, start, end, step });
  const res = await fetch(`/api/v1/query_range?${body}`);
  const json = await res.json();
  if (json.status !== "success") throw new Error(json.error ?? `HTTP ${res.status}`);
  return json.data.result;
}

// runPanel runs every target of a panel on one time grid and returns
// [{name, values}] aligned to the returned timestamps.
async function runPanel(panel, cfg, widthPx) {
  const range = cfg.to - cfg.from;
  const step = Math.max(cfg.scrape, niceInterval(range / Math.max(widthPx, 100)));
  const start = Math.floor(cfg.from / step) * step;
  const end = cfg.to;
  const vars = {
    job: cfg.job, instance: cfg.instance, datasource: cfg.datasource,
    __interval: `${step}s`, __interval_ms: step * 1000,
    // Grafana: max($__interval + scrape interval, 4 * scrape interval).
    __rate_interval: `${Math.max(step + cfg.scrape, 4 * cfg.scrape)}s`,
    __range: `${range}s`, __range_s: range, __range_ms: range * 1000,
  };
  const times = [];
  for (let t = start; t <= end; t += step) times.push(t);
  const index = new Map(times.map((t, i) => [t, i]));
  const series = [];
  const queries = [];
  await Promise.all((panel.targets ?? []).filter((t) => !t.hide && t.expr).map(async (target, ti) => {
    const expr = interpolate(target.expr, vars);
    const q = { refId: target.refId, expr, series: 0, error: null, order: ti };
    queries.push(q);
    try {
      const result = await queryRange(expr, start, end, step);
      q.series = result.length;
      for (const r of result) {
        const values = new Array(times.length).fill(null);
        for (const [t, v] of r.values) {
          const i = index.get(Math.round(t));
          const n = Number(v);
          if (i !== undefined && Number.isFinite(n)) values[i] = n;
        }
        series.push({ order: ti, name: legendName(target.legendFormat, r.metric, expr), values });
      }
    } catch (err) {
      q.error = String(err.message ?? err);
    }
  }));
  series.sort((a, b) => a.order - b.order || a.name.localeCompare(b.name, "en", { numeric: true }));
  queries.sort((a, b) => a.order - b.order);
  return { times, series, queries };
}

// ---- reductions ----

function reduce(values, calc) {
  const xs = values.filter((v) => v !== null);
  if (xs.length === 0) return null;
  switch (calc) {
    case "mean": return xs.reduce((a, b) => a + b, 0) / xs.length;
    case "max": return Math.max(...xs);
    case "min": return Math.min(...xs);
    case "sum": return xs.reduce((a, b) => a + b, 0);
    case "last": return values[values.length - 1];
    default: return xs[xs.length - 1]; // lastNotNull
  }
}

const CALC_TITLES = { mean: "Mean", max: "Max", min: "Min", lastNotNull: "Last *", last: "Last", sum: "Total" };

function thresholdColor(thresholds, v) {
  let color = "green";
  for (const step of thresholds?.steps ?? []) {
    if (step.value === null || (v !== null && v >= step.value)) color = step.color;
  }
  return colorOf(color);
}

// ---- drawing ----

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function hexToRgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function drawStat(body, panel, data) {
  const defaults = panel.fieldConfig?.defaults ?? {};
  const calc = panel.options?.reduceOptions?.calcs?.[0] ?? "lastNotNull";
  const stats = data.series.length ? data.series : [];
  const wrap = el("div", "stat");
  body.appendChild(wrap);
  body.style.padding = "0";
  const s = stats[0];
  const v = s ? reduce(s.values, calc) : null;
  const color = thresholdColor(defaults.thresholds, v);
  if (panel.options?.colorMode === "background" && s) {
    body.parentElement.style.background = `linear-gradient(120deg, ${hexToRgba(color, 0.85)}, ${color})`;
  }
  if (!s) {
    wrap.appendChild(el("div", "nodata", "No data"));
    return;
  }
  const text = formatValue(v, defaults.unit, defaults.decimals);
  wrap.appendChild(el("div", "value", text));
  if (stats.length > 1) wrap.appendChild(el("div", "label", `${stats.length} series; first: ${s.name}`));
  if (panel.options?.graphMode === "area") {
    const w = body.clientWidth, h = Math.floor(body.clientHeight * 0.45);
    const canvas = el("canvas", "spark");
    canvas.width = w; canvas.height = h;
    canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
    wrap.appendChild(canvas);
    const xs = s.values.map((y, i) => [i, y]).filter(([, y]) => y !== null);
    if (xs.length > 1) {
      const ys = xs.map(([, y]) => y);
      const lo = Math.min(...ys, 0), hi = Math.max(...ys);
      const span = hi - lo || 1;
      const ctx = canvas.getContext("2d");
      const px = (i) => (i / (s.values.length - 1)) * w;
      const py = (y) => h - 2 - ((y - lo) / span) * (h - 6);
      ctx.beginPath();
      ctx.moveTo(px(xs[0][0]), h);
      for (const [i, y] of xs) ctx.lineTo(px(i), py(y));
      ctx.lineTo(px(xs[xs.length - 1][0]), h);
      ctx.closePath();
      ctx.fillStyle = "rgba(255, 255, 255, 0.18)";
      ctx.fill();
      ctx.beginPath();
      xs.forEach(([i, y], k) => (k ? ctx.lineTo(px(i), py(y)) : ctx.moveTo(px(i), py(y))));
      ctx.strokeStyle = "rgba(255, 255, 255, 0.55)";
      ctx.lineWidth = 1.5;
      ctx.stroke();
    }
  }
}

function drawLegend(body, panel, series, colors) {
  const legendOpts = panel.options?.legend ?? {};
  if (legendOpts.showLegend === false) return null;
  const unit = panel.fieldConfig?.defaults?.unit;
  const decimals = panel.fieldConfig?.defaults?.decimals;
  const calcs = legendOpts.displayMode === "table" ? (legendOpts.calcs ?? []) : [];
  const box = el("div", "legend");
  const table = el("table");
  if (calcs.length) {
    const head = el("tr");
    head.appendChild(el("th", "name", ""));
    for (const c of calcs) head.appendChild(el("th", "", CALC_TITLES[c] ?? c));
    table.appendChild(head);
  }
  series.forEach((s, i) => {
    const tr = el("tr");
    const name = el("td", "name");
    const sw = el("span", "swatch");
    sw.style.background = colors[i];
    name.appendChild(sw);
    name.appendChild(document.createTextNode(s.name));
    name.title = s.name;
    tr.appendChild(name);
    for (const c of calcs) tr.appendChild(el("td", "", formatValue(reduce(s.values, c), unit, decimals)));
    table.appendChild(tr);
  });
  box.appendChild(table);
  body.appendChild(box);
  return box;
}

function drawTimeseries(body, panel, data, cfg) {
  const defaults = panel.fieldConfig?.defaults ?? {};
  const custom = defaults.custom ?? {};
  if (data.series.length === 0) {
    body.appendChild(el("div", "nodata", "No data"));
    return;
  }
  const colors = data.series.map((_, i) => PALETTE[i % PALETTE.length]);
  const chartBox = el("div");
  chartBox.style.flex = "1";
  chartBox.style.minHeight = "0";
  body.appendChild(chartBox);
  const legend = drawLegend(body, panel, data.series, colors);
  // The legend may take at most 40 % of the body; Grafana scrolls the rest.
  if (legend) legend.style.maxHeight = `${Math.floor(body.clientHeight * 0.4)}px`;

  const stacked = custom.stacking?.mode === "normal";
  let plotted = data.series.map((s) => s.values);
  if (stacked) {
    const acc = new Array(data.times.length).fill(0);
    plotted = plotted.map((vals) => vals.map((v, i) => (v === null ? null : (acc[i] += v))));
  }
  const unit = defaults.unit;
  const fill = (custom.fillOpacity ?? 0) / 100;
  const thresholdSteps = custom.thresholdsStyle?.mode === "dashed" ? (defaults.thresholds?.steps ?? []) : [];

  const opts = {
    width: chartBox.clientWidth,
    height: chartBox.clientHeight,
    legend: { show: false },
    cursor: { show: false },
    padding: [8, 8, 0, 0],
    scales: {
      x: { time: true, range: () => [cfg.from, cfg.to] },
      y: {
        range: (u, lo, hi) => {
          lo = lo ?? 0; hi = hi ?? 1;
          if (hi === lo) hi = lo + 1;
          const [nlo, nhi] = uPlot.rangeNum(lo, hi, 0.1, true);
          return [defaults.min ?? nlo, defaults.max ?? nhi];
        },
      },
    },
    axes: [
      {
        stroke: "rgba(204, 204, 220, 0.65)", font: "11px DejaVu Sans, sans-serif",
        grid: { stroke: "rgba(204, 204, 220, 0.08)", width: 1 }, ticks: { show: false }, size: 24, space: 55,
        // UTC clock times, seconds only when ticks are closer than a minute.
        values: (u, vals, axis, space, incr) => vals.map((v) => new Date(v * 1000).toISOString().slice(11, incr < 60 ? 19 : 16)),
      },
      {
        stroke: "rgba(204, 204, 220, 0.65)", font: "11px DejaVu Sans, sans-serif",
        grid: { stroke: "rgba(204, 204, 220, 0.08)", width: 1 }, ticks: { show: false },
        values: (u, vals) => vals.map((v) => formatValue(v, unit, undefined)),
        size: (u, values) => 14 + Math.max(0, ...(values ?? []).map((v) => v.length)) * 6,
      },
    ],
    series: [{}, ...data.series.map((s, i) => ({
      label: s.name,
      stroke: colors[i],
      width: custom.lineWidth ?? 1,
      fill: fill > 0 ? hexToRgba(colors[i], fill) : undefined,
      points: { show: false },
      spanGaps: custom.spanNulls === true,
    }))],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        for (const step of thresholdSteps) {
          if (step.value === null || colorOf(step.color) === "transparent") continue;
          const y = u.valToPos(step.value, "y", true);
          if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
          ctx.save();
          ctx.strokeStyle = colorOf(step.color);
          ctx.setLineDash([10, 10]);
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(u.bbox.left, y);
          ctx.lineTo(u.bbox.left + u.bbox.width, y);
          ctx.stroke();
          ctx.restore();
        }
      }],
    },
  };
  // eslint-disable-next-line no-new
  new uPlot(opts, [data.times, ...plotted], chartBox);
}

function place(node, gp, colWidth) {
  node.style.left = `${gp.x * (colWidth + CELL_MARGIN)}px`;
  node.style.top = `${gp.y * (CELL_HEIGHT + CELL_MARGIN)}px`;
  node.style.width = `${gp.w * colWidth + (gp.w - 1) * CELL_MARGIN}px`;
  node.style.height = `${gp.h * CELL_HEIGHT + (gp.h - 1) * CELL_MARGIN}px`;
}

function describeRange(cfg) {
  const fmt = (t) => new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
  return `${fmt(cfg.from)} to ${fmt(cfg.to)} UTC`;
}

async function main() {
  const cfg = settings();
  const dash = await (await fetch("/dashboard.json")).json();
  document.getElementById("dash-title").textContent = dash.title;
  document.title = dash.title;
  document.getElementById("range").textContent = describeRange(cfg);
  document.getElementById("refresh").textContent = `Refresh ${dash.refresh || "off"}`;

  const shown = { datasource: cfg.datasource, job: cfg.job, instance: cfg.instance === ".*" ? "All" : cfg.instance };
  const vars = document.getElementById("vars");
  for (const v of dash.templating?.list ?? []) {
    if (v.hide === 2) continue;
    const box = el("div", "var");
    box.appendChild(el("div", "name", v.label ?? v.name));
    box.appendChild(el("div", "value", shown[v.name] ?? v.current?.text ?? ""));
    vars.appendChild(box);
  }

  const grid = document.getElementById("grid");
  const width = grid.clientWidth;
  const colWidth = (width - (GRID_COLUMNS - 1) * CELL_MARGIN) / GRID_COLUMNS;
  let bottom = 0;
  const jobs = [];
  for (const panel of dash.panels ?? []) {
    const gp = panel.gridPos;
    bottom = Math.max(bottom, (gp.y + gp.h) * (CELL_HEIGHT + CELL_MARGIN));
    if (panel.type === "row") {
      const row = el("div", "row");
      place(row, gp, colWidth);
      row.appendChild(el("span", "chev", panel.collapsed ? "▸" : "▾"));
      row.appendChild(el("span", "", panel.title));
      grid.appendChild(row);
      continue;
    }
    const node = el("div", "panel");
    place(node, gp, colWidth);
    node.appendChild(el("div", "title", panel.title));
    const body = el("div", "body");
    node.appendChild(body);
    grid.appendChild(node);
    jobs.push((async () => {
      const report = { id: panel.id, title: panel.title, type: panel.type, queries: [] };
      try {
        const data = await runPanel(panel, cfg, node.clientWidth);
        report.queries = data.queries;
        report.series = data.series.length;
        // A series of nothing but nulls (0/0 ratios) is no data to a reader.
        report.points = data.series.reduce((n, s) => n + s.values.filter((v) => v !== null).length, 0);
        if (report.points === 0) data.series = [];
        if (panel.type === "stat") drawStat(body, panel, data);
        else drawTimeseries(body, panel, data, cfg);
      } catch (err) {
        report.error = String(err.message ?? err);
        body.appendChild(el("div", "error", report.error));
      }
      return report;
    })());
  }
  grid.style.height = `${bottom}px`;
  const reports = await Promise.all(jobs);
  document.getElementById("report").textContent = reports.map((r) => JSON.stringify(r)).join("\n");
  document.body.dataset.done = "1";
}

main().catch((err) => {
  document.getElementById("report").textContent = JSON.stringify({ error: String(err.message ?? err) });
  document.body.dataset.done = "1";
  document.getElementById("grid").appendChild(el("div", "error", String(err)));
});
