// A second, independent upstream for Signet's resolve cache, written with the
// official MCP TypeScript SDK: `manage_files` with `tools/resolve` exactly as
// the tool-resolution seed's reference implementation (SEP-1862 §Reference
// Implementation), served statelessly over Streamable HTTP.
//
//   PORT=8091 SHAPE=seed node server.mjs        # {tool} answers (the seed)
//   PORT=8091 SHAPE=extension node server.mjs   # {resultType: "complete", name, annotations}
//   STATEFUL=1 node server.mjs                  # protocol sessions (Mcp-Session-Id), as most servers
//
// Prints "listening on <url>" once ready. GET /calls counts tools/resolve requests.
import { randomUUID } from "node:crypto";
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const SHAPE = process.env.SHAPE ?? "seed";
const PORT = Number(process.env.PORT ?? 0);
const STATEFUL = process.env.STATEFUL === "1";
const sessions = new Map();
let calls = 0;

const conservative = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: false,
};

const manageFilesTool = {
  name: "manage_files",
  description: "Read, append, replace, or delete file contents",
  inputSchema: {
    type: "object",
    properties: {
      path: { type: "string", description: "File path to operate on" },
      action: {
        type: "string",
        enum: ["read", "append", "replace", "delete"],
        description: "Operation to perform",
      },
      content: { type: "string", description: "Content for append/replace operations" },
    },
    required: ["path", "action"],
  },
  annotations: conservative,
  resolve: true,
  _meta: { "io.modelcontextprotocol/tool-resolution": { resolvable: true } },
};

function annotationsForAction(action) {
  switch (action) {
    case "read":
      return { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
    case "append":
      return { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
    case "replace":
    case "delete":
      return { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
    default:
      return conservative;
  }
}

const ResolveToolRequestSchema = z.object({
  method: z.literal("tools/resolve"),
  params: z.object({
    name: z.string(),
    arguments: z.record(z.string(), z.unknown()),
  }).passthrough(),
});

function makeServer() {
  const server = new Server(
    { name: "file-server", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: false, resolve: true },
        extensions: { "io.modelcontextprotocol/tool-resolution": {} },
      },
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [manageFilesTool] }));
  server.setRequestHandler(ResolveToolRequestSchema, async (request) => {
    calls += 1;
    const { name, arguments: args } = request.params;
    if (name !== "manage_files") {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    const annotations = annotationsForAction(args.action);
    if (SHAPE === "extension") {
      return { resultType: "complete", name, annotations };
    }
    return { tool: { ...manageFilesTool, annotations } };
  });
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  if (req.method === "GET" && req.url === "/calls") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ calls }));
    return;
  }
  if (req.url !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  if (STATEFUL) {
    await stateful(req, res);
    return;
  }
  if (req.method !== "POST") {
    // Stateless: no server-initiated stream, no session to delete.
    res.writeHead(405, { allow: "POST" }).end();
    return;
  }
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res);
  } catch (e) {
    if (!res.headersSent) {
      res.writeHead(500).end(String(e));
    }
  }
});

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
}

// One transport per protocol session, as the SDK's stateful examples do.
async function stateful(req, res) {
  const id = req.headers["mcp-session-id"];
  if (id && sessions.has(id)) {
    const transport = sessions.get(id);
    const body = req.method === "POST" ? await readJson(req) : undefined;
    await transport.handleRequest(req, res, body);
    return;
  }
  if (req.method === "POST") {
    const body = await readJson(req);
    if (!id && isInitializeRequest(body)) {
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await makeServer().connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
  }
  res.writeHead(id ? 404 : 400, { "content-type": "application/json" });
  res.end(JSON.stringify({
    jsonrpc: "2.0",
    error: { code: -32000, message: id ? "Session not found" : "Bad Request: No valid session ID provided" },
    id: null,
  }));
}

httpServer.listen(PORT, "127.0.0.1", () => {
  const { port } = httpServer.address();
  console.log(`listening on http://127.0.0.1:${port}/mcp`);
});
