// loadgen.mjs drives a running webhookd with realistic traffic so that every
// panel of the dashboard has something to show: it runs local receivers that
// answer in different ways, makes an API key and subscriptions for one
// merchant, then publishes events and calls the merchant API for a while.
//
//   node loadgen.mjs --duration 300 --rate 12
//
// Receivers (all on 127.0.0.1, so the engine needs
// WEBHOOKD_ALLOW_HTTP_TARGETS=true and WEBHOOKD_ALLOW_PRIVATE_TARGETS=true):
//   ok       200 within a few ms to ~80 ms             (outcome success)
//   flaky    500 for about one call in ten             (http_error, then retries)
//   outage   200, but 503 from 35 % to 60 % of the run (an incident: retries,
//            permanent failures, the success ratio dips and recovers)
//   slow     200 after 0.2 s to 2.6 s                  (timeout when the delivery timeout is 2 s)
//   refused  a closed port, for a rare event type      (network_error)
import http from "node:http";
import net from "node:net";
import crypto from "node:crypto";
import fs from "node:fs";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    public: { type: "string", default: process.env.WEBHOOKD_PUBLIC_URL ?? "http://127.0.0.1:8080" },
    internal: { type: "string", default: process.env.WEBHOOKD_INTERNAL_URL ?? "http://127.0.0.1:8081" },
    token: { type: "string", default: process.env.WEBHOOKD_INGEST_TOKEN ?? "dev" },
    merchant: { type: "string", default: "m_demo" },
    duration: { type: "string", default: "300" }, // seconds of publishing
    rate: { type: "string", default: "12" }, // mean events per second
    drain: { type: "string", default: "20" }, // seconds to keep receivers up afterwards
    mark: { type: "string" }, // file that gets the unix time publishing stopped
  },
});

const duration = Number(opts.duration) * 1000;
let startedAt = Date.now(); // reset when publishing starts
const meanRate = Number(opts.rate);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const counts = { receiver: {}, publish: {}, api: {} };
const bump = (group, key) => { counts[group][key] = (counts[group][key] ?? 0) + 1; };

function listen(name, handler) {
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => { bump("receiver", name); handler(req, res); });
    });
    srv.keepAliveTimeout = 30000;
    srv.listen(0, "127.0.0.1", () => resolve({ srv, url: `http://127.0.0.1:${srv.address().port}/${name}` }));
  });
}

// closedPort finds a loopback port with nothing listening on it.
function closedPort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const reply = (res, code, body) => { res.writeHead(code, { "content-type": "application/json" }); res.end(JSON.stringify(body)); };

async function startReceivers() {
  const ok = await listen("ok", (req, res) => setTimeout(() => reply(res, 200, { received: true }), 2 + Math.random() ** 3 * 80));
  const flaky = await listen("flaky", (req, res) => setTimeout(() =>
    (Math.random() < 0.1 ? reply(res, 500, { error: "internal" }) : reply(res, 200, { received: true })), 10 + Math.random() * 40));
  const outage = await listen("outage", (req, res) => {
    const phase = (Date.now() - startedAt) / duration;
    if (phase > 0.35 && phase < 0.6) reply(res, 503, { error: "maintenance" });
    else setTimeout(() => reply(res, 200, { received: true }), 5 + Math.random() * 30);
  });
  const slow = await listen("slow", (req, res) => setTimeout(() => reply(res, 200, { received: true }), 200 + Math.random() ** 3 * 2400));
  const refused = `http://127.0.0.1:${await closedPort()}/refused`;
  return { servers: [ok.srv, flaky.srv, outage.srv, slow.srv], urls: { ok: ok.url, flaky: flaky.url, outage: outage.url, slow: slow.url, refused } };
}

async function call(base, method, path, { auth, body, idem } = {}) {
  const headers = { "content-type": "application/json" };
  if (auth) headers.authorization = `Bearer ${auth}`;
  if (idem) headers["idempotency-key"] = idem;
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// removeOldSubscriptions deletes the subscriptions an earlier run left: their
// receivers are gone, and every new event would fan out to them too.
async function removeOldSubscriptions(key) {
  let cursor = "";
  const old = [];
  for (;;) {
    const r = await call(opts.public, "GET", `/v1/webhook_subscriptions?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { auth: key });
    if (r.status !== 200) throw new Error(`list subscriptions: ${r.status} ${r.text}`);
    old.push(...r.json.data.filter((s) => (s.description ?? "").startsWith("render demo:")).map((s) => s.id));
    if (!r.json.has_more) break;
    cursor = r.json.next_cursor;
  }
  for (const id of old) {
    const r = await call(opts.public, "DELETE", `/v1/webhook_subscriptions/${id}`, { auth: key });
    if (r.status !== 204) throw new Error(`delete subscription ${id}: ${r.status} ${r.text}`);
  }
  if (old.length) console.log(`loadgen: deleted ${old.length} subscriptions of an earlier run`);
}

async function setup(urls) {
  const k = await call(opts.internal, "POST", `/internal/v1/merchants/${opts.merchant}/api_keys`,
    { auth: opts.token, body: { scopes: ["webhooks:read", "webhooks:write"] } });
  if (k.status !== 201) throw new Error(`create api key: ${k.status} ${k.text}`);
  const key = k.json.key;
  await removeOldSubscriptions(key);
  const plan = [
    ["ok", ["*"]],
    ["flaky", ["payout.paid", "payout.failed", "payout.created"]],
    ["outage", ["payout.paid", "payout.failed", "return.failed"]],
    ["slow", ["payout.paid", "deposit.received"]],
    ["refused", ["conversion.failed"]],
  ];
  const subs = [];
  for (const [name, events] of plan) {
    const r = await call(opts.public, "POST", "/v1/webhook_subscriptions", {
      auth: key, idem: crypto.randomUUID(),
      body: { url: urls[name], events, description: `render demo: ${name} receiver` },
    });
    if (r.status !== 201) throw new Error(`create subscription ${name}: ${r.status} ${r.text}`);
    subs.push(r.json.id);
  }
  return { key, subs };
}

// Event mix: mostly payouts, as a payments API would produce.
const MIX = [
  ["payout.created", 20], ["payout.initiated", 15], ["payout.paid", 30], ["payout.failed", 6],
  ["deposit.received", 12], ["return.failed", 2], ["conversion.succeeded", 6], ["conversion.failed", 2],
];
const MIX_TOTAL = MIX.reduce((a, [, w]) => a + w, 0);
function pickType() {
  let r = Math.random() * MIX_TOTAL;
  for (const [t, w] of MIX) { if ((r -= w) < 0) return t; }
  return MIX[0][0];
}

async function publishOne() {
  const type = pickType();
  const payload = {
    id: crypto.randomUUID(), type: type.split(".")[0], status: type.split(".")[1],
    amount: String((Math.random() * 5000).toFixed(2)), currency: "EUR", rail: "sepa_instant",
  };
  try {
    const r = await call(opts.internal, "POST", "/internal/v1/events",
      { auth: opts.token, body: { merchant_id: opts.merchant, type, payload } });
    bump("publish", r.status);
  } catch (err) {
    bump("publish", err.cause?.code ?? "error");
  }
}

// apiTraffic makes the merchant calls an integration would: list and read
// deliveries and events, now and then an unknown id (404), a redelivery and
// a test event (rate limited, so some 429).
async function apiTraffic(key, subs) {
  const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
  const r = Math.random();
  let res;
  if (r < 0.35) res = await call(opts.public, "GET", "/v1/webhook_deliveries?status=failed", { auth: key });
  else if (r < 0.55) res = await call(opts.public, "GET", "/v1/events", { auth: key });
  else if (r < 0.65) res = await call(opts.public, "GET", `/v1/webhook_subscriptions/${pick(subs)}`, { auth: key });
  else if (r < 0.72) res = await call(opts.public, "GET", `/v1/webhook_deliveries/${crypto.randomUUID()}`, { auth: key });
  else if (r < 0.80) res = await call(opts.public, "GET", "/v1/webhook_subscriptions", { auth: key });
  else if (r < 0.88) {
    const list = await call(opts.public, "GET", "/v1/webhook_deliveries?status=failed", { auth: key });
    const d = list.json?.data?.[0];
    res = d ? await call(opts.public, "POST", `/v1/webhook_deliveries/${d.id}/redeliver`, { auth: key, idem: crypto.randomUUID() }) : list;
  } else if (r < 0.95) {
    res = await call(opts.public, "POST", `/v1/webhook_subscriptions/${pick(subs)}/send_test_event`, { auth: key, idem: crypto.randomUUID() });
  } else res = await call(opts.public, "GET", "/v1/webhook_deliveries", { auth: "sandbox.wrong" });
  bump("api", res.status);
}

async function main() {
  const { servers, urls } = await startReceivers();
  const { key, subs } = await setup(urls);
  console.log(`loadgen: merchant ${opts.merchant}, ${subs.length} subscriptions, ${meanRate} events/s for ${duration / 1000}s`);
  const t0 = Date.now();
  startedAt = t0;
  const inflight = new Set();
  let nextReport = t0 + 30000;
  while (Date.now() - t0 < duration) {
    // A slow swell and a burst in the middle, so the graphs have a shape.
    const phase = (Date.now() - t0) / duration;
    const burst = phase > 0.55 && phase < 0.65 ? 2.5 : 1;
    const rate = meanRate * (0.6 + 0.4 * Math.sin(phase * Math.PI * 3) ** 2) * burst;
    const p = publishOne();
    inflight.add(p);
    p.finally(() => inflight.delete(p));
    if (Math.random() < 0.25) {
      const a = apiTraffic(key, subs).catch(() => bump("api", "error"));
      inflight.add(a);
      a.finally(() => inflight.delete(a));
    }
    // Bound the in-flight requests so a stalled engine is not flooded.
    if (inflight.size > 200) await Promise.race(inflight);
    await sleep(1000 / rate);
    if (Date.now() > nextReport) {
      console.log(`loadgen: ${Math.round((Date.now() - t0) / 1000)}s ${JSON.stringify(counts)}`);
      nextReport += 30000;
    }
  }
  await Promise.allSettled(inflight);
  if (opts.mark) fs.writeFileSync(opts.mark, `${Math.floor(Date.now() / 1000)}\n`);
  console.log(`loadgen: published; receivers stay up ${opts.drain}s for retries`);
  await sleep(Number(opts.drain) * 1000);
  console.log(`loadgen: done ${JSON.stringify(counts)}`);
  for (const s of servers) s.close();
  process.exit(0);
}

main().catch((err) => {
  console.error(`loadgen: ${err.message}`);
  process.exit(1);
});
