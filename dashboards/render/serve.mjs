// serve.mjs serves the render page and proxies Prometheus' HTTP API under
// the same origin, so the page can query Prometheus without CORS.
//
//   node serve.mjs [--port 8099] [--prometheus http://127.0.0.1:9099]
//                  [--dashboard ../webhookd.json]
//
// Routes: /dashboard.json (the dashboard under render), /api/v1/* (proxied
// to Prometheus), /uplot/* (the vendored chart library from node_modules),
// and the files of this folder. It listens on loopback only: it is a
// build tool, not a service.
import http from "node:http";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));

const { values: opts } = parseArgs({
  options: {
    port: { type: "string", default: "8099" },
    prometheus: { type: "string", default: "http://127.0.0.1:9099" },
    dashboard: { type: "string", default: path.join(here, "..", "webhookd.json") },
  },
});

const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
};

// files maps the URL paths the page asks for to files on disk; nothing else
// on disk is reachable, so a stray path can never read outside this folder.
const files = {
  "/": path.join(here, "index.html"),
  "/index.html": path.join(here, "index.html"),
  "/dashboard.js": path.join(here, "dashboard.js"),
  "/dashboard.json": path.resolve(opts.dashboard),
  "/uplot/uPlot.iife.min.js": path.join(here, "node_modules", "uplot", "dist", "uPlot.iife.min.js"),
  "/uplot/uPlot.min.css": path.join(here, "node_modules", "uplot", "dist", "uPlot.min.css"),
};

async function proxy(req, res) {
  const target = new URL(req.url, opts.prometheus);
  try {
    const upstream = await fetch(target, { method: req.method === "POST" ? "POST" : "GET" });
    res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
    res.end(Buffer.from(await upstream.arrayBuffer()));
  } catch (err) {
    res.writeHead(502, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "error", error: `prometheus at ${opts.prometheus}: ${err.message}` }));
  }
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  if (url.pathname.startsWith("/api/v1/")) {
    return proxy(req, res);
  }
  const file = files[url.pathname];
  if (!file) {
    res.writeHead(404).end("not found\n");
    return;
  }
  try {
    const body = await fs.readFile(file);
    res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
    res.end(body);
  } catch (err) {
    res.writeHead(500).end(`read ${file}: ${err.message}\n`);
  }
});

server.listen(Number(opts.port), "127.0.0.1", () => {
  console.log(`render page on http://127.0.0.1:${opts.port}/ (prometheus ${opts.prometheus})`);
});
