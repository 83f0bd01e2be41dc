// The Vercel AI SDK peer of bench/side_by_side, written as its documentation writes a chat route:
// `streamText(...).toUIMessageStreamResponse()`, here served by node:http (no framework) with the model
// from @ai-sdk/openai-compatible. The two tools are the ones every server of the benchmark runs
// (bench/side_by_side/tools.py): the number of words and of characters of a text.
//
//     node server.mjs --port 0 --provider http://127.0.0.1:PORT/v1
//
// Prints "Listening on http://127.0.0.1:PORT" once it accepts connections.
import http from "node:http";
import { Readable } from "node:stream";
import { parseArgs } from "node:util";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { convertToModelMessages, jsonSchema, stepCountIs, streamText, tool } from "ai";

const { values } = parseArgs({ options: { port: { type: "string", default: "0" }, provider: { type: "string" } } });
const provider = createOpenAICompatible({ name: "load", baseURL: values.provider, apiKey: "load-key" });
const model = provider.chatModel("load");

const textInput = jsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
const tools = {
  word_count: tool({ description: "The number of words in a text.", inputSchema: textInput,
                     execute: async ({ text }) => text.split(/\s+/).filter(Boolean).length }),
  char_count: tool({ description: "The number of characters in a text.", inputSchema: textInput,
                     execute: async ({ text }) => text.length }),
};

async function chat(request, response) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const result = streamText({ model, messages: await convertToModelMessages(body.messages), tools,
                              stopWhen: stepCountIs(5) });
  const answer = result.toUIMessageStreamResponse();
  response.writeHead(answer.status, Object.fromEntries(answer.headers));
  // A client that goes away ends the copy (and with it the model stream), as a framework's adapter does.
  Readable.fromWeb(answer.body).on("error", () => response.destroy()).pipe(response);
}

const server = http.createServer((request, response) => {
  if (request.method === "POST" && request.url === "/api/chat") {
    chat(request, response).catch((error) => {
      if (!response.headersSent) response.writeHead(500, { "content-type": "text/plain" });
      response.end(String(error));
    });
  } else {
    response.writeHead(404).end();
  }
});
server.keepAliveTimeout = 75_000;
server.listen(Number(values.port), "127.0.0.1", () => {
  console.log(`Listening on http://127.0.0.1:${server.address().port}`);
});
