import assert from "node:assert/strict";
import { test } from "node:test";

import { parseInline, parseMarkdown, safeUrl } from "../../../src/toolwire/web/markdown.js";

test("only absolute http(s) and mailto URLs may become links", () => {
  assert.equal(safeUrl("https://example.org/a?b=1"), "https://example.org/a?b=1");
  assert.equal(safeUrl("mailto:a@example.org"), "mailto:a@example.org");
  for (const bad of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
    "\u0001javascript:alert(1)", "data:text/html,<script>x</script>", "vbscript:x", "/relative", "file:///etc/passwd", ""]) {
    assert.equal(safeUrl(bad), null, bad);
  }
});

test("links with script URLs stay text; images never load", () => {
  assert.deepEqual(parseInline("[x](javascript:alert(1))"), [{ t: "span", c: ["x"] }]);
  assert.deepEqual(parseInline("[x](https://a.example/)"), [{ t: "a", href: "https://a.example/", c: ["x"] }]);
  assert.deepEqual(parseInline("![pic](javascript:alert(1))"), [{ t: "img", href: null, alt: "pic" }]);
  assert.deepEqual(parseInline("![pic](https://a.example/p.png)"), [{ t: "img", href: "https://a.example/p.png", alt: "pic" }]);
  assert.deepEqual(parseInline("<javascript:alert(1)>"), ["<javascript:alert(1)>"]);
});

test("HTML is text", () => {
  const text = '<img src=x onerror="alert(1)"> <script>alert(2)</script>';
  assert.deepEqual(parseMarkdown(text), [{ t: "p", c: [text] }]);
});

test("inline: emphasis, strong, code, strike, escapes, bare URLs, snake_case", () => {
  assert.deepEqual(parseInline("a *b* **c** `d*e*` ~~f~~ \\*g\\* snake_case_name"), [
    "a ", { t: "em", c: ["b"] }, " ", { t: "strong", c: ["c"] }, " ", { t: "code", text: "d*e*" }, " ",
    { t: "del", c: ["f"] }, " *g* snake_case_name",
  ]);
  assert.deepEqual(parseInline("see https://example.org/x."), ["see ", { t: "a", href: "https://example.org/x", c: ["https://example.org/x"] }, "."]);
  assert.deepEqual(parseInline("one\ntwo"), ["one", { t: "br" }, "two"]);
});

test("blocks: headings, fences (closed or still streaming), lists, quotes, tables, rules", () => {
  const blocks = parseMarkdown("# Title\n\nText\n- a\n- b\n  - c\n\n1. x\n2. y\n\n> q\n\n---\n\n| A | B |\n|:--|--:|\n| 1 | 2 |\n\n```py\nprint('</pre>')\n");
  assert.deepEqual(blocks.map((b) => b.t), ["h", "p", "list", "list", "quote", "hr", "table", "code"]);
  assert.deepEqual(blocks[2].items[1].map((b) => b.t), ["p", "list"]);
  assert.equal(blocks[3].ordered, true);
  assert.deepEqual(blocks[6].align, ["left", "right"]);
  assert.deepEqual(blocks[7], { t: "code", lang: "py", text: "print('</pre>')" });
});

test("stray delimiters in a long text parse quickly", () => {
  const text = "*a `b [c _d ~~e ".repeat(20000);
  const started = Date.now();
  const blocks = parseMarkdown(text);
  assert.equal(blocks.length, 1);
  assert.ok(Date.now() - started < 2000, "linear in practice");
});

test("a text full of brackets and parentheses parses quickly", () => {
  for (const text of ["[a](b ".repeat(20000), `${"[".repeat(100000)}](`, `[a](${"(".repeat(100000)}`]) {
    const started = Date.now();
    parseMarkdown(text);
    assert.ok(Date.now() - started < 2000, text.slice(0, 8));
  }
});
