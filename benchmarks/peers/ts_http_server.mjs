// The benchmark server built on the official TypeScript SDK, served over Streamable HTTP.
//
//     node ts_http_server.mjs --port PORT [--json] [--stamps PATH]
//
// The tools of ts_tools.mjs (`echo`, and `sleep` with progress every 100 ms when the caller sent
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
import { registerBenchTools } from "./ts_tools.mjs";

const argument = (name) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const port = Number(argument("--port"));
const json = process.argv.includes("--json");
const stamps = argument("--stamps");
const stampsFd = stamps ? fs.openSync(stamps, "a") : null;

function build() {
  return registerBenchTools(new McpServer({ name: "ts-sdk-bench", version: "1.0.0" }), stampsFd);
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
