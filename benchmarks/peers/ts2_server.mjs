// The benchmark server built on the TypeScript SDK's v2 server package
// (`@modelcontextprotocol/server`), served over stdio.
//
//     node ts2_server.mjs [--stamps PATH]
//
// The tools of ts_tools.mjs (`echo`, and `sleep` with progress, stamping CLOCK_MONOTONIC when
// cancelled), registered the v2 way, behind the package's `serveStdio`, which picks the era from
// the opening message (an `initialize` pins a handshake-era instance, as the TypeScript client
// sends). The process exits when stdin ends, like the other servers.
import fs from "node:fs";
import process from "node:process";
import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { registerBenchToolsV2 } from "./ts_tools.mjs";

const stampsAt = process.argv.indexOf("--stamps");
const stampsFd = stampsAt >= 0 ? fs.openSync(process.argv[stampsAt + 1], "a") : null;

const handle = serveStdio(() =>
  registerBenchToolsV2(new McpServer({ name: "ts2-sdk-bench", version: "2.0.0" }), stampsFd),
);
// The transport closes itself at end of input; exit then, whatever timers are left.
process.stdin.on("end", () => {
  handle.close().finally(() => process.exit(0));
});
