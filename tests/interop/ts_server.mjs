// A small MCP server built on the official TypeScript SDK, served over stdio.
//
// test_official_servers.py drives it with trio_mcp's client. The `slow` tool reports progress
// and, when its request is cancelled, writes `CANCELLED slow <request id>` to stderr, which the
// test captures to prove the cancel reached and stopped the handler.
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";

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
            params: { progressToken: token, progress: step, total: steps, message: `step ${step}` },
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
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "served by the official TypeScript SDK" }],
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

await server.connect(new StdioServerTransport());
