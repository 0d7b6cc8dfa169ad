// The benchmark server built on the official TypeScript SDK, served over stdio.
//
//     node ts_server.mjs [--stamps PATH]
//
// The same tools as every benchmark server (ts_tools.mjs: `echo`, and `sleep` with progress,
// stamping CLOCK_MONOTONIC when cancelled). The process exits when stdin ends, like the other
// servers.
import fs from "node:fs";
import process from "node:process";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { registerBenchTools } from "./ts_tools.mjs";

const stampsAt = process.argv.indexOf("--stamps");
const stampsFd = stampsAt >= 0 ? fs.openSync(process.argv[stampsAt + 1], "a") : null;

const server = new McpServer({ name: "ts-sdk-bench", version: "1.0.0" });

registerBenchTools(server, stampsFd);

const transport = new StdioServerTransport();
await server.connect(transport);
// The SDK's stdio transport does not watch for end of input; the other servers exit on it.
process.stdin.on("end", () => {
  server.close().finally(() => process.exit(0));
});
