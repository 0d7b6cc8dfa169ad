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
//   With `transport`, the same workload over another transport, each connection its own
//   handshake-era session (`initialize`, `notifications/initialized`, then the calls):
//   "sse", the 2024-11-05 HTTP+SSE transport (a GET of `path` opens a stream whose first
//   event names the URL to POST to; each POST is answered 202 and its answer comes down the
//   stream; a call ends when both have come), and "ws", WebSocket (the subprotocol `mcp`, one
//   message per text frame; the client's framing is written here, on `node:net`: Node 20 has
//   no WebSocket client).
// - cancel {cancels, warmup_cancels, stamps}: a `sleep` call per cancel, cancelled at its first
//   progress event: in the handshake era by POSTing `notifications/cancelled` on a second
//   connection, in the modern era by closing the call's connection (the spec: closing the
//   response stream is the cancellation). The driver then waits for the server's stamp (the
//   stamps file grows) and times one echo. issued_ns / returned_ns are process.hrtime stamps
//   (CLOCK_MONOTONIC): the cancel's start, and its end (the 202, or the close).
//   With `post_rounds`, then that many bare POST round trips on the control connection, timed
//   one by one (`post_us`): a `notifications/cancelled` naming no call, as the cancel POST is
//   written, until its answer is read (the yardstick of the server-observed cancel latency,
//   on the floor).
// - load {calls, k}: `calls` echo calls from k connections at once, each its own handshake-era
//   session in that era, ended with DELETE after; nothing timed (the caller counts the
//   servers' CPU).
// - sessions {sessions, warmup, settle_ms, pids}: VmRSS of the server processes (`pids`), after
//   `warmup` sessions, then after `sessions` more handshakes left idle. With `signal_pid`, that
//   process gets SIGUSR1 at both moments (the profile's tracemalloc snapshots).
import crypto from "node:crypto";
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
    // The connection's own handshake-era session (the `load` workload); null: the driver's.
    this.session = null;
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

function bytesOf(message, extra = {}, session = sessionId) {
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
  } else if (session !== null) {
    headers["Mcp-Session-Id"] = session;
    headers["MCP-Protocol-Version"] = version;
  }
  let head = `POST ${path} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  return Buffer.concat([Buffer.from(head + "\r\n", "latin1"), body]);
}

const meta = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };

function callBytes(id, name, args, extraMeta, session = sessionId) {
  const params = { name, arguments: args };
  if (modern || extraMeta) params._meta = { ...(modern ? meta : {}), ...(extraMeta ?? {}) };
  const headers = modern ? { "Mcp-Method": "tools/call", "Mcp-Name": name } : {};
  return bytesOf({ jsonrpc: "2.0", id, method: "tools/call", params }, headers, session);
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

// Ends a handshake-era session with DELETE, as a client that is done does: a driver run leaves
// no session behind to count against the server's sessions per client, or to keep alive.
async function endSession(connection, session) {
  const head =
    `DELETE ${path} HTTP/1.1\r\nHost: 127.0.0.1:${spec.port}\r\nMcp-Session-Id: ${session}\r\n` +
    `MCP-Protocol-Version: ${version}\r\nContent-Length: 0\r\n\r\n`;
  const response = await connection.request(Buffer.from(head, "latin1"));
  if (response.status !== 200 && response.status !== 204) {
    throw new Error(`DELETE: HTTP ${response.status}: ${response.body.slice(0, 300)}`);
  }
}

let counter = 0;
async function echo(connection) {
  const id = nextId++;
  const text = `hello ${counter++}`;
  const request = callBytes(id, "echo", { text }, undefined, connection.session ?? sessionId);
  const reply = answer(await connection.request(request), id);
  if (reply.result?.content?.[0]?.text !== text) throw new Error(`bad echo: ${JSON.stringify(reply)}`);
}

async function timedCalls(connection, count, latencies, call = echo) {
  for (let i = 0; i < count; i++) {
    const start = now();
    await call(connection);
    latencies?.push(micros(start, now()));
  }
}

async function open(count) {
  const connections = Array.from({ length: count }, () => new Connection());
  await Promise.all(connections.map((c) => c.ready));
  return connections;
}

async function throughput(connections, call = echo) {
  const k = spec.k ?? 1;
  const warm = spec.warmup ?? 0;
  await timedCalls(connections[0], warm, null, call);
  await Promise.all(connections.map((c) => timedCalls(c, Math.ceil(warm / k), null, call)));
  const sequential = [];
  let start = now();
  if (spec.sequential !== false) await timedCalls(connections[0], spec.n, sequential, call);
  const seqElapsed = Number(now() - start) / 1e9;
  const concurrent = [];
  const cpu = process.cpuUsage(); // the driver's own CPU over the concurrent part
  start = now();
  await Promise.all(connections.map((c) => timedCalls(c, Math.ceil(spec.n / k), concurrent, call)));
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

// -- HTTP+SSE (2024-11-05) and WebSocket: a session per connection, one call at a time --------

// Settles the call waiting for `message.id`, if any; fails on an error answer.
function settle(waiting, message) {
  const call = waiting.get(message.id);
  if (call === undefined) return;
  waiting.delete(message.id);
  if (message.error) call.reject(new Error(`error answer: ${JSON.stringify(message.error)}`));
  else call.resolve(message);
}

function failAll(waiting, error) {
  for (const call of waiting.values()) call.reject(error);
  waiting.clear();
}

// One HTTP+SSE session: its GET stream on one connection, its POSTs on a keep-alive other.
class SseSession {
  constructor() {
    this.stream = new Connection();
    this.posts = new Connection();
    this.waiting = new Map();
    this.pending = "";
    this.failed = null;
  }

  async open() {
    await Promise.all([this.stream.ready, this.posts.ready]);
    const endpoint = new Promise((resolve, reject) => {
      this.announced = { resolve, reject };
    });
    const head = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${spec.port}\r\nAccept: text/event-stream\r\n\r\n`;
    // The stream never ends while the session lasts: its end (or an error status) fails it.
    this.stream.request(Buffer.from(head, "latin1"), (text) => this.feed(text)).then(
      (r) => this.fail(new Error(`GET ${path} ended: HTTP ${r.status} ${r.body.slice(0, 300)}`)),
      (error) => this.fail(error),
    );
    this.endpoint = await endpoint;
  }

  // The stream's text as it comes: whole events are dispatched, a partial one waits.
  feed(text) {
    this.pending += text;
    for (;;) {
      const end = /\r?\n\r?\n/.exec(this.pending);
      if (end === null) return;
      const block = this.pending.slice(0, end.index);
      this.pending = this.pending.slice(end.index + end[0].length);
      let event = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(":")) continue; // a comment: the server's keep-alive
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
      }
      if (!data.length) continue;
      if (event === "endpoint") {
        const url = new URL(data.join("\n"), `http://127.0.0.1:${spec.port}${path}`);
        this.announced.resolve(url.pathname + url.search);
      } else if (event === "message") {
        const parsed = JSON.parse(data.join("\n"));
        for (const message of Array.isArray(parsed) ? parsed : [parsed]) settle(this.waiting, message);
      }
    }
  }

  fail(error) {
    this.failed ??= error;
    this.announced?.reject(error);
    failAll(this.waiting, error);
  }

  // POSTs `message` (202 expected); resolves with the answer from the stream, for a request.
  async send(message) {
    if (this.failed) throw this.failed;
    const body = Buffer.from(JSON.stringify(message));
    const head =
      `POST ${this.endpoint} HTTP/1.1\r\nHost: 127.0.0.1:${spec.port}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const answer =
      message.id === undefined ? null : new Promise((resolve, reject) => this.waiting.set(message.id, { resolve, reject }));
    answer?.catch(() => {}); // awaited below, unless the POST fails first
    const response = await this.posts.request(Buffer.concat([Buffer.from(head, "latin1"), body]));
    if (response.status !== 202) throw new Error(`POST ${this.endpoint}: HTTP ${response.status} ${response.body.slice(0, 300)}`);
    return answer === null ? null : await answer;
  }

  close() {
    this.stream.close();
    this.posts.close();
  }
}

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"; // RFC 6455, section 1.3
const UTF8 = new TextDecoder("utf-8", { fatal: true }); // a text message must be valid UTF-8

// One WebSocket client connection (RFC 6455), written out: the opening handshake (checked:
// 101, the accept key, the subprotocol `mcp`, no extension), masked client frames, server frames
// parsed and checked (unmasked, no reserved bit, control frames whole and short), fragmented
// text messages joined, pings answered with pongs, a close answered with a close.
class WebSocketClient {
  constructor() {
    this.socket = net.connect({ port: spec.port, host: "127.0.0.1", noDelay: true });
    this.ready = new Promise((resolve, reject) => {
      this.socket.once("connect", resolve);
      this.socket.once("error", reject);
    });
    this.buffer = Buffer.alloc(0);
    this.upgraded = null; // {resolve, reject} until the 101
    this.open = false;
    this.fragments = null;
    this.waiting = new Map();
    this.failed = null;
    this.closing = false;
    this.socket.on("data", (chunk) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
      try {
        if (this.open) this.frames();
        else this.head();
      } catch (error) {
        this.fail(error);
        this.socket.destroy();
      }
    });
    this.socket.on("close", () => this.fail(new Error("the socket closed")));
    this.socket.on("error", () => {});
  }

  async handshake() {
    await this.ready;
    this.key = crypto.randomBytes(16).toString("base64");
    const upgraded = new Promise((resolve, reject) => {
      this.upgraded = { resolve, reject };
    });
    this.socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${spec.port}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: ${this.key}\r\nSec-WebSocket-Version: 13\r\n` +
        "Sec-WebSocket-Protocol: mcp\r\n\r\n",
      "latin1",
    );
    await upgraded;
  }

  head() {
    const end = this.buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const lines = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
    this.buffer = this.buffer.subarray(end + 4);
    const headers = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(lines[0].split(" ")[1]);
    const accept = crypto.createHash("sha1").update(this.key + WS_GUID).digest("base64");
    const wrong =
      status !== 101
        ? `HTTP ${status} (${this.buffer.toString("utf8").slice(0, 300)})`
        : headers.upgrade?.toLowerCase() !== "websocket"
          ? `Upgrade: ${headers.upgrade}`
          : !/\bupgrade\b/i.test(headers.connection ?? "")
            ? `Connection: ${headers.connection}`
            : headers["sec-websocket-accept"] !== accept
              ? `Sec-WebSocket-Accept: ${headers["sec-websocket-accept"]}, not ${accept}`
              : headers["sec-websocket-protocol"] !== "mcp"
                ? `Sec-WebSocket-Protocol: ${headers["sec-websocket-protocol"]}`
                : headers["sec-websocket-extensions"]
                  ? `an extension none asked for: ${headers["sec-websocket-extensions"]}`
                  : null;
    if (wrong !== null) throw new Error(`WebSocket handshake refused: ${wrong}`);
    this.open = true;
    this.upgraded.resolve();
    this.frames(); // what came with the 101
  }

  frames() {
    for (;;) {
      if (this.buffer.length < 2) return;
      const [b0, b1] = this.buffer;
      const fin = (b0 & 0x80) !== 0;
      const opcode = b0 & 0x0f;
      if (b0 & 0x70) throw new Error("a server frame with a reserved bit set");
      if (b1 & 0x80) throw new Error("a masked server frame");
      let length = b1 & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) return;
        const long = this.buffer.readBigUInt64BE(2);
        if (long > 2n ** 31n) throw new Error(`a server frame of ${long} bytes`);
        length = Number(long);
        offset = 10;
      }
      if (this.buffer.length < offset + length) return;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      if (opcode >= 0x8) {
        if (!fin || length > 125) throw new Error("a fragmented or long control frame");
        this.control(opcode, payload);
        continue;
      }
      if (opcode === 0x1) {
        if (this.fragments !== null) throw new Error("a text frame inside a fragmented message");
        this.fragments = [payload];
      } else if (opcode === 0x0) {
        if (this.fragments === null) throw new Error("a continuation frame outside a message");
        this.fragments.push(payload);
      } else {
        throw new Error(`a data frame of opcode ${opcode}: MCP is text`);
      }
      if (!fin) continue;
      const text = UTF8.decode(this.fragments.length === 1 ? this.fragments[0] : Buffer.concat(this.fragments));
      this.fragments = null;
      const parsed = JSON.parse(text);
      for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
        if (message.method === "ping" && message.id !== undefined) {
          this.frame(0x1, Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: {} })));
        } else {
          settle(this.waiting, message);
        }
      }
    }
  }

  control(opcode, payload) {
    if (opcode === 0x9) this.frame(0xa, payload); // ping: the same payload back
    else if (opcode === 0x8) {
      const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      if (!this.closing) this.frame(0x8, payload.subarray(0, 2)); // echo its code
      this.closing = true;
      this.fail(new Error(`closed by the server: ${code} ${payload.subarray(2).toString("utf8")}`));
      this.socket.end();
    } else if (opcode !== 0xa) throw new Error(`a control frame of opcode ${opcode}`);
  }

  // One whole frame, masked with a fresh key, as every client frame must be.
  frame(opcode, payload) {
    const size = payload.length < 126 ? 2 : payload.length < 65536 ? 4 : 10;
    const out = Buffer.allocUnsafe(size + 4 + payload.length);
    out[0] = 0x80 | opcode;
    if (size === 2) out[1] = 0x80 | payload.length;
    else if (size === 4) {
      out[1] = 0x80 | 126;
      out.writeUInt16BE(payload.length, 2);
    } else {
      out[1] = 0x80 | 127;
      out.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    const mask = crypto.randomBytes(4);
    mask.copy(out, size);
    for (let i = 0; i < payload.length; i++) out[size + 4 + i] = payload[i] ^ mask[i & 3];
    this.socket.write(out);
  }

  fail(error) {
    this.failed ??= error;
    this.upgraded?.reject(error);
    failAll(this.waiting, error);
  }

  // Sends `message` in a text frame; resolves with the answer, for a request.
  async send(message) {
    if (this.failed) throw this.failed;
    const answer =
      message.id === undefined ? null : new Promise((resolve, reject) => this.waiting.set(message.id, { resolve, reject }));
    this.frame(0x1, Buffer.from(JSON.stringify(message)));
    return answer === null ? null : await answer;
  }

  // A close frame (1000); the socket ends when the server's close comes back, or after 1 s.
  async close() {
    if (!this.failed) {
      this.closing = true;
      this.frame(0x8, Buffer.from([0x03, 0xe8]));
      const closed = new Promise((resolve) => this.socket.once("close", resolve));
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    }
    this.socket.destroy();
  }
}

// A handshake-era session on a connection of either kind: `initialize`, then the notification.
async function openSession(session) {
  const id = nextId++;
  const params = { protocolVersion: spec.transport === "sse" ? "2024-11-05" : version, capabilities: {} };
  params.clientInfo = { name: "http-driver", version: "0.0.0" };
  const reply = await session.send({ jsonrpc: "2.0", id, method: "initialize", params });
  if (!reply.result?.protocolVersion) throw new Error(`initialize failed: ${JSON.stringify(reply)}`);
  await session.send({ jsonrpc: "2.0", method: "notifications/initialized" });
}

async function echoOver(session) {
  const id = nextId++;
  const text = `hello ${counter++}`;
  const params = { name: "echo", arguments: { text } };
  const reply = await session.send({ jsonrpc: "2.0", id, method: "tools/call", params });
  if (reply.id !== id || reply.result?.content?.[0]?.text !== text) throw new Error(`bad echo: ${JSON.stringify(reply)}`);
}

async function openSessions(count) {
  const sessions = Array.from({ length: count }, () => (spec.transport === "sse" ? new SseSession() : new WebSocketClient()));
  await Promise.all(sessions.map((s) => (spec.transport === "sse" ? s.open() : s.handshake())));
  await Promise.all(sessions.map(openSession));
  return sessions;
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
if (spec.workload === "throughput" && spec.transport !== undefined) {
  if (spec.transport !== "sse" && spec.transport !== "ws") throw new Error(`unknown transport ${spec.transport}`);
  const sessions = await openSessions(spec.k ?? 1);
  out = await throughput(sessions, echoOver);
  await Promise.all(sessions.map((s) => s.close()));
} else if (spec.workload === "throughput") {
  const connections = await open(spec.k ?? 1);
  if (!modern) await handshake(connections[0]);
  out = await throughput(connections);
  connections.forEach((c) => c.close());
} else if (spec.workload === "load") {
  // `calls` echo calls in all from k connections at once, each connection its own
  // handshake-era session (so that a fleet's router spreads them, ended with DELETE once its
  // calls are made), every answer checked and nothing timed: the caller counts the servers'
  // CPU (benchmarks/fleet_cost.py).
  const connections = await open(spec.k ?? 1);
  if (!modern) for (const c of connections) c.session = await handshake(c);
  const k = connections.length;
  const share = (i) => Math.floor(spec.calls / k) + (i < spec.calls % k ? 1 : 0);
  await Promise.all(connections.map((c, i) => timedCalls(c, share(i), null)));
  if (!modern) await Promise.all(connections.map((c) => endSession(c, c.session)));
  connections.forEach((c) => c.close());
  out = { calls: spec.calls };
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
  if (spec.post_rounds) {
    out.post_us = [];
    const note = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "no-such-call", reason: "benchmark" } };
    for (let i = 0; i < spec.post_rounds; i++) {
      const start = now();
      const response = await control.request(bytesOf(note));
      if (response.status !== 202 && response.status !== 200) throw new Error(`bare POST: HTTP ${response.status}`);
      out.post_us.push(micros(start, now()));
    }
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
