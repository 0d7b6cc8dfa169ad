// The tools every TypeScript benchmark server registers (ts_server.mjs over stdio,
// ts_http_server.mjs over Streamable HTTP): `echo`, and `sleep` with progress every 100 ms when
// the caller sent a progress token (with none, one wait). A cancelled `sleep` appends a
// CLOCK_MONOTONIC timestamp in nanoseconds (process.hrtime.bigint()) to the stamps file
// (`stampsFd`, or none when null) from its `finally` clause.
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

export function registerBenchTools(server, stampsFd) {
  server.registerTool(
    "echo",
    { description: "Return the text unchanged.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  server.registerTool(
    "sleep",
    {
      description: "Sleep, reporting progress every 100 ms when asked to; cancellable at any moment.",
      inputSchema: { seconds: z.number().min(0).max(3600) },
    },
    async ({ seconds }, extra) => {
      const token = extra._meta?.progressToken;
      let finished = false;
      try {
        if (token === undefined) {
          await pause(seconds * 1000, extra.signal);
        } else {
          const deadline = performance.now() + seconds * 1000;
          const ticks = Math.max(1, Math.round(seconds * 10));
          for (let tick = 1; tick <= ticks; tick++) {
            const wake = Math.min(deadline, performance.now() + 100);
            await pause(Math.max(0, wake - performance.now()), extra.signal);
            const done = Math.min(tick / 10, seconds);
            await extra.sendNotification({
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
    },
  );
  return server;
}
