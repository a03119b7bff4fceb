// A reference MCP server for the official conformance suite's server
// scenarios (npm @modelcontextprotocol/conformance, pinned beside it): it
// offers the fixtures those scenarios ask for by name (the test_* tools,
// prompts, resources and template, logging, completion, progress, and
// tools that ask the client for sampling or elicitation), over Streamable
// HTTP with sessions, resumable streams and DNS rebinding protection. It is
// written on the official TypeScript SDK's low-level `Server`, so every
// schema goes on the wire exactly as written here.
// scripts/conformance-guard.sh runs the suite against it directly and
// through the Pinfold guard.
//
//   node conformance-server.mjs [PORT]     (or PORT in the environment)
// Listens on 127.0.0.1 (port 0 picks a free one) at /mcp and prints the
// URL once listening.
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createMcpExpressApp } from "@modelcontextprotocol/sdk/server/express.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ErrorCode,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js";

// A 1x1 red PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

// A tenth of a second of silence: 8 kHz, 8-bit mono PCM in a RIFF/WAVE file.
function wav() {
  const samples = 800;
  const b = Buffer.alloc(44 + samples);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + samples, 4);
  b.write("WAVE", 8);
  b.write("fmt ", 12);
  b.writeUInt32LE(16, 16); // fmt chunk size
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // channels
  b.writeUInt32LE(8000, 24); // sample rate
  b.writeUInt32LE(8000, 28); // byte rate
  b.writeUInt16LE(1, 32); // block align
  b.writeUInt16LE(8, 34); // bits per sample
  b.write("data", 36);
  b.writeUInt32LE(samples, 40);
  b.fill(128, 44); // 8-bit PCM silence is the midpoint
  return b.toString("base64");
}
const WAV = wav();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ type: "text", text: t });
const noArgs = { type: "object", properties: {} };

const TOOLS = [
  { name: "test_simple_text", description: "Returns a simple text response.", inputSchema: noArgs },
  { name: "test_image_content", description: "Returns a 1x1 PNG image.", inputSchema: noArgs },
  { name: "test_audio_content", description: "Returns a short WAV audio clip.", inputSchema: noArgs },
  { name: "test_embedded_resource", description: "Returns an embedded text resource.", inputSchema: noArgs },
  {
    name: "test_multiple_content_types",
    description: "Returns text, an image and an embedded resource in one result.",
    inputSchema: noArgs,
  },
  {
    name: "test_tool_with_logging",
    description: "Sends three info log messages while it runs.",
    inputSchema: noArgs,
  },
  { name: "test_error_handling", description: "Always fails with a tool execution error.", inputSchema: noArgs },
  {
    name: "test_tool_with_progress",
    description: "Reports progress 0, 50 and 100 of 100 while it runs.",
    inputSchema: noArgs,
  },
  {
    name: "test_sampling",
    description: "Asks the client's model to answer a prompt (sampling/createMessage).",
    inputSchema: {
      type: "object",
      properties: { prompt: { type: "string", description: "The prompt to send to the model" } },
      required: ["prompt"],
    },
  },
  {
    name: "test_elicitation",
    description: "Asks the user for a username and an email address (elicitation/create).",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string", description: "The message to show the user" } },
      required: ["message"],
    },
  },
  {
    name: "test_elicitation_sep1034_defaults",
    description: "Asks the user for values whose fields all have defaults (SEP-1034).",
    inputSchema: noArgs,
  },
  {
    name: "test_elicitation_sep1330_enums",
    description: "Asks the user to choose from the five kinds of enum (SEP-1330).",
    inputSchema: noArgs,
  },
  {
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: {
          type: "object",
          properties: { street: { type: "string" }, city: { type: "string" } },
        },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
  },
  {
    name: "test_reconnection",
    description: "Closes its response stream before it answers, so the client resumes it (SEP-1699).",
    inputSchema: noArgs,
  },
];

const PROMPTS = [
  { name: "test_simple_prompt", description: "A prompt without arguments." },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt with two arguments.",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt that embeds a resource.",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  { name: "test_prompt_with_image", description: "A prompt with an image." },
];

const RESOURCES = [
  {
    uri: "test://static-text",
    name: "static-text",
    description: "A static text resource.",
    mimeType: "text/plain",
  },
  {
    uri: "test://static-binary",
    name: "static-binary",
    description: "A static binary resource (a PNG image).",
    mimeType: "image/png",
  },
  {
    uri: "test://watched-resource",
    name: "watched-resource",
    description: "A resource a client may subscribe to.",
    mimeType: "text/plain",
  },
];

const TEMPLATES = [
  {
    uriTemplate: "test://template/{id}/data",
    name: "template-data",
    description: "Data for an id.",
    mimeType: "application/json",
  },
];

const LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

// One MCP server per session; `transport` is the session's, for the tool
// that closes its own response stream.
function mcpServer(transport) {
  const server = new Server(
    { name: "pinfold-conformance-server", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        prompts: {},
        resources: { subscribe: true },
        logging: {},
        completions: {},
      },
    },
  );
  let level = "info";
  const subscriptions = new Set();

  server.setRequestHandler(SetLevelRequestSchema, async (req) => {
    level = req.params.level;
    return {};
  });
  const log = (extra, lvl, data) =>
    LEVELS.indexOf(lvl) >= LEVELS.indexOf(level)
      ? extra.sendNotification({
          method: "notifications/message",
          params: { level: lvl, logger: "conformance-server", data },
        })
      : Promise.resolve();

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = req.params.arguments ?? {};
    const caps = server.getClientCapabilities() ?? {};
    switch (req.params.name) {
      case "test_simple_text":
        return { content: [text("This is a simple text response for testing.")] };
      case "test_image_content":
        return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
      case "test_audio_content":
        return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
      case "test_embedded_resource":
        return {
          content: [
            {
              type: "resource",
              resource: {
                uri: "test://embedded-resource",
                mimeType: "text/plain",
                text: "This is an embedded resource content.",
              },
            },
          ],
        };
      case "test_multiple_content_types":
        return {
          content: [
            text("Multiple content types test:"),
            { type: "image", data: PNG, mimeType: "image/png" },
            {
              type: "resource",
              resource: {
                uri: "test://mixed-content-resource",
                mimeType: "application/json",
                text: JSON.stringify({ test: "data", value: 123 }),
              },
            },
          ],
        };
      case "test_tool_with_logging":
        await log(extra, "info", "Tool execution started");
        await sleep(50);
        await log(extra, "info", "Tool processing data");
        await sleep(50);
        await log(extra, "info", "Tool execution completed");
        return { content: [text("Tool with logging executed successfully")] };
      case "test_error_handling":
        return { isError: true, content: [text("This tool intentionally returns an error for testing")] };
      case "test_tool_with_progress": {
        const token = req.params._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
          if (token !== undefined) {
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress, total: 100 },
            });
          }
          if (progress < 100) await sleep(50);
        }
        return { content: [text("Tool with progress executed successfully")] };
      }
      case "test_sampling": {
        if (!caps.sampling) {
          return { isError: true, content: [text("The client does not support sampling")] };
        }
        const r = await extra.sendRequest(
          {
            method: "sampling/createMessage",
            params: {
              messages: [{ role: "user", content: text(String(args.prompt)) }],
              maxTokens: 100,
            },
          },
          CreateMessageResultSchema,
        );
        const said = r.content?.type === "text" ? r.content.text : JSON.stringify(r.content);
        return { content: [text(`LLM response: ${said}`)] };
      }
      case "test_elicitation": {
        if (!caps.elicitation) {
          return { isError: true, content: [text("The client does not support elicitation")] };
        }
        const r = await elicit(extra, {
          message: String(args.message),
          requestedSchema: {
            type: "object",
            properties: {
              username: { type: "string", description: "User's response" },
              email: { type: "string", description: "User's email address" },
            },
            required: ["username", "email"],
          },
        });
        return { content: [text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
      }
      case "test_elicitation_sep1034_defaults": {
        if (!caps.elicitation) {
          return { isError: true, content: [text("The client does not support elicitation")] };
        }
        const r = await elicit(extra, {
          message: "Please review your details; every field has a default",
          requestedSchema: {
            type: "object",
            properties: {
              name: { type: "string", description: "User name", default: "John Doe" },
              age: { type: "integer", description: "User age", default: 30 },
              score: { type: "number", description: "User score", default: 95.5 },
              status: {
                type: "string",
                description: "User status",
                enum: ["active", "inactive", "pending"],
                default: "active",
              },
              verified: { type: "boolean", description: "Verification status", default: true },
            },
          },
        });
        return { content: [text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
      }
      case "test_elicitation_sep1330_enums": {
        if (!caps.elicitation) {
          return { isError: true, content: [text("The client does not support elicitation")] };
        }
        const r = await elicit(extra, {
          message: "Please choose",
          requestedSchema: {
            type: "object",
            properties: {
              untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
              titledSingle: {
                type: "string",
                oneOf: [
                  { const: "value1", title: "First Option" },
                  { const: "value2", title: "Second Option" },
                  { const: "value3", title: "Third Option" },
                ],
              },
              legacyEnum: {
                type: "string",
                enum: ["opt1", "opt2", "opt3"],
                enumNames: ["Option One", "Option Two", "Option Three"],
              },
              untitledMulti: { type: "array", items: { type: "string", enum: ["option1", "option2", "option3"] } },
              titledMulti: {
                type: "array",
                items: {
                  anyOf: [
                    { const: "value1", title: "First Choice" },
                    { const: "value2", title: "Second Choice" },
                    { const: "value3", title: "Third Choice" },
                  ],
                },
              },
            },
          },
        });
        return { content: [text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
      }
      case "json_schema_2020_12_tool":
        return { content: [text(`Received: ${JSON.stringify(args)}`)] };
      case "test_reconnection": {
        // Closing the stream is only resumable for a client that got the
        // priming event, which the transport sends from 2025-11-25 on.
        const version = extra.requestInfo?.headers?.["mcp-protocol-version"];
        if (typeof version === "string" && version >= "2025-11-25") {
          await sleep(50);
          transport.closeSSEStream(extra.requestId);
          await sleep(200);
        }
        return { content: [text("Reconnection test completed successfully")] };
      }
      default:
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    }
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => {
    const args = req.params.arguments ?? {};
    const user = (content) => ({ role: "user", content });
    switch (req.params.name) {
      case "test_simple_prompt":
        return { messages: [user(text("This is a simple prompt for testing."))] };
      case "test_prompt_with_arguments":
        return { messages: [user(text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`))] };
      case "test_prompt_with_embedded_resource":
        return {
          messages: [
            user({
              type: "resource",
              resource: {
                uri: String(args.resourceUri),
                mimeType: "text/plain",
                text: "Embedded resource content for testing.",
              },
            }),
            user(text("Please process the embedded resource above.")),
          ],
        };
      case "test_prompt_with_image":
        return {
          messages: [
            user({ type: "image", data: PNG, mimeType: "image/png" }),
            user(text("Please analyze the image above.")),
          ],
        };
      default:
        throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    const uri = req.params.uri;
    if (uri === "test://static-text") {
      return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }] };
    }
    if (uri === "test://static-binary") {
      return { contents: [{ uri, mimeType: "image/png", blob: PNG }] };
    }
    if (uri === "test://watched-resource") {
      return { contents: [{ uri, mimeType: "text/plain", text: "The watched resource's content." }] };
    }
    const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
    if (m) {
      const id = decodeURIComponent(m[1]);
      return {
        contents: [
          {
            uri,
            mimeType: "application/json",
            text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
          },
        ],
      };
    }
    throw new McpError(-32002, `Resource not found: ${uri}`, { uri });
  });
  server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });

  server.setRequestHandler(CompleteRequestSchema, async (req) => {
    const { ref, argument } = req.params;
    let candidates = [];
    if (ref.type === "ref/prompt" && ref.name === "test_prompt_with_arguments") {
      candidates = ["paris", "park", "party", "test", "testValue1", "testValue2"];
    } else if (ref.type === "ref/resource" && ref.uri === "test://template/{id}/data" && argument.name === "id") {
      candidates = ["1", "123", "456"];
    }
    const values = candidates.filter((v) => v.startsWith(argument.value ?? ""));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  return server;
}

// elicitation/create (a form), on the stream of the call that asks.
function elicit(extra, params) {
  return extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema);
}

// Events kept for resumption: a client that reconnects with Last-Event-ID
// gets what its stream was sent after that event.
class MemoryEventStore {
  constructor() {
    this.events = [];
  }
  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${this.events.length}`;
    this.events.push({ eventId, streamId, message });
    return eventId;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.find((e) => e.eventId === eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const at = this.events.findIndex((e) => e.eventId === lastEventId);
    if (at < 0) return "";
    const { streamId } = this.events[at];
    for (const e of this.events.slice(at + 1)) {
      if (e.streamId === streamId && Object.keys(e.message).length > 0) await send(e.eventId, e.message);
    }
    return streamId;
  }
}

const sessions = new Map();
const app = createMcpExpressApp({ host: "127.0.0.1" });

app.post("/mcp", async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let transport = sid ? sessions.get(sid) : undefined;
  if (!transport) {
    if (sid || !isInitializeRequest(req.body)) {
      res.status(sid ? 404 : 400).json({
        jsonrpc: "2.0",
        error: { code: -32000, message: sid ? "Session not found" : "Bad Request: no session" },
        id: null,
      });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: 500,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await mcpServer(transport).connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

const existing = async (req, res) => {
  const transport = sessions.get(req.headers["mcp-session-id"]);
  if (!transport) {
    res.status(req.headers["mcp-session-id"] ? 404 : 400).send("Invalid or missing session id");
    return;
  }
  await transport.handleRequest(req, res);
};
app.get("/mcp", existing);
app.delete("/mcp", existing);

const port = Number(process.argv[2] ?? process.env.PORT ?? 0);
const listener = app.listen(port, "127.0.0.1", () => {
  console.log(`http://127.0.0.1:${listener.address().port}/mcp`);
});
