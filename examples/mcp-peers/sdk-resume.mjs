// A client on the official TypeScript SDK that calls the conformance fixture
// server's `test_reconnection` tool (examples/mcp-peers/conformance-server.mjs),
// which closes the call's event stream after its priming event and answers
// afterwards: the client must reconnect with `GET` and `Last-Event-ID` to
// get the result (SEP-1699). The suite's own scenario for this
// (server-sse-polling) declares protocol 2025-03-26 and never gets that
// far; this client negotiates 2025-11-25. Prints one JSON object:
//   {"protocolVersion", "result": CallToolResult | null, "error": string | null,
//    "resumed": whether a GET with Last-Event-ID was sent}
//
//   node sdk-resume.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
let resumed = false;
const watched = (input, init) => {
  const headers = new Headers(init?.headers);
  if ((init?.method ?? "GET") === "GET" && headers.get("last-event-id")) resumed = true;
  return fetch(input, init);
};
const client = new Client({ name: "pinfold-tests-sdk-resume", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: watched });
await client.connect(transport);
let result = null;
let error = null;
try {
  result = await client.callTool({ name: "test_reconnection", arguments: {} }, undefined, { timeout: 10000 });
} catch (e) {
  error = String(e);
}
console.log(JSON.stringify({ protocolVersion: transport.protocolVersion, result, error, resumed }));
await client.close();
