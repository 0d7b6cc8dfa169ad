// A small MCP server built on the official TypeScript SDK, served over Streamable HTTP.
//
//     node ts_http_server.mjs
//
// The same tools, prompt and resources as ts_server.mjs, behind node's `http` module and the
// SDK's StreamableHTTPServerTransport, in stateful mode: one transport and one McpServer per
// session. The SDK's HTTP+SSE transport (SSEServerTransport, 2024-11-05) is served beside it:
// `GET /sse` opens a session, `POST /messages?sessionId=...` carries its messages. It listens on 127.0.0.1 at a free port and writes `serving MCP at URL` to stderr
// when ready. The `slow` tool reports progress and, when its request is cancelled, writes
// `CANCELLED slow <request id>` to stderr. test_http_interop.py drives it with trio_mcp's client.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
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

function buildServer() {
  const server = new McpServer({ name: "ts-interop-server", version: "1.0.0" });

  server.registerTool(
    "echo",
    { description: "Return the text unchanged.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );

  server.registerTool(
    "add",
    { description: "Add two numbers.", inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }),
  );

  server.registerTool(
    "slow",
    {
      description: "Report progress `steps` times, 50 ms apart; record a cancellation on stderr.",
      inputSchema: { steps: z.number().int() },
    },
    async ({ steps }, extra) => {
      const token = extra._meta?.progressToken;
      try {
        for (let step = 1; step <= steps; step++) {
          if (token !== undefined) {
            await extra.sendNotification({
              method: "notifications/progress",
              params: {
                progressToken: token,
                progress: step,
                total: steps,
                message: `step ${step}`,
              },
            });
          }
          await pause(50, extra.signal);
        }
      } catch (error) {
        if (extra.signal.aborted) {
          process.stderr.write(`CANCELLED slow ${extra.requestId}\n`);
        }
        throw error;
      }
      return { content: [{ type: "text", text: `done ${steps}` }] };
    },
  );

  server.registerPrompt(
    "greet",
    { description: "A greeting for someone.", argsSchema: { name: z.string() } },
    ({ name }) => ({
      messages: [{ role: "user", content: { type: "text", text: `Please greet ${name}.` } }],
    }),
  );

  server.registerResource(
    "info",
    "ts://info",
    { description: "About this server.", mimeType: "text/plain" },
    async (uri) => ({
      contents: [
        { uri: uri.href, mimeType: "text/plain", text: "served by the official TypeScript SDK" },
      ],
    }),
  );

  server.registerResource(
    "greeting",
    new ResourceTemplate("ts://greeting/{name}", { list: undefined }),
    { description: "A greeting by name.", mimeType: "text/plain" },
    async (uri, { name }) => ({
      contents: [{ uri: uri.href, mimeType: "text/plain", text: `Hello, ${name}!` }],
    }),
  );

  return server;
}

// Live sessions: session id -> transport.
const sessions = new Map();
// Live HTTP+SSE sessions: session id -> transport.
const sseSessions = new Map();

async function handleSse(req, res, url) {
  if (url.pathname === "/sse" && req.method === "GET") {
    const transport = new SSEServerTransport("/messages", res);
    sseSessions.set(transport.sessionId, transport);
    res.on("close", () => sseSessions.delete(transport.sessionId));
    await buildServer().connect(transport);
    return;
  }
  const transport = sseSessions.get(url.searchParams.get("sessionId") ?? "");
  if (transport === undefined) {
    res.writeHead(404).end("Session not found");
    return;
  }
  await transport.handlePostMessage(req, res);
}

async function handle(req, res) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  if (url.pathname === "/sse" || url.pathname === "/messages") {
    await handleSse(req, res, url);
    return;
  }
  if (url.pathname !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  const sessionId = req.headers["mcp-session-id"];
  const known = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
  if (known !== undefined) {
    await known.handleRequest(req, res);
    return;
  }
  if (sessionId !== undefined) {
    res.writeHead(404, { "content-type": "application/json" }).end(
      JSON.stringify({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32001, message: "Session not found" },
      }),
    );
    return;
  }
  // No session yet: a fresh transport answers, by the SDK's own rules (only `initialize`
  // opens a session; anything else is refused), and is dropped if no session came of it.
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => {
      sessions.set(id, transport);
    },
  });
  transport.onclose = () => {
    if (transport.sessionId !== undefined) {
      sessions.delete(transport.sessionId);
    }
  };
  await buildServer().connect(transport);
  await transport.handleRequest(req, res);
  if (transport.sessionId === undefined) {
    await transport.close();
  }
}

const httpServer = createServer((req, res) => {
  handle(req, res).catch((error) => {
    process.stderr.write(`request failed: ${error?.stack ?? error}\n`);
    if (!res.headersSent) {
      res.writeHead(500).end();
    }
  });
});

httpServer.listen(0, "127.0.0.1", () => {
  const { port } = httpServer.address();
  process.stderr.write(`serving MCP at http://127.0.0.1:${port}/mcp\n`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => process.exit(0));
}
