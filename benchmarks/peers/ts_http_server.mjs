// The benchmark server built on the official TypeScript SDK, served over Streamable HTTP.
//
//     node ts_http_server.mjs --port PORT [--json] [--stamps PATH]
//
// The tools of ts_server.mjs (`echo`, and `sleep` with progress every 100 ms when the caller sent
// a progress token; a cancelled `sleep` appends a CLOCK_MONOTONIC timestamp in nanoseconds to the
// stamps file from its `finally`), behind the SDK's StreamableHTTPServerTransport on Node's
// `http` module, as the SDK's examples run it: a stateful session per `initialize` (a transport
// and an McpServer each), found again by its Mcp-Session-Id. `--json` sets `enableJsonResponse`
// (one JSON body per POST instead of an SSE stream). The SDK speaks the handshake era only.
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import process from "node:process";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";

const argument = (name) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const port = Number(argument("--port"));
const json = process.argv.includes("--json");
const stamps = argument("--stamps");
const stampsFd = stamps ? fs.openSync(stamps, "a") : null;

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

function build() {
  const server = new McpServer({ name: "ts-sdk-bench", version: "1.0.0" });
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

const transports = new Map();

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

const httpServer = http.createServer(async (req, res) => {
  try {
    const body = req.method === "POST" ? await readBody(req) : undefined;
    const sessionId = req.headers["mcp-session-id"];
    let transport = sessionId === undefined ? undefined : transports.get(sessionId);
    if (transport === undefined) {
      if (sessionId !== undefined || req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(sessionId === undefined ? 400 : 404).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: json,
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transports.delete(transport.sessionId);
      await build().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (error) {
    if (!res.headersSent) res.writeHead(500).end(String(error));
  }
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(port, "127.0.0.1");
