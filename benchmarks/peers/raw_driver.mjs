// A raw driver: newline-delimited JSON-RPC over the child's stdin/stdout, with no MCP library.
//
//     node raw_driver.mjs SPEC_JSON -- COMMAND [ARG ...]
//
// It drives the bare-Trio floor and the MCP servers with the same bytes: an `initialize`
// handshake, then `tools/call` requests, matched to their responses by id. The `throughput` and
// `cancel` workloads of ts_client.mjs, with the same output; a cancel is writing
// `notifications/cancelled` from the progress handler, and the call "returns" right after that
// write (there is no caller to unwind). Responses are decoded with JSON.parse and checked, as an
// SDK client would, but not validated against a schema.
import { spawn } from "node:child_process";
import process from "node:process";

const sep = process.argv.indexOf("--");
const spec = JSON.parse(process.argv[2]);
const [command, ...args] = process.argv.slice(sep + 1);

const now = () => process.hrtime.bigint();
const micros = (start, end) => Math.round(Number(end - start) / 100) / 10;

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const waiting = new Map();
const onProgress = new Map();
let buffered = "";
child.stdout.setEncoding("utf8");
child.stdout.on("data", (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf("\n")) >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    if (!line.trim()) continue;
    const message = JSON.parse(line);
    if (message.method === "notifications/progress") {
      onProgress.get(message.params?.progressToken)?.();
      continue;
    }
    const resolve = message.id === undefined ? undefined : waiting.get(message.id);
    if (resolve !== undefined) {
      waiting.delete(message.id);
      resolve(message);
    }
  }
});

let nextId = 1;
function request(method, params, id = nextId++) {
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  });
}

let counter = 0;
async function echo() {
  const text = `hello ${counter++}`;
  const reply = await request("tools/call", { name: "echo", arguments: { text } });
  if (reply.result?.content?.[0]?.text !== text) throw new Error(`bad echo: ${JSON.stringify(reply)}`);
}

async function timedCalls(count, latencies) {
  for (let i = 0; i < count; i++) {
    const start = now();
    await echo();
    latencies.push(micros(start, now()));
  }
}

const init = await request("initialize", {
  protocolVersion: "2025-06-18",
  capabilities: {},
  clientInfo: { name: "raw-driver", version: "0.0.0" },
});
if (!init.result) throw new Error(`initialize failed: ${JSON.stringify(init)}`);
child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");

async function throughput() {
  const sequential = [];
  let start = now();
  await timedCalls(spec.n, sequential);
  const seqElapsed = Number(now() - start) / 1e9;
  const concurrent = [];
  const per = Math.ceil(spec.n / spec.k);
  start = now();
  await Promise.all(Array.from({ length: spec.k }, () => timedCalls(per, concurrent)));
  const conElapsed = Number(now() - start) / 1e9;
  return {
    sequential: { elapsed: seqElapsed, latencies_us: sequential },
    concurrent: { elapsed: conElapsed, latencies_us: concurrent, k: spec.k },
  };
}

async function cancelOnce() {
  const id = nextId++;
  const token = `progress-${id}`;
  let issued = null;
  const cancelled = new Promise((resolve) => {
    onProgress.set(token, () => {
      if (issued !== null) return;
      issued = now();
      const params = { requestId: id, reason: "benchmark cancel" };
      child.stdin.write(
        JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params }) + "\n",
      );
      waiting.delete(id);
      resolve();
    });
  });
  void request("tools/call", { name: "sleep", arguments: { seconds: 60 }, _meta: { progressToken: token } }, id);
  await cancelled;
  const returned = now();
  onProgress.delete(token);
  const start = now();
  await echo();
  return { issued: String(issued), returned: String(returned), next_us: micros(start, now()) };
}

// Warm up both paths: sequential calls, then as many spread over k concurrent callers.
const warm = spec.warmup ?? 0;
await timedCalls(warm, []);
await Promise.all(Array.from({ length: spec.k ?? 1 }, () => timedCalls(Math.ceil(warm / (spec.k ?? 1)), [])));
let out;
if (spec.workload === "throughput") {
  out = await throughput();
} else if (spec.workload === "cancel") {
  out = { issued_ns: [], returned_ns: [], next_us: [] };
  for (let i = 0; i < (spec.warmup_cancels ?? 0); i++) await cancelOnce();
  for (let i = 0; i < spec.cancels; i++) {
    const one = await cancelOnce();
    out.issued_ns.push(one.issued);
    out.returned_ns.push(one.returned);
    out.next_us.push(one.next_us);
  }
} else {
  throw new Error(`unknown workload ${spec.workload}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
child.stdin.end();
const exited = new Promise((resolve) => child.once("exit", resolve));
const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
await exited;
clearTimeout(timer);
