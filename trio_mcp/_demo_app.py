"""The demo server's app (MCP Apps): a small adder view for the ``add`` tool.

One self-contained HTML document, script and style inline, reaching no network (its CSP
declares no origins). It speaks the host's protocol itself (JSON-RPC 2.0 over ``postMessage``):
``ui/initialize``, then it shows the tool's input and result as the host sends them, and its
form calls ``add`` again through the host (``tools/call``); "Copy" uses the clipboard when the
host granted ``clipboard-write``.
"""

from __future__ import annotations

#: Where the app lives on the demo server.
ADDER_URI = "ui://trio-mcp-demo/adder"

ADDER_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Adder</title>
<style>
  :root { color-scheme: light dark; font-family: var(--font-sans, system-ui, sans-serif); }
  body { margin: 0; padding: 12px; background: var(--color-background-primary, Canvas);
         color: var(--color-text-primary, CanvasText); }
  .sum { font-size: 2rem; font-weight: 600; font-variant-numeric: tabular-nums; }
  form { display: flex; gap: 6px; align-items: center; margin-top: 8px; }
  input { width: 6em; }
  .status { color: var(--color-text-secondary, GrayText); font-size: .85rem; min-height: 1.2em; }
</style>
</head>
<body>
<div class="sum" id="sum">&hellip;</div>
<form id="form">
  <input id="a" type="number" step="any" value="0" aria-label="first addend"> +
  <input id="b" type="number" step="any" value="0" aria-label="second addend">
  <button type="submit">Add</button>
  <button type="button" id="copy">Copy</button>
</form>
<div class="status" id="status">waiting for the host</div>
<script>
(() => {
  "use strict";
  const host = window.parent;
  const waiting = new Map();
  let lastId = 0;
  const byId = (id) => document.getElementById(id);
  const status = (text) => { byId("status").textContent = text; };

  const send = (message) => host.postMessage({ jsonrpc: "2.0", ...message }, "*");
  const notify = (method, params) => send({ method, params });
  const request = (method, params) => new Promise((resolve, reject) => {
    lastId += 1;
    waiting.set(lastId, { resolve, reject });
    send({ id: lastId, method, params });
  });

  const resize = () => {
    const root = document.documentElement;
    notify("ui/notifications/size-changed", { width: root.scrollWidth, height: root.scrollHeight });
  };
  const applyContext = (context) => {
    const root = document.documentElement;
    if (context.theme) root.style.colorScheme = context.theme;
    const variables = (context.styles && context.styles.variables) || {};
    for (const [name, value] of Object.entries(variables)) {
      if (value) root.style.setProperty(name, value);
    }
  };
  const showInput = (args) => {
    if (!args) return;
    byId("a").value = String(args.a);
    byId("b").value = String(args.b);
    byId("sum").textContent = args.a + " + " + args.b + " = \\u2026";
  };
  const showResult = (result) => {
    const text = (result.content || []).filter((c) => c.type === "text").map((c) => c.text);
    if (result.isError) {
      status(text.join(" ") || "the tool failed");
      return;
    }
    const structured = result.structuredContent;
    const sum = structured && "result" in structured ? structured.result : text.join(" ");
    byId("sum").textContent = String(sum);
    status("done");
    resize();
  };

  const notifications = {
    "ui/notifications/tool-input": (params) => showInput(params.arguments),
    "ui/notifications/tool-input-partial": (params) => showInput(params.arguments),
    "ui/notifications/tool-result": (params) => showResult(params),
    "ui/notifications/tool-cancelled": (params) => status("cancelled: " + (params.reason || "")),
    "ui/notifications/host-context-changed": (params) => applyContext(params),
  };

  window.addEventListener("message", (event) => {
    const message = event.data;
    if (event.source !== host || !message || message.jsonrpc !== "2.0") return;
    if (message.method === undefined) {
      const call = waiting.get(message.id);
      if (!call) return;
      waiting.delete(message.id);
      if (message.error) call.reject(new Error(message.error.message));
      else call.resolve(message.result);
    } else if (message.id !== undefined) {
      // The host asks: teardown and ping are answered; nothing else is ours to answer.
      if (message.method === "ui/resource-teardown" || message.method === "ping") {
        send({ id: message.id, result: {} });
      } else {
        send({ id: message.id, error: { code: -32601, message: "Method not found" } });
      }
    } else if (notifications[message.method]) {
      notifications[message.method](message.params || {});
    }
  });

  byId("form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const args = { a: Number(byId("a").value), b: Number(byId("b").value) };
    showInput(args);
    status("adding\\u2026");
    try {
      showResult(await request("tools/call", { name: "add", arguments: args }));
    } catch (error) {
      status("the call failed: " + error.message);
    }
  });
  byId("copy").addEventListener("click", async () => {
    const text = byId("sum").textContent;
    try {
      if (!navigator.clipboard) throw new Error("no clipboard here");
      await navigator.clipboard.writeText(text);
      status("copied");
    } catch (error) {
      status("could not copy: " + error.message);
    }
  });

  request("ui/initialize", {
    appInfo: { name: "trio-mcp-demo-adder", version: "0.1.0" },
    appCapabilities: { availableDisplayModes: ["inline"] },
    protocolVersion: "2026-01-26",
  }).then((result) => {
    applyContext(result.hostContext || {});
    notify("ui/notifications/initialized", {});
    status("ready");
    resize();
  }, (error) => status("the host refused the app: " + error.message));
})();
</script>
</body>
</html>
"""
