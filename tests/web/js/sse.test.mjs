import assert from "node:assert/strict";
import { test } from "node:test";

import { SSEParser, parseSSE } from "../../../src/toolwire/web/sse.js";

test("frames with ids, comments and multi-line data", () => {
  const frames = parseSSE(": ping\n\nid: 1-1\ndata: {\"a\":1}\n\nid: 1-2\ndata: line one\ndata: line two\n\n");
  assert.deepEqual(frames, [
    { id: "1-1", event: "message", data: "{\"a\":1}" },
    { id: "1-2", event: "message", data: "line one\nline two" },
  ]);
});

test("every split point of a body gives the same frames", () => {
  const body = "\ufeffid: 1-1\r\ndata: {\"text\": \"é€😀\"}\r\n\r\n: ping\r\rid: 1-2\revent: x\rdata:no-space\r\rretry: 3000\ndata: ok\n\n";
  const whole = parseSSE(body);
  assert.equal(whole.length, 3);
  assert.deepEqual(whole[1], { id: "1-2", event: "x", data: "no-space" });
  assert.equal(whole[2].id, "1-2", "a frame without id keeps the last event id");
  for (let cut = 0; cut <= body.length; cut += 1) {
    for (const second of [cut, Math.min(body.length, cut + 3)]) {
      const frames = [];
      const parser = new SSEParser((f) => frames.push(f));
      parser.feed(body.slice(0, cut));
      parser.feed(body.slice(cut, second));
      parser.feed(body.slice(second));
      parser.end();
      assert.deepEqual(frames, whole, `split at ${cut}/${second}`);
      assert.equal(parser.retry, 3000);
    }
  }
});

test("one character at a time, with CRLF split across chunks", () => {
  const body = "id: 2-7\r\ndata: a\r\n\r\nid: 2-8\r\ndata: b\r\n\r\n";
  const frames = [];
  const parser = new SSEParser((f) => frames.push(f));
  for (const ch of body) parser.feed(ch);
  assert.deepEqual(frames.map((f) => [f.id, f.data]), [["2-7", "a"], ["2-8", "b"]]);
});

test("an unterminated last frame is dropped; a frame with no data is not dispatched", () => {
  assert.deepEqual(parseSSE("id: 1-1\n\ndata: cut off"), []);
  assert.deepEqual(parseSSE("id: 1-1\nevent: x\n\n").length, 0);
});

test("an id with NUL is ignored; empty data lines count", () => {
  const frames = parseSSE("id: 1-1\ndata: a\n\nid: bad\0id\ndata:\n\n");
  assert.deepEqual(frames, [{ id: "1-1", event: "message", data: "a" }, { id: "1-1", event: "message", data: "" }]);
});

test("a long stream is parsed in pieces without losing data", () => {
  const parts = [];
  for (let i = 1; i <= 2000; i += 1) parts.push(`id: 1-${i}\ndata: {"type":"text_delta","text":"${"x".repeat(i % 7)}"}\n\n`);
  const body = parts.join("");
  const frames = [];
  const parser = new SSEParser((f) => frames.push(f));
  for (let at = 0; at < body.length; at += 4093) parser.feed(body.slice(at, at + 4093));
  assert.equal(frames.length, 2000);
  assert.equal(frames[1999].id, "1-2000");
  assert.equal(JSON.parse(frames[6].data).text, "x".repeat(0));
});
