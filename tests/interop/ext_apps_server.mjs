// An MCP server whose app is declared with the official MCP Apps package's server helpers
// (registerAppResource, registerAppTool from @modelcontextprotocol/ext-apps/server) on the
// official TypeScript SDK 2.x server, over stdio:
//
//     node ext_apps_server.mjs
//
// test_ext_apps.py reads its app with trio_mcp's client. It declares the UI extension itself
// (the helpers do not): the SEP's server side is an empty object under `extensions`.
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import {
  EXTENSION_ID,
  RESOURCE_MIME_TYPE,
  registerAppResource,
  registerAppTool,
} from "@modelcontextprotocol/ext-apps/server";
import { z } from "zod";

const VIEW = "ui://ext-apps-interop/clock";
const HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>Clock</title></head>
<body><p id="time">--:--</p></body></html>`;
const UI_META = {
  csp: { connectDomains: ["https://time.example"], resourceDomains: ["https://*.cdn.example"] },
  permissions: { geolocation: {} },
  domain: "clock.apps.example",
  prefersBorder: false,
};

const server = new McpServer(
  { name: "ext-apps-interop-server", version: "0.0.0" },
  { capabilities: { extensions: { [EXTENSION_ID]: {} } } },
);

registerAppResource(
  server,
  "clock",
  VIEW,
  { description: "A clock view", _meta: { ui: UI_META } },
  async () => ({
    contents: [{ uri: VIEW, mimeType: RESOURCE_MIME_TYPE, text: HTML, _meta: { ui: UI_META } }],
  }),
);

registerAppTool(
  server,
  "time",
  {
    description: "The time in a zone",
    inputSchema: { zone: z.string() },
    _meta: { ui: { resourceUri: VIEW } },
  },
  async ({ zone }) => ({ content: [{ type: "text", text: `12:00 in ${zone}` }] }),
);

registerAppTool(
  server,
  "tick",
  {
    description: "The app's own refresh",
    _meta: { ui: { resourceUri: VIEW, visibility: ["app"] } },
  },
  async () => ({ content: [{ type: "text", text: "tick" }] }),
);

await server.connect(new StdioServerTransport());
