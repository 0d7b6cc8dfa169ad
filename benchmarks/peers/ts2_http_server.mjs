// The benchmark server built on the TypeScript SDK's v2 server package
// (`@modelcontextprotocol/server`), served over Streamable HTTP in both eras.
//
//     node ts2_http_server.mjs --port PORT [--json] [--stamps PATH]
//
// The tools of ts_tools.mjs, registered the v2 way, on Node's `http` module. The package serves
// web-standard Requests; this file turns each Node request into one, as a Node user without a
// framework does: the body is read and parsed once here and handed on as `parsedBody`, so the
// SDK neither reads nor parses it again. Routing follows the package's own pattern:
// `isLegacyRequest` sends handshake-era traffic to a sessionful
// WebStandardStreamableHTTPServerTransport per `initialize` (found again by its
// Mcp-Session-Id), and modern-era (2026-07-28) requests to `createMcpHandler(factory,
// { legacy: "reject" })`. `--json`: `enableJsonResponse` in the handshake era and
// `responseMode: "json"` in the modern one; otherwise every answer is an SSE stream
// (`responseMode: "sse"`). The client closing a modern call's connection cancels the response
// body, which is how the SDK learns of the cancel.
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import process from "node:process";
import {
  McpServer,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  isLegacyRequest,
} from "@modelcontextprotocol/server";
import { registerBenchToolsV2 } from "./ts_tools.mjs";

const argument = (name) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const port = Number(argument("--port"));
const json = process.argv.includes("--json");
const stamps = argument("--stamps");
const stampsFd = stamps ? fs.openSync(stamps, "a") : null;

const factory = () =>
  registerBenchToolsV2(new McpServer({ name: "ts2-sdk-bench", version: "2.0.0" }), stampsFd);
const modern = createMcpHandler(factory, { legacy: "reject", responseMode: json ? "json" : "sse" });
// Handshake-era sessions: session id -> transport.
const sessions = new Map();

async function legacy(request, body) {
  const sessionId = request.headers.get("mcp-session-id");
  const known = sessionId === null ? undefined : sessions.get(sessionId);
  if (known !== undefined) return known.handleRequest(request, { parsedBody: body });
  if (sessionId !== null) return new Response(null, { status: 404 });
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: json,
    onsessioninitialized: (id) => sessions.set(id, transport),
    onsessionclosed: (id) => sessions.delete(id),
  });
  await factory().connect(transport);
  return transport.handleRequest(request, { parsedBody: body });
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

async function handle(req, res) {
  const body = req.method === "POST" ? await readBody(req) : undefined;
  const headers = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
  const request = new Request(`http://127.0.0.1:${port}${req.url}`, { method: req.method, headers });
  const response = (await isLegacyRequest(request, body))
    ? await legacy(request, body)
    : await modern.fetch(request, { parsedBody: body });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.on("close", () => reader.cancel().catch(() => {}));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // cancelled: the client went away
  }
  res.end();
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((error) => {
    if (!res.headersSent) res.writeHead(500).end(String(error));
  });
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(port, "127.0.0.1");
