// A client on the official TypeScript SDK, advertising what Claude Desktop
// and VS Code advertise (roots with listChanged, sampling, elicitation),
// that starts an MCP server by command (as desktop clients do), lists its
// tools (every page) and makes the calls it is given, in order. Pinfold's
// tests start `pinfold guard ... -- SERVER` with it, to see the guard as a
// real client sees it. Prints one JSON object:
//   {"tools": [{name, description, annotations}],
//    "calls": [{"result": CallToolResult} | {"error": {code, message, data}}]}
//
//   node sdk-guarded.mjs '[{"name": "echo", "arguments": {"message": "hi"}}]' CMD [ARGS...]
//   node sdk-guarded.mjs CALLS_JSON http(s)://HOST/t/TENANT/mcp/SERVER
// With a URL it connects over Streamable HTTP, with `Authorization: Bearer
// $PINFOLD_TOKEN` (a guard endpoint).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [callsJson, command, ...args] = process.argv.slice(2);
if (!callsJson || !command) {
  console.error("usage: sdk-guarded.mjs CALLS_JSON CMD [ARGS...]");
  process.exit(2);
}
const calls = JSON.parse(callsJson);
const client = new Client(
  { name: "pinfold-tests-sdk-client", version: "1.0.0" },
  { capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {} } },
);
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
const transport = /^https?:\/\//.test(command)
  ? new StreamableHTTPClientTransport(new URL(command), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.PINFOLD_TOKEN}` } },
    })
  : new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
await client.connect(transport);
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools.map((t) => ({ name: t.name, description: t.description, annotations: t.annotations })));
  cursor = page.nextCursor;
} while (cursor);
const results = [];
for (const c of calls) {
  try {
    results.push({ result: await client.callTool({ name: c.name, arguments: c.arguments }) });
  } catch (e) {
    results.push({ error: { code: e.code, message: e.message, data: e.data } });
  }
}
await client.close();
console.log(JSON.stringify({ tools, calls: results }));
