// Benchmark driver built on the official TypeScript SDK's client.
//
//     node ts_client.mjs SPEC_JSON -- COMMAND [ARG ...]
//
// Spawns the server COMMAND over stdio, runs the workload SPEC_JSON names and prints one JSON
// object with raw measurements (run.py turns them into statistics). Workloads:
//   throughput {n, k, warmup}: n sequential `echo` calls, then k callers doing n/k calls each.
//   cancel {cancels, warmup, warmup_cancels}: call `sleep` with progress; on the first progress,
//     abort it; then one `echo` call. Records CLOCK_MONOTONIC stamps (process.hrtime, ns) of each
//     cancel issued and each call returned, and the latency of the echo that follows. The first
//     `warmup_cancels` rounds are not recorded (the server still stamps them).
//   scale {n, k, warmup, parked, settle_ms}: the server's VmRSS (from /proc) before `parked`
//     concurrent `sleep` calls and `settle_ms` after the last one was dispatched; then throughput
//     with them in flight, and idle after cancelling them all; twice.
import fs from "node:fs";
import process from "node:process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const sep = process.argv.indexOf("--");
const spec = JSON.parse(process.argv[2]);
const [command, ...args] = process.argv.slice(sep + 1);

const now = () => process.hrtime.bigint();
const micros = (start, end) => Math.round(Number(end - start) / 100) / 10;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const LONG = { timeout: 7_200_000 };

function rssKiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "ts-bench-client", version: "0.0.0" });
await client.connect(transport);

let counter = 0;
async function echo() {
  const text = `hello ${counter++}`;
  const result = await client.callTool({ name: "echo", arguments: { text } }, undefined, LONG);
  if (result.content[0].text !== text) throw new Error(`bad echo: ${JSON.stringify(result)}`);
}

async function timedCalls(count, latencies) {
  for (let i = 0; i < count; i++) {
    const start = now();
    await echo();
    latencies.push(micros(start, now()));
  }
}

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
  const controller = new AbortController();
  let issued = null;
  try {
    await client.callTool({ name: "sleep", arguments: { seconds: 60 } }, undefined, {
      ...LONG,
      signal: controller.signal,
      onprogress: () => {
        if (issued === null) {
          issued = now();
          controller.abort("benchmark cancel");
        }
      },
    });
    throw new Error("the cancelled call returned a result");
  } catch (error) {
    if (issued === null) throw error;
  }
  const returned = now();
  const start = now();
  await echo();
  const next = micros(start, now());
  return { issued: String(issued), returned: String(returned), next_us: next };
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
} else if (spec.workload === "scale") {
  const pid = transport.pid;
  let parked = [];
  const park = async () => {
    const controllers = [];
    for (let i = 0; i < spec.parked; i++) {
      const controller = new AbortController();
      controllers.push(controller);
      const options = { ...LONG, signal: controller.signal };
      const call = client.callTool({ name: "sleep", arguments: { seconds: 3600 } }, undefined, options);
      parked.push(call.catch(() => {}));
    }
    // The server answers in order of reading: once this echo is back, every sleep was dispatched.
    await echo();
    return controllers;
  };
  const unpark = async (controllers) => {
    for (const controller of controllers) controller.abort("benchmark done");
    await Promise.all(parked);
    parked = [];
    await echo();
    await pause(200);
  };
  await pause(200);
  const rssBefore = rssKiB(pid);
  let controllers = await park();
  await pause(spec.settle_ms ?? 500);
  const rssAfter = rssKiB(pid);
  // Loaded and idle alternate (L I L I), so drift over the run cannot pass for a loss.
  const loaded = [await throughput()];
  await unpark(controllers);
  const idle = [await throughput()];
  controllers = await park();
  loaded.push(await throughput());
  await unpark(controllers);
  idle.push(await throughput());
  out = { idle, loaded, rss_before_kib: rssBefore, rss_after_kib: rssAfter, parked: spec.parked };
} else {
  throw new Error(`unknown workload ${spec.workload}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
process.exit(0);
