// A reference MCP upstream written with the official TypeScript SDK
// (@modelcontextprotocol/sdk), served over Streamable HTTP. It offers one
// tool, `manage_files`, declared with its worst-case annotations, and answers
// a non-standard `tools/resolve` request with argument-specific annotations,
// in one of two result shapes:
//
//   --shape seed       the tool-resolution seed (SEP-1862): the tool carries
//                      `resolve: true`, the server declares
//                      `capabilities.tools.resolve`, and `tools/resolve`
//                      answers `{ tool: Tool }` (the whole tool, annotations
//                      refined).
//   --shape extension  the `io.modelcontextprotocol/tool-resolution`
//                      extension: the tool is marked with
//                      `_meta["io.modelcontextprotocol/tool-resolution"].resolvable`,
//                      the server declares `capabilities.extensions[...]`, and
//                      `tools/resolve` answers
//                      `{ resultType: "complete", name, annotations }` with
//                      all four core hints. A client that declared neither the
//                      extension at initialize nor in the request's
//                      `_meta["io.modelcontextprotocol/clientCapabilities"]`
//                      gets JSON-RPC error -32021.
//
// Both shapes refine exactly as the seed's reference implementation does:
// read → read-only and idempotent; append → additive; replace and delete →
// destructive and idempotent; any other action → the declared worst case.
//
// Other flags: --port N (0 picks a free port; the chosen port is printed
// alone on the first line of stdout once listening), --host ADDR (default
// 127.0.0.1), --stateless (no MCP session ids: every POST stands alone, as
// the sessionless protocol revision expects), --sse (answer requests on an
// SSE stream instead of a JSON body), --result-meta (add a deterministic
// `_meta` to every resolve result), --stdio (serve one client over stdin and
// stdout instead of HTTP, as a desktop client starts a server).
//
// `tools/call` of manage_files answers one text block saying what it would
// do (`manage_files: read /notes.txt`); it changes nothing.
//
// Endpoints: POST|GET|DELETE /mcp (the MCP endpoint); GET /calls (JSON-RPC
// requests received, by method: {"total", "resolve", "methods": {...}});
// DELETE /calls (reset the counters); GET /healthz.

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { z } from "zod";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  isInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js";

const EXTENSION = "io.modelcontextprotocol/tool-resolution";
const CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities";
/** The extension's error for a request the client did not negotiate. */
const MISSING_CLIENT_CAPABILITY = -32021;
const MAX_BODY_BYTES = 1 << 20;

const { values: opts } = parseArgs({
  options: {
    shape: { type: "string", default: "seed" },
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    stateless: { type: "boolean", default: false },
    sse: { type: "boolean", default: false },
    "result-meta": { type: "boolean", default: false },
    stdio: { type: "boolean", default: false },
  },
  strict: true,
});
if (opts.shape !== "seed" && opts.shape !== "extension") {
  console.error(`--shape must be "seed" or "extension", not ${JSON.stringify(opts.shape)}`);
  process.exit(2);
}
const port = Number(opts.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be an integer in 0..65535, not ${JSON.stringify(opts.port)}`);
  process.exit(2);
}
const extensionShape = opts.shape === "extension";

/** The worst case over every action: what `tools/list` must declare. */
const WORST_CASE = Object.freeze({
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: false,
});

/** The tool as `tools/list` shows it, with the resolvability marker of the chosen shape. */
function manageFilesTool() {
  const tool = {
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
    annotations: { ...WORST_CASE },
  };
  if (extensionShape) {
    tool._meta = { [EXTENSION]: { resolvable: true } };
  } else {
    tool.resolve = true;
  }
  return tool;
}

/** Annotations for one action, as the seed's reference implementation refines them. */
function annotationsFor(action) {
  switch (action) {
    case "read":
      return { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
    case "append":
      return { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
    case "replace":
      return { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
    case "delete":
      return { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
    default:
      return { ...WORST_CASE };
  }
}

// The SDK dispatches on the `method` literal of a request schema, so a
// non-standard method is served by registering a schema for it. `params` is
// left loose here and checked by hand, so malformed parameters answer
// -32602 (Invalid params) rather than the schema parser's -32603.
const ResolveToolRequestSchema = z.object({
  method: z.literal("tools/resolve"),
  params: z.unknown().optional(),
});

function clientDeclaredExtension(server, params) {
  const perRequest = params?._meta?.[CLIENT_CAPABILITIES_META];
  return Boolean(
    server.getClientCapabilities()?.extensions?.[EXTENSION] ?? perRequest?.extensions?.[EXTENSION],
  );
}

function resolveTool(server, params) {
  if (extensionShape && !clientDeclaredExtension(server, params)) {
    throw new McpError(MISSING_CLIENT_CAPABILITY, `the client did not declare the ${EXTENSION} extension`);
  }
  if (typeof params !== "object" || params === null || typeof params.name !== "string") {
    throw new McpError(ErrorCode.InvalidParams, "params.name must be a string");
  }
  const { name, arguments: args } = params;
  if (name !== "manage_files") {
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new McpError(ErrorCode.InvalidParams, "params.arguments must be an object");
  }
  const annotations = annotationsFor(args.action);
  if (!extensionShape) {
    return { tool: { ...manageFilesTool(), annotations } };
  }
  const result = { resultType: "complete", name, annotations };
  if (opts["result-meta"]) {
    result._meta = { "dev.pinfold.example/action": String(args.action) };
  }
  return result;
}

/** One SDK server per MCP session (or per request when stateless). */
function newMcpServer() {
  const capabilities = extensionShape
    ? { tools: { listChanged: false }, extensions: { [EXTENSION]: {} } }
    : { tools: { listChanged: false, resolve: true } };
  const server = new Server(
    { name: `pinfold-ts-upstream-${opts.shape}`, version: "0.1.0" },
    { capabilities },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [manageFilesTool()] }));
  server.setRequestHandler(ResolveToolRequestSchema, async (request) =>
    resolveTool(server, request.params),
  );
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params;
    if (name !== "manage_files") {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    return { content: [{ type: "text", text: `manage_files: ${args?.action} ${args?.path}` }] };
  });
  return server;
}

// ---- call counters -------------------------------------------------------

const calls = new Map();
function count(message) {
  if (message && typeof message === "object" && typeof message.method === "string" && "id" in message) {
    calls.set(message.method, (calls.get(message.method) ?? 0) + 1);
  }
}
function callsSnapshot() {
  const methods = Object.fromEntries([...calls].sort(([a], [b]) => a.localeCompare(b)));
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  return { total, resolve: calls.get("tools/resolve") ?? 0, methods };
}

// ---- HTTP ----------------------------------------------------------------

/** Stateful transports by MCP session id. */
const transports = new Map();

function sendJson(res, status, body, headers = {}) {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { "content-type": "application/json", "content-length": bytes.length, ...headers });
  res.end(bytes);
}

function jsonRpcError(res, status, code, message) {
  sendJson(res, status, { jsonrpc: "2.0", id: null, error: { code, message } });
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      return { tooLarge: true };
    }
    chunks.push(chunk);
  }
  return { text: Buffer.concat(chunks).toString("utf8") };
}

function transportOptions() {
  return { enableJsonResponse: !opts.sse };
}

async function handleMcp(req, res) {
  let body;
  if (req.method === "POST") {
    const { text, tooLarge } = await readBody(req);
    if (tooLarge) {
      return jsonRpcError(res, 413, ErrorCode.InvalidRequest, "request body too large");
    }
    try {
      body = JSON.parse(text);
    } catch {
      return jsonRpcError(res, 400, ErrorCode.ParseError, "Parse error");
    }
    for (const m of Array.isArray(body) ? body : [body]) {
      count(m);
    }
  }

  if (opts.stateless) {
    if (req.method !== "POST") {
      res.writeHead(405, { allow: "POST" }).end();
      return;
    }
    const server = newMcpServer();
    const transport = new StreamableHTTPServerTransport({ ...transportOptions(), sessionIdGenerator: undefined });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    return;
  }

  const sessionId = req.headers["mcp-session-id"];
  let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
  if (!transport) {
    if (sessionId !== undefined) {
      return jsonRpcError(res, 404, ErrorCode.ConnectionClosed, "unknown MCP session");
    }
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      return jsonRpcError(res, 400, ErrorCode.InvalidRequest, "no MCP session: send initialize first");
    }
    const server = newMcpServer();
    transport = new StreamableHTTPServerTransport({
      ...transportOptions(),
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, transport),
      onsessionclosed: (id) => transports.delete(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) transports.delete(transport.sessionId);
    };
    await server.connect(transport);
  }
  await transport.handleRequest(req, res, body);
}

const http = createServer((req, res) => {
  const path = new URL(req.url ?? "/", "http://localhost").pathname;
  const route = async () => {
    if (path === "/mcp") return handleMcp(req, res);
    if (path === "/calls" && req.method === "GET") return sendJson(res, 200, callsSnapshot());
    if (path === "/calls" && req.method === "DELETE") {
      calls.clear();
      res.writeHead(204).end();
      return;
    }
    if (path === "/healthz" && req.method === "GET") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      return;
    }
    sendJson(res, 404, { error: "not found" });
  };
  route().catch((err) => {
    console.error("request failed:", err);
    if (!res.headersSent) jsonRpcError(res, 500, ErrorCode.InternalError, "Internal error");
    else res.end();
  });
});

if (opts.stdio) {
  const server = newMcpServer();
  await server.connect(new StdioServerTransport());
  console.error(`pinfold-ts-upstream (${opts.shape} shape) on stdio`);
} else http.listen(port, opts.host, () => {
  // The first line of stdout is the port alone, for scripts.
  process.stdout.write(`${http.address().port}\n`);
  console.error(
    `pinfold-ts-upstream (${opts.shape} shape${opts.stateless ? ", stateless" : ""}) on http://${opts.host}:${http.address().port}/mcp`,
  );
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, async () => {
    for (const t of transports.values()) await t.close().catch(() => {});
    http.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
