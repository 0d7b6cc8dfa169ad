// A raw Streamable HTTP driver: hand-built HTTP/1.1 requests on keep-alive `node:net` sockets,
// no HTTP or MCP library, so every server gets the same bytes.
//
//     node http_driver.mjs SPEC_JSON
//
// spec: {"port", "path", "era": "handshake" | "modern", "workload", ...}. Responses are parsed
// here (Content-Length or chunked bodies; a JSON body or an SSE stream, whichever the server
// chose) and every answer is checked: the status, the id, the echoed text.
//
// - Handshake era: `initialize` and `notifications/initialized` once, then every call carries
//   the Mcp-Session-Id and MCP-Protocol-Version headers. Modern era (2026-07-28): no handshake;
//   every `tools/call` has the `_meta` envelope and the MCP-Protocol-Version, Mcp-Method and
//   Mcp-Name headers.
// - throughput {n, k, warmup}: `tools/call echo` with fresh ids, n calls on one connection
//   ("sequential"), then n spread over k connections, one call at a time on each ("concurrent");
//   the same output as raw_driver.mjs, and the driver's own CPU (`cpu_us`) over the concurrent
//   part, to set beside wrk's.
// - cancel {cancels, warmup_cancels, stamps}: a `sleep` call per cancel, cancelled at its first
//   progress event: in the handshake era by POSTing `notifications/cancelled` on a second
//   connection, in the modern era by closing the call's connection (the spec: closing the
//   response stream is the cancellation). The driver then waits for the server's stamp (the
//   stamps file grows) and times one echo. issued_ns / returned_ns are process.hrtime stamps
//   (CLOCK_MONOTONIC): the cancel's start, and its end (the 202, or the close).
// - sessions {sessions, warmup, settle_ms, pids}: VmRSS of the server processes (`pids`), after
//   `warmup` sessions, then after `sessions` more handshakes left idle. With `signal_pid`, that
//   process gets SIGUSR1 at both moments (the profile's tracemalloc snapshots).
import fs from "node:fs";
import net from "node:net";
import process from "node:process";

const spec = JSON.parse(process.argv[2]);
const path = spec.path ?? "/mcp";
const modern = spec.era === "modern";
const MODERN = "2026-07-28";
const now = () => process.hrtime.bigint();
const micros = (start, end) => Math.round(Number(end - start) / 100) / 10;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Connections the driver had to open again because the server ended one (`Connection: close`,
// as hypercorn does after `keep_alive_max_requests`, 1000 by default), as any client would.
let reconnects = 0;

// One keep-alive HTTP/1.1 connection, one request at a time.
class Connection {
  constructor() {
    this.open();
  }

  open() {
    const socket = net.connect({ port: spec.port, host: "127.0.0.1", noDelay: true });
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    this.current = null;
    this.closed = false;
    this.closing = false;
    this.ready = new Promise((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    socket.on("data", (chunk) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
      this.parse();
    });
    socket.on("close", () => {
      if (socket !== this.socket) return;
      this.closed = true;
      this.current?.reject(new Error("connection closed mid-response"));
    });
    socket.on("error", () => {});
    return this.ready;
  }

  // Sends `bytes`; resolves with {status, headers, body}. `onData(text)` sees the body as it comes.
  async request(bytes, onData) {
    if (this.closed || this.closing) {
      this.socket.destroy();
      reconnects++;
      await this.open();
    }
    return new Promise((resolve, reject) => {
      this.current = { resolve, reject, onData, head: null, length: null, chunked: false, parts: [] };
      this.socket.write(bytes);
    });
  }

  parse() {
    const r = this.current;
    if (r === null) return;
    if (r.head === null) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const lines = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
      this.buffer = this.buffer.subarray(end + 4);
      const headers = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      r.head = { status: Number(lines[0].split(" ")[1]), headers };
      if (headers.connection?.toLowerCase() === "close") this.closing = true;
      if (headers["transfer-encoding"]?.toLowerCase().includes("chunked")) r.chunked = true;
      else r.length = Number(headers["content-length"] ?? 0);
    }
    const take = (bytes) => {
      const text = bytes.toString("utf8");
      r.parts.push(text);
      r.onData?.(text);
    };
    if (!r.chunked) {
      if (this.buffer.length < r.length) return;
      take(this.buffer.subarray(0, r.length));
      this.buffer = this.buffer.subarray(r.length);
      return this.finish();
    }
    for (;;) {
      const eol = this.buffer.indexOf("\r\n");
      if (eol < 0) return;
      const size = parseInt(this.buffer.subarray(0, eol).toString("latin1"), 16);
      if (this.buffer.length < eol + 2 + size + 2) return;
      const data = this.buffer.subarray(eol + 2, eol + 2 + size);
      this.buffer = this.buffer.subarray(eol + 2 + size + 2);
      if (size === 0) return this.finish();
      take(data);
    }
  }

  finish() {
    const r = this.current;
    this.current = null;
    r.resolve({ ...r.head, body: r.parts.join("") });
  }

  close() {
    this.socket.destroy();
  }
}

// The JSON-RPC messages of a response body: one JSON value, or the `data` of each SSE event.
function messages(response) {
  const type = response.headers["content-type"] ?? "";
  if (!type.startsWith("text/event-stream")) return response.body ? [JSON.parse(response.body)] : [];
  const out = [];
  for (const event of response.body.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""));
    if (data.length && data.join("")) out.push(JSON.parse(data.join("\n")));
  }
  return out;
}

let sessionId = null;
let version = "2025-06-18";
let nextId = 1;

function bytesOf(message, extra = {}) {
  const body = Buffer.from(JSON.stringify(message));
  const headers = {
    Host: `127.0.0.1:${spec.port}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "Content-Length": body.length,
    ...extra,
  };
  if (modern) {
    headers["MCP-Protocol-Version"] = MODERN;
  } else if (sessionId !== null) {
    headers["Mcp-Session-Id"] = sessionId;
    headers["MCP-Protocol-Version"] = version;
  }
  let head = `POST ${path} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  return Buffer.concat([Buffer.from(head + "\r\n", "latin1"), body]);
}

const meta = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };

function callBytes(id, name, args, extraMeta) {
  const params = { name, arguments: args };
  if (modern || extraMeta) params._meta = { ...(modern ? meta : {}), ...(extraMeta ?? {}) };
  const headers = modern ? { "Mcp-Method": "tools/call", "Mcp-Name": name } : {};
  return bytesOf({ jsonrpc: "2.0", id, method: "tools/call", params }, headers);
}

// The answer to request `id` in a response, or an error saying what came instead.
function answer(response, id) {
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${response.body.slice(0, 300)}`);
  const reply = messages(response).find((m) => m.id === id);
  if (reply === undefined) throw new Error(`no answer to ${id}: ${response.body.slice(0, 300)}`);
  return reply;
}

async function handshake(connection) {
  const id = nextId++;
  const init = {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "http-driver", version: "0.0.0" } },
  };
  const saved = sessionId;
  sessionId = null;
  const response = await connection.request(bytesOf(init));
  const reply = answer(response, id);
  if (!reply.result) throw new Error(`initialize failed: ${response.body.slice(0, 300)}`);
  sessionId = response.headers["mcp-session-id"] ?? null;
  version = reply.result.protocolVersion;
  const done = await connection.request(bytesOf({ jsonrpc: "2.0", method: "notifications/initialized" }));
  if (done.status !== 202 && done.status !== 200) throw new Error(`initialized: HTTP ${done.status}`);
  const opened = sessionId;
  if (saved !== null) sessionId = saved;
  return opened;
}

let counter = 0;
async function echo(connection) {
  const id = nextId++;
  const text = `hello ${counter++}`;
  const reply = answer(await connection.request(callBytes(id, "echo", { text })), id);
  if (reply.result?.content?.[0]?.text !== text) throw new Error(`bad echo: ${JSON.stringify(reply)}`);
}

async function timedCalls(connection, count, latencies) {
  for (let i = 0; i < count; i++) {
    const start = now();
    await echo(connection);
    latencies?.push(micros(start, now()));
  }
}

async function open(count) {
  const connections = Array.from({ length: count }, () => new Connection());
  await Promise.all(connections.map((c) => c.ready));
  return connections;
}

async function throughput(connections) {
  const k = spec.k ?? 1;
  const warm = spec.warmup ?? 0;
  await timedCalls(connections[0], warm, null);
  await Promise.all(connections.map((c) => timedCalls(c, Math.ceil(warm / k), null)));
  const sequential = [];
  let start = now();
  if (spec.sequential !== false) await timedCalls(connections[0], spec.n, sequential);
  const seqElapsed = Number(now() - start) / 1e9;
  const concurrent = [];
  const cpu = process.cpuUsage(); // the driver's own CPU over the concurrent part
  start = now();
  await Promise.all(connections.map((c) => timedCalls(c, Math.ceil(spec.n / k), concurrent)));
  const conElapsed = Number(now() - start) / 1e9;
  const { user, system } = process.cpuUsage(cpu);
  return {
    sequential: { elapsed: seqElapsed, latencies_us: sequential },
    concurrent: { elapsed: conElapsed, latencies_us: concurrent, k, cpu_us: user + system },
  };
}

const stampCount = () => fs.readFileSync(spec.stamps, "utf8").split("\n").filter((l) => l.trim()).length;

async function cancelOnce(control) {
  const before = stampCount();
  const id = nextId++;
  const token = `progress-${id}`;
  const call = new Connection();
  await call.ready;
  let issued = null;
  let returned = null;
  let cancelled;
  const done = new Promise((resolve, reject) => {
    cancelled = { resolve, reject };
  });
  let seen = "";
  const onData = (text) => {
    seen += text;
    if (issued !== null || !seen.includes("notifications/progress")) return;
    issued = now();
    if (modern) {
      call.close();
      returned = now();
      cancelled.resolve();
      return;
    }
    const note = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "benchmark cancel" } };
    control.request(bytesOf(note)).then((response) => {
      returned = now();
      if (response.status !== 202 && response.status !== 200) cancelled.reject(new Error(`cancel: HTTP ${response.status}`));
      else cancelled.resolve();
    }, cancelled.reject);
  };
  const pending = call.request(callBytes(id, "sleep", { seconds: 60 }, { progressToken: token }), onData);
  pending.catch(() => {}); // the connection is closed under it, in the modern era
  await done;
  const deadline = Date.now() + 10_000;
  while (stampCount() <= before) {
    if (Date.now() > deadline) throw new Error("the server never stamped the cancellation");
    await sleep(1);
  }
  call.close();
  const start = now();
  await echo(control);
  return { issued: String(issued), returned: String(returned), next_us: micros(start, now()) };
}

function rssKib() {
  let total = 0;
  for (const pid of spec.pids) {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    total += Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  }
  return total;
}

let out;
if (spec.workload === "throughput") {
  const connections = await open(spec.k ?? 1);
  if (!modern) await handshake(connections[0]);
  out = await throughput(connections);
  connections.forEach((c) => c.close());
} else if (spec.workload === "cancel") {
  const [control] = await open(1);
  if (!modern) await handshake(control);
  await timedCalls(control, spec.warmup ?? 0, null);
  out = { issued_ns: [], returned_ns: [], next_us: [] };
  for (let i = 0; i < (spec.warmup_cancels ?? 0); i++) await cancelOnce(control);
  for (let i = 0; i < spec.cancels; i++) {
    const one = await cancelOnce(control);
    out.issued_ns.push(one.issued);
    out.returned_ns.push(one.returned);
    out.next_us.push(one.next_us);
  }
  control.close();
} else if (spec.workload === "sessions") {
  const [connection] = await open(1);
  for (let i = 0; i < (spec.warmup ?? 0); i++) await handshake(connection);
  await sleep(spec.settle_ms ?? 0);
  const mark = async () => {
    if (spec.signal_pid === undefined) return;
    process.kill(spec.signal_pid, "SIGUSR1");
    await sleep(Math.max(500, spec.settle_ms ?? 0));
  };
  await mark();
  const before = rssKib();
  for (let i = 0; i < spec.sessions; i++) await handshake(connection);
  await sleep(spec.settle_ms ?? 0);
  const after = rssKib();
  await mark();
  out = { sessions: spec.sessions, rss_before_kib: before, rss_after_kib: after };
  connection.close();
} else {
  throw new Error(`unknown workload ${spec.workload}`);
}
out.reconnects = reconnects;
process.stdout.write(JSON.stringify(out) + "\n");
