// Charts of an endpoint's stats (GET /v1/webhook_subscriptions/{id}/stats)
// drawn with uPlot (vendor/uPlot.iife.min.js, loaded by index.html before
// the modules: a canvas, styled only through the CSSOM, which the
// Content-Security-Policy allows). Every chart comes with its text
// equivalent: an aria-label that sums it up, and the table of its numbers.

import { h, zone } from './dom.js';

// colours of the outcomes; the canvas needs values, not CSS variables.
const colours = { succeeded: '#1a7f37', retrying: '#d08700', failed: '#b42318', p50: '#2457c5', p95: '#7a3db8' };

// hourLabel shows a bucket's start in the zone the reader picked.
function hourLabel(iso, withDay) {
  return new Date(iso).toLocaleString(undefined, {
    month: withDay ? 'short' : undefined, day: withDay ? 'numeric' : undefined, hour: '2-digit', minute: '2-digit',
    timeZone: zone() === 'utc' ? 'UTC' : undefined,
  });
}

// percent of succeeded attempts, or a dash.
export function rate(totals) {
  if (totals.success_rate === null || totals.success_rate === undefined) return '—';
  return `${Math.round(totals.success_rate * 1000) / 10} %`;
}

function ms(v) {
  return v === null || v === undefined ? '—' : `${Math.round(v)} ms`;
}

// plot draws a uPlot chart into box once the box is on the page, at its
// width, and keeps it at the box's width as the page resizes. Without
// uPlot (a blocked script), the table and the label still say it all.
// The first drawing waits on a timer, not on a ResizeObserver: a tab in
// the background renders no frames, so an observer would not fire there
// until the tab is shown, while layout (clientWidth) still answers.
//
// The box keeps the chart's height from the start: it is drawn only once
// the page is on screen, and a chart that then pushed what is below it
// down would move a button from under a pointer about to click it. So no
// chart shows uPlot's legend, whose height is not known in advance: the
// page draws its own.
function plot(box, opts, data) {
  const uPlot = globalThis.uPlot;
  if (!uPlot) return;
  box.style.minHeight = `${opts.height}px`;
  const draw = (tries) => {
    const width = Math.floor(box.clientWidth);
    if (!box.isConnected || width === 0) {
      if (tries < 600) setTimeout(() => draw(tries + 1), 50); // a page built off screen: up to 30 s
      return;
    }
    const chart = new uPlot({
      ...opts, width,
      tzDate: zone() === 'utc' ? (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC') : undefined,
    }, data, box);
    if (typeof ResizeObserver !== 'function') return;
    const watch = new ResizeObserver(() => {
      if (!box.isConnected) {
        watch.disconnect();
        chart.destroy();
        return;
      }
      const w = Math.floor(box.clientWidth);
      if (w > 0 && w !== chart.width) chart.setSize({ width: w, height: opts.height });
    });
    watch.observe(box);
  };
  draw(0);
}

// stacked is the cumulative series of a bar chart by outcome: each bar
// drawn over the taller one before it, so the three read as one stack.
function stacked(buckets) {
  return [
    buckets.map((b) => b.succeeded + b.retrying + b.failed),
    buckets.map((b) => b.succeeded + b.retrying),
    buckets.map((b) => b.succeeded),
  ];
}

// sparkline is an endpoint's attempts per hour over 24 hours as small
// bars, with its summary as the accessible name.
export function sparkline(stats) {
  const t = stats.totals;
  const box = h('div', { class: 'spark', role: 'img',
    'aria-label': `Last 24 hours: ${t.attempts} attempts, ${rate(t)} succeeded, ${t.failed} failed for good, ${t.retrying} to be retried.` });
  const uPlot = globalThis.uPlot;
  if (uPlot) {
    const bars = uPlot.paths.bars({ size: [0.8, 12] });
    plot(box, {
      height: 44, legend: { show: false }, cursor: { show: false }, select: { show: false },
      axes: [{ show: false }, { show: false }], scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      padding: [2, 0, 0, 0],
      series: [{}, { fill: colours.failed, paths: bars, points: { show: false } },
        { fill: colours.retrying, paths: bars, points: { show: false } },
        { fill: colours.succeeded, paths: bars, points: { show: false } }],
    }, [stats.buckets.map((b) => Date.parse(b.start) / 1000), ...stacked(stats.buckets)]);
  }
  return box;
}

// statsCharts is the endpoint page's two charts of a window's stats, by
// outcome and response time, each followed by its table.
export function statsCharts(stats) {
  const withDay = stats.window !== '24h';
  const per = stats.bucket_seconds === 3600 ? 'hour' : `${stats.bucket_seconds / 3600} hours`;
  const t = stats.totals;
  const xs = stats.buckets.map((b) => Date.parse(b.start) / 1000);
  const outcomeBox = h('div', { class: 'chart', role: 'img', 'data-chart': 'outcomes',
    'aria-label': `Attempts per ${per}: ${t.attempts} in all, ${t.succeeded} succeeded, ${t.retrying} failed and retried, ${t.failed} failed for good; ${rate(t)} succeeded. The table below lists each ${per}.` });
  const timeBox = h('div', { class: 'chart', role: 'img', 'data-chart': 'latency',
    'aria-label': `Response time per ${per}: median ${ms(t.p50_ms)}, 95th percentile ${ms(t.p95_ms)} over the window. The table below lists each ${per}.` });
  const uPlot = globalThis.uPlot;
  if (uPlot) {
    const bars = uPlot.paths.bars({ size: [0.8, 24] });
    plot(outcomeBox, {
      // Its series are cumulative: uPlot's legend would show the sums, so
      // the page's own legend and table stand for it.
      height: 180, legend: { show: false }, cursor: { points: { show: false } }, scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      series: [{},
        { label: 'all (failed on top)', fill: colours.failed, stroke: colours.failed, paths: bars, points: { show: false } },
        { label: 'succeeded + retrying', fill: colours.retrying, stroke: colours.retrying, paths: bars, points: { show: false } },
        { label: 'succeeded', fill: colours.succeeded, stroke: colours.succeeded, paths: bars, points: { show: false } }],
    }, [xs, ...stacked(stats.buckets)]);
    plot(timeBox, {
      height: 160, legend: { show: false }, scales: { x: { time: true } },
      series: [{}, { label: 'p50 ms', stroke: colours.p50, width: 2, spanGaps: false },
        { label: 'p95 ms', stroke: colours.p95, width: 2, spanGaps: false }],
    }, [xs, stats.buckets.map((b) => b.p50_ms), stats.buckets.map((b) => b.p95_ms)]);
  }
  const table = h('table', { class: 'stackable stats-table', 'data-window': stats.window },
    h('caption', null, `Attempts and response times per ${per} (${stats.window})`),
    h('thead', null, h('tr', null, ['Start', 'Attempts', 'Succeeded', 'Retrying', 'Failed', 'p50', 'p95'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, stats.buckets.map((b) => h('tr', { 'data-start': b.start },
      h('th', { scope: 'row', 'data-label': 'Start' }, hourLabel(b.start, withDay)),
      h('td', { 'data-label': 'Attempts' }, String(b.attempts)),
      h('td', { 'data-label': 'Succeeded' }, String(b.succeeded)),
      h('td', { 'data-label': 'Retrying' }, String(b.retrying)),
      h('td', { 'data-label': 'Failed' }, String(b.failed)),
      h('td', { 'data-label': 'p50' }, ms(b.p50_ms)),
      h('td', { 'data-label': 'p95' }, ms(b.p95_ms))))));
  return h('div', { class: 'stats' },
    h('p', null, `${t.attempts} attempts, ${rate(t)} succeeded; median response ${ms(t.p50_ms)}, 95th percentile ${ms(t.p95_ms)}.`),
    h('h3', null, `Attempts per ${per} by outcome`),
    h('ul', { class: 'legend', 'aria-hidden': 'true' },
      ['succeeded', 'retrying', 'failed'].map((k) => h('li', { class: `key ${k}` }, k))),
    outcomeBox,
    h('h3', null, `Response time per ${per}`),
    h('ul', { class: 'legend', 'aria-hidden': 'true' }, h('li', { class: 'key p50' }, 'p50'), h('li', { class: 'key p95' }, 'p95')),
    timeBox,
    h('details', null, h('summary', null, 'Table of these numbers'), h('div', { class: 'table-wrap' }, table)));
}
