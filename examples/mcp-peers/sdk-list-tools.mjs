// Lists a server's tools as a client on the official TypeScript SDK sees
// them when it advertises what Claude Desktop and VS Code advertise
// (roots with listChanged, sampling, elicitation), and prints
// {"tools": [names]}: what Pinfold's tests compare `pinfold capture` with.
//
//   node sdk-list-tools.mjs stdio CMD [ARGS...]
//   node sdk-list-tools.mjs http URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
if (!["stdio", "http"].includes(mode) || !target) {
  console.error("usage: sdk-list-tools.mjs stdio CMD [ARGS...] | http URL");
  process.exit(2);
}
const client = new Client(
  { name: "pinfold-tests-sdk-client", version: "1.0.0" },
  { capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {} } },
);
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target));
await client.connect(transport);
const names = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  names.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
await client.close();
console.log(JSON.stringify({ tools: names }));
