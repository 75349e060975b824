// Drives `codeinterp mcp` with the official MCP TypeScript client, as an agent runtime
// would, and prints what it saw as one JSON object for tests/tool/test_mcp.py to check.
// Usage: node mcp_client.mjs CODEINTERP SOCKET SOURCE_FILE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const [codeinterp, socket, sourceFile] = process.argv.slice(2);
const NORTHSTAR = [
  "measured_runtime_hours = [9.0, 7.5]",
  "assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)",
  "mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)",
  "mean_runtime_hours",
].join("\n");

const transport = new StdioClientTransport({
  command: codeinterp,
  args: ["--socket", socket, "mcp", "--source", `runtimes=${sourceFile}`],
  stderr: "inherit",
});
const report = { progress: {} };
// The client tells the transport the negotiated version (stdio has no use for it).
transport.setProtocolVersion = (v) => (report.protocolVersion = v);
const client = new Client({ name: "codeinterp-test", version: "1.0.0" });
await client.connect(transport);

const call = (name, code, sourceIds = [], options = {}) =>
  client.callTool({ name: "code_interpreter", arguments: { summary: name, code, sourceIds } }, undefined, {
    timeout: 60000,
    onprogress: (p) => (report.progress[name] ??= []).push(p),
    ...options,
  });

report.server = client.getServerVersion();
report.instructions = client.getInstructions();
report.tools = (await client.listTools()).tools;
report.northstar = await call("northstar", NORTHSTAR);
report.source = await call("source", 'open(input_files["runtimes"]).read()', ["runtimes"]);
report.artifacts = await call("artifacts", [
  "import struct, zlib",
  "def chunk(kind, data):",
  "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))",
  "png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0))",
  "       + chunk(b'IDAT', zlib.compress(b'\\x00\\xff\\x00\\x00')) + chunk(b'IEND', b''))",
  "open('/outputs/runtime.png', 'wb').write(png)",
  "open('/outputs/runtime table.csv', 'w').write('run,hours\\n1,9.0\\n2,7.5\\n')",
].join("\n"));
report.exception = await call("exception", "secret_value = 'do-not-show'\nraise ValueError('bad ' + secret_value)");
report.exited = await call("exited", "import os\nprint('bye', flush=True)\nos._exit(3)");
report.rejected = await call("rejected", "1", ["nope"]);

// A call that runs until it is cancelled; a ping is answered meanwhile. (Its progress
// is sure to arrive before the result: the SDK drops notifications that arrive in the
// same read as their response, as they do for calls of a few milliseconds.)
const controller = new AbortController();
let started;
const running = new Promise((resolve) => (started = resolve));
const t0 = Date.now();
const sleeper = call("sleeper", "print('SECRET-OUTPUT', flush=True)\nimport time\ntime.sleep(3600)", [], {
  signal: controller.signal,
  onprogress: (p) => {
    (report.progress.sleeper ??= []).push(p);
    if (/started|running/.test(p.message ?? "")) started();
  },
});
await running;
const p0 = Date.now();
await client.ping();
report.pingMsWhileRunning = Date.now() - p0;
controller.abort("the test cancels");
try {
  await sleeper;
  report.cancel = { resolved: true };
} catch (e) {
  report.cancel = { resolved: false, error: String(e), ms: Date.now() - t0 };
}
report.after = await call("after", NORTHSTAR);
await client.close();

// callTool() has validated each structuredContent against the tool's outputSchema
// already (it throws otherwise); this says so explicitly, for every result.
const validate = new AjvJsonSchemaValidator().getValidator(report.tools[0].outputSchema);
report.schemaErrors = {};
for (const name of ["northstar", "source", "artifacts", "exception", "exited", "rejected", "after"]) {
  const v = validate(report[name].structuredContent);
  if (!v.valid) report.schemaErrors[name] = v.errorMessage;
}
console.log(JSON.stringify(report));
