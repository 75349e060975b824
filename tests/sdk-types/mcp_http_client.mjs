// Drives `codeinterp mcp --http` with the official MCP TypeScript client's Streamable HTTP
// transport and prints what it saw as one JSON object for tests/tool/test_mcp_http.py.
// Usage: node mcp_http_client.mjs URL TOKEN_FILE MODE [SESSION_ID]
//   new:     initialize, list the tools, call the tool; leaves the session open
//   resume:  reconnect with SESSION_ID (no initialize) and call the tool
//   expired: a call in SESSION_ID (the server has ended it), then a new session's call
// An https URL with a self-signed certificate is trusted through NODE_EXTRA_CA_CERTS.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tokenFile, mode, sessionId] = process.argv.slice(2);
const token = readFileSync(tokenFile, "utf8").trim();
const NORTHSTAR = [
  "measured_runtime_hours = [9.0, 7.5]",
  "mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)",
  "mean_runtime_hours",
].join("\n");
const report = {};

async function open(session) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    sessionId: session,
  });
  const client = new Client({ name: "codeinterp-http-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

const call = (client, code) =>
  client.callTool({ name: "code_interpreter", arguments: { summary: "test", code, sourceIds: [] } }, undefined, {
    timeout: 60000,
  });

if (mode === "new") {
  const { client, transport } = await open();
  report.sessionId = transport.sessionId;
  report.protocolVersion = transport.protocolVersion;
  report.server = client.getServerVersion();
  report.tools = (await client.listTools()).tools;
  report.northstar = await call(client, NORTHSTAR);
} else if (mode === "resume") {
  const { client, transport } = await open(sessionId);
  report.sessionId = transport.sessionId;
  report.northstar = await call(client, NORTHSTAR);
} else if (mode === "expired") {
  const { client } = await open(sessionId);
  try {
    await call(client, NORTHSTAR);
    report.oldSession = { ok: true };
  } catch (e) {
    report.oldSession = { ok: false, code: e.code, error: String(e) };
  }
  const fresh = await open();
  report.sessionId = fresh.transport.sessionId;
  report.northstar = await call(fresh.client, NORTHSTAR);
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(JSON.stringify(report));
process.exit(0);
