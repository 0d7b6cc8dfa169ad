// A small MCP server built on the TypeScript SDK's second generation
// (@modelcontextprotocol/server 2.4.0), serving both eras over stdio or Streamable HTTP.
//
//     node ts2_server.mjs stdio|http
//
// One factory defines the surface for both eras: tools echo, add, slow (progress; a cancel
// writes `CANCELLED slow <request id>` to stderr), book (an elicitation) and summarize (a
// sampling request), both written the v2 way, returning `inputRequired(...)`: a multi
// round-trip in the modern era, real server-to-client requests through the SDK's shim in the
// handshake era; the prompt greet; the resource ts2://info and the template ts2://greeting/{name}.
//
// stdio: `serveStdio`, which picks the era from the opening message. HTTP (node's `http`, on
// 127.0.0.1 at a free port, announced as `serving MCP at URL` on stderr): modern requests go to
// `createMcpHandler(factory, { legacy: "reject" })`; handshake-era traffic (`isLegacyRequest`)
// to a sessionful WebStandardStreamableHTTPServerTransport per session, so that the handshake
// era keeps its sessions and its server-to-client requests.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { Readable } from "node:stream";

import {
  McpServer,
  ResourceTemplate,
  WebStandardStreamableHTTPServerTransport,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  isLegacyRequest,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

const [kind] = process.argv.slice(2);
if (kind !== "stdio" && kind !== "http") {
  process.stderr.write("usage: node ts2_server.mjs stdio|http\n");
  process.exit(2);
}

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

function text(value) {
  return { content: [{ type: "text", text: value }] };
}

function factory() {
  const server = new McpServer({ name: "ts2-interop-server", version: "2.4.0" });

  server.registerTool(
    "echo",
    { description: "Return the text unchanged.", inputSchema: z.object({ text: z.string() }) },
    async ({ text: value }) => text(value),
  );

  server.registerTool(
    "add",
    { description: "Add two numbers.", inputSchema: z.object({ a: z.number(), b: z.number() }) },
    async ({ a, b }) => text(String(a + b)),
  );

  server.registerTool(
    "slow",
    {
      description: "Report progress `steps` times, 50 ms apart; record a cancellation on stderr.",
      inputSchema: z.object({ steps: z.number().int() }),
    },
    async ({ steps }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      try {
        for (let step = 1; step <= steps; step++) {
          if (token !== undefined) {
            await ctx.mcpReq.notify({
              method: "notifications/progress",
              params: { progressToken: token, progress: step, total: steps, message: `step ${step}` },
            });
          }
          await pause(50, ctx.mcpReq.signal);
        }
      } catch (error) {
        if (ctx.mcpReq.signal.aborted) {
          process.stderr.write(`CANCELLED slow ${ctx.mcpReq.id}\n`);
        }
        throw error;
      }
      return text(`done ${steps}`);
    },
  );

  const dates = z.object({ dates: z.string() });
  server.registerTool(
    "book",
    { description: "Book a trip: asks which dates.", inputSchema: z.object({ city: z.string() }) },
    async ({ city }, ctx) => {
      const answer = acceptedContent(ctx.mcpReq.inputResponses, "dates", dates);
      if (answer === undefined) {
        return inputRequired({
          inputRequests: {
            dates: inputRequired.elicit({ message: "Which dates?", requestedSchema: dates }),
          },
        });
      }
      return text(`${city}, ${answer.dates}`);
    },
  );

  server.registerTool(
    "summarize",
    { description: "Summarize with the client's model.", inputSchema: z.object({ text: z.string() }) },
    async ({ text: value }, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.summary;
      if (answer === undefined) {
        return inputRequired({
          inputRequests: {
            summary: inputRequired.createMessage({
              messages: [{ role: "user", content: { type: "text", text: `Summarize: ${value}` } }],
              maxTokens: 50,
            }),
          },
        });
      }
      return text(`summary: ${answer.content.text}`);
    },
  );

  server.registerPrompt(
    "greet",
    { description: "A greeting for someone.", argsSchema: z.object({ name: z.string() }) },
    ({ name }) => ({
      messages: [{ role: "user", content: { type: "text", text: `Please greet ${name}.` } }],
    }),
  );

  server.registerResource(
    "info",
    "ts2://info",
    { description: "About this server.", mimeType: "text/plain" },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "text/plain", text: "served by the TypeScript SDK v2" }],
    }),
  );

  server.registerResource(
    "greeting",
    new ResourceTemplate("ts2://greeting/{name}", { list: undefined }),
    { description: "A greeting by name.", mimeType: "text/plain" },
    async (uri, { name }) => ({
      contents: [{ uri: uri.href, mimeType: "text/plain", text: `Hello, ${name}!` }],
    }),
  );

  return server;
}

if (kind === "stdio") {
  serveStdio(factory);
} else {
  const modern = createMcpHandler(factory, { legacy: "reject" });
  // Handshake-era sessions: session id -> transport.
  const sessions = new Map();

  async function legacy(request) {
    const sessionId = request.headers.get("mcp-session-id");
    const known = sessionId === null ? undefined : sessions.get(sessionId);
    if (known !== undefined) {
      return known.handleRequest(request);
    }
    if (sessionId !== null) {
      return new Response(
        JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }),
        { status: 404, headers: { "content-type": "application/json" } },
      );
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
      onsessionclosed: (id) => sessions.delete(id),
    });
    await factory().connect(transport);
    return transport.handleRequest(request);
  }

  async function handle(req, res) {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD" && req.method !== "DELETE";
    const request = new Request(url, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([name, value]) =>
        Array.isArray(value) ? value.map((v) => [name, v]) : [[name, value]],
      ),
      body: hasBody ? Readable.toWeb(req) : undefined,
      duplex: "half",
    });
    const response = (await isLegacyRequest(request)) ? await legacy(request) : await modern.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body === null) {
      res.end();
      return;
    }
    const reader = response.body.getReader();
    // The client went away: cancel the body, which is how the SDK learns of a modern cancel.
    res.on("close", () => reader.cancel().catch(() => {}));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
      }
    } catch {
      // cancelled
    }
    res.end();
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
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => process.exit(0));
}
