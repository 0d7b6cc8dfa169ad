// A load generator for a Streamable HTTP endpoint, modern era (2026-07-28): `tools/call echo`
// POSTs with the `_meta` envelope and the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers,
// each with a fresh id, from CONCURRENCY loops over keep-alive connections (Node's fetch).
//
//     node http_load.mjs SPEC_JSON     spec: {"url", "n", "warmup", "concurrency"}
//
// Every response is checked (status 200, the echoed text back); prints one JSON object: the
// elapsed seconds and per-call latencies (µs) of the n measured calls, and how many were bad.
import process from "node:process";

const spec = JSON.parse(process.argv[2]);
const now = () => process.hrtime.bigint();
const micros = (start, end) => Math.round(Number(end - start) / 100) / 10;
const headers = {
  accept: "application/json, text/event-stream",
  "content-type": "application/json",
  "mcp-protocol-version": "2026-07-28",
  "mcp-method": "tools/call",
  "mcp-name": "echo",
};
const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
};

let nextId = 0;
let bad = 0;
let badExample = null;

async function call() {
  const id = ++nextId;
  const text = `m${id}`;
  const body = { jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { text }, _meta: meta } };
  const response = await fetch(spec.url, { method: "POST", headers, body: JSON.stringify(body) });
  const reply = await response.text();
  let ok = response.status === 200;
  if (ok) {
    const message = JSON.parse(reply);
    ok = message.id === id && message.result?.content?.[0]?.text === text;
  }
  if (!ok) {
    bad++;
    badExample ??= `${response.status}: ${reply.slice(0, 300)}`;
  }
}

async function run(total, latencies) {
  let left = total;
  async function loop() {
    while (left > 0) {
      left--;
      const start = now();
      await call();
      if (latencies) latencies.push(micros(start, now()));
    }
  }
  await Promise.all(Array.from({ length: spec.concurrency }, loop));
}

await run(spec.warmup, null);
bad = 0;
const latencies = [];
const began = now();
await run(spec.n, latencies);
const elapsed = Number(now() - began) / 1e9;
process.stdout.write(JSON.stringify({ elapsed, latencies_us: latencies, bad, bad_example: badExample }) + "\n");
