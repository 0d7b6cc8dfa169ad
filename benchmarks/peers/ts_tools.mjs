// The tools every TypeScript benchmark server registers (ts_server.mjs over stdio,
// ts_http_server.mjs over Streamable HTTP; ts2_server.mjs and ts2_http_server.mjs, on the SDK's
// second generation, through registerBenchToolsV2): `echo`, and `sleep` with progress every
// 100 ms when the caller sent a progress token (with none, one wait). A cancelled `sleep` appends
// a CLOCK_MONOTONIC timestamp in nanoseconds (process.hrtime.bigint()) to the stamps file
// (`stampsFd`, or none when null) from its `finally` clause. The two generations differ only in
// how a handler is written (v2: a `z.object` schema, the request's context under `ctx.mcpReq`);
// the tools' bodies are shared.
import fs from "node:fs";
import process from "node:process";
import * as z from "zod";

// Resolves after `ms`, or rejects as soon as `signal` is aborted.
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

const ECHO = { description: "Return the text unchanged." };
const SLEEP = {
  description: "Sleep, reporting progress every 100 ms when asked to; cancellable at any moment.",
};
const echoResult = (text) => ({ content: [{ type: "text", text }] });

// The `sleep` tool's body: `notify(notification)` sends a progress notification.
async function sleepFor(seconds, token, signal, notify, stampsFd) {
  let finished = false;
  try {
    if (token === undefined) {
      await pause(seconds * 1000, signal);
    } else {
      const deadline = performance.now() + seconds * 1000;
      const ticks = Math.max(1, Math.round(seconds * 10));
      for (let tick = 1; tick <= ticks; tick++) {
        const wake = Math.min(deadline, performance.now() + 100);
        await pause(Math.max(0, wake - performance.now()), signal);
        const done = Math.min(tick / 10, seconds);
        await notify({
          method: "notifications/progress",
          params: { progressToken: token, progress: done, total: seconds, message: "sleeping" },
        });
      }
    }
    finished = true;
  } finally {
    if (!finished && stampsFd !== null) {
      fs.writeSync(stampsFd, `${process.hrtime.bigint()}\n`);
    }
  }
  return { content: [{ type: "text", text: `slept ${seconds}s` }] };
}

// The SDK 1.x (`@modelcontextprotocol/sdk`): raw-shape schemas, the request's `extra`.
export function registerBenchTools(server, stampsFd) {
  server.registerTool("echo", { ...ECHO, inputSchema: { text: z.string() } }, async ({ text }) =>
    echoResult(text),
  );
  server.registerTool(
    "sleep",
    { ...SLEEP, inputSchema: { seconds: z.number().min(0).max(3600) } },
    async ({ seconds }, extra) =>
      sleepFor(seconds, extra._meta?.progressToken, extra.signal, (n) => extra.sendNotification(n), stampsFd),
  );
  return server;
}

// The v2 server package (`@modelcontextprotocol/server`): `z.object` schemas, `ctx.mcpReq`.
export function registerBenchToolsV2(server, stampsFd) {
  server.registerTool(
    "echo",
    { ...ECHO, inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => echoResult(text),
  );
  server.registerTool(
    "sleep",
    { ...SLEEP, inputSchema: z.object({ seconds: z.number().min(0).max(3600) }) },
    async ({ seconds }, ctx) =>
      sleepFor(seconds, ctx.mcpReq._meta?.progressToken, ctx.mcpReq.signal, (n) => ctx.mcpReq.notify(n), stampsFd),
  );
  return server;
}
