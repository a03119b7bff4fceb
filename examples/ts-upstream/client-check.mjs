// Round trip with the TypeScript SDK's own client: connect over Streamable
// HTTP, list tools, and send the non-standard `tools/resolve` for every
// action, checking the refined annotations. Used by check.sh.
//
//   node client-check.mjs URL seed|extension
//
// Exits non-zero on the first mismatch.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

const [url, shape] = process.argv.slice(2);
const EXTENSION = "io.modelcontextprotocol/tool-resolution";
const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
const EXPECTED = {
  read: [true, false, true, false],
  append: [false, false, false, false],
  replace: [false, true, true, false],
  delete: [false, true, true, false],
};

const Annotations = z.object(Object.fromEntries(HINTS.map((h) => [h, z.boolean()])));
const SeedResult = z.object({ tool: z.object({ name: z.string(), annotations: Annotations }).passthrough() });
const ExtensionResult = z.object({
  resultType: z.literal("complete"),
  name: z.string(),
  annotations: Annotations,
});

const client = new Client(
  { name: "pinfold-ts-upstream-check", version: "0.1.0" },
  { capabilities: shape === "extension" ? { extensions: { [EXTENSION]: {} } } : {} },
);
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

// Client.listTools() parses with the SDK's Tool schema, which drops fields it
// does not know (the seed's `resolve` marker among them): ask for the raw list.
const { tools } = await client.request(
  { method: "tools/list", params: {} },
  z.object({ tools: z.array(z.looseObject({ name: z.string() })) }),
);
const tool = tools.find((t) => t.name === "manage_files");
const marked = shape === "extension" ? tool?._meta?.[EXTENSION]?.resolvable === true : tool?.resolve === true;
if (!marked) {
  console.error(`tools/list: manage_files is not marked resolvable for the ${shape} shape`, tool);
  process.exit(1);
}

for (const [action, want] of Object.entries(EXPECTED)) {
  const result = await client.request(
    { method: "tools/resolve", params: { name: "manage_files", arguments: { path: "/tmp/x", action } } },
    shape === "extension" ? ExtensionResult : SeedResult,
  );
  const annotations = shape === "extension" ? result.annotations : result.tool.annotations;
  const got = HINTS.map((h) => annotations[h]);
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    console.error(`tools/resolve ${action}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    process.exit(1);
  }
}
await client.close();
console.log(`SDK client round trip (${shape}): ok`);
