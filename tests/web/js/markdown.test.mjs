import assert from "node:assert/strict";
import { test } from "node:test";

import { markdownTree, renderMarkdown, safeUrl, updateMarkdown } from "../../../src/toolwire/web/markdown.js";
import { doc, html } from "./dom.mjs";

const LINK = 'rel="noopener noreferrer nofollow" target="_blank"';

function md(text) {
  return html(renderMarkdown(text, doc));
}

test("only absolute http(s) and mailto URLs may become links", () => {
  assert.equal(safeUrl("https://example.org/a?b=1"), "https://example.org/a?b=1");
  assert.equal(safeUrl("mailto:a@example.org"), "mailto:a@example.org");
  assert.equal(safeUrl("https://example.org/a b/ä"), "https://example.org/a%20b/%C3%A4");
  for (const bad of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
    "\u0001javascript:alert(1)", "data:text/html,<script>x</script>", "vbscript:x", "/relative", "#top",
    "file:///etc/passwd", "", "//evil.example/x"]) {
    assert.equal(safeUrl(bad), null, bad);
  }
});

test("links with script URLs stay text; images never load", () => {
  assert.equal(md("[x](javascript:alert(1))"), "<p><span>x</span></p>");
  assert.equal(md("[x](https://a.example/ \"T\")"), `<p><a href="https://a.example/" ${LINK} title="T">x</a></p>`);
  assert.equal(md("![pic](javascript:alert(1))"), '<p><span class="md-image">[image: pic]</span></p>');
  assert.equal(md("![pic](https://a.example/p.png)"), `<p><a class="md-image" href="https://a.example/p.png" ${LINK}>[image: pic]</a></p>`);
  assert.equal(md("<javascript:alert(1)>"), "<p><span>javascript:alert(1)</span></p>");
  assert.equal(md("[r]\n\n[r]: javascript:alert(1)"), "<p><span>r</span></p>");
  assert.equal(md("[r]\n\n[r]: https://a.example/"), `<p><a href="https://a.example/" ${LINK}>r</a></p>`);
});

test("HTML is text, inline and as a block", () => {
  const text = '<img src=x onerror="alert(1)"> <script>alert(2)</script>';
  assert.equal(md(text), `<p>${text.replaceAll("<", "&lt;").replaceAll(">", "&gt;")}</p>`);
  // An HTML block is text of its paragraph, and the Markdown in it still counts.
  assert.equal(md("<div onmouseover=x>\n*a*\n</div>"), "<p>&lt;div onmouseover=x&gt;\n<em>a</em>\n&lt;/div&gt;</p>");
  assert.equal(md("<style>body{display:none}</style>**bold**"), "<p>&lt;style&gt;body{display:none}&lt;/style&gt;<strong>bold</strong></p>");
  assert.equal(md("a <b onclick=x>b</b>"), "<p>a &lt;b onclick=x&gt;b&lt;/b&gt;</p>");
  assert.equal(md("```\n</pre><script>x</script>\n```"), '<pre tabindex="0"><code>&lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;\n</code></pre>');
});

test("tight numbered lists with . and ) are one item per line (the hand-written parser merged them)", () => {
  assert.equal(md("1. first\n2. second"), "<ol><li>first</li><li>second</li></ol>");
  assert.equal(md("1) first\n2) second\n3) third"), "<ol><li>first</li><li>second</li><li>third</li></ol>");
  assert.equal(md("3. c\n4. d"), '<ol start="3"><li>c</li><li>d</li></ol>');
  assert.equal(md("1. a\n\n2. b"), "<ol><li><p>a</p></li><li><p>b</p></li></ol>");
});

test("inline: emphasis, strong, code, strike, escapes, bare URLs, snake_case, line breaks", () => {
  assert.equal(md("a *b* **c** `d*e*` ~~f~~ \\*g\\* snake_case_name"),
    "<p>a <em>b</em> <strong>c</strong> <code>d*e*</code> <del>f</del> *g* snake_case_name</p>");
  assert.equal(md("see https://example.org/x."), `<p>see <a href="https://example.org/x" ${LINK}>https://example.org/x</a>.</p>`);
  // A soft break stays a newline (the page shows it as a line break); two spaces make a hard break.
  assert.equal(md("one\ntwo  \nthree"), "<p>one\ntwo<br>three</p>");
  assert.equal(md("`a\nb`"), "<p><code>a b</code></p>");
});

test("blocks: headings, fences (closed or still streaming), lists, quotes, tables, rules, tasks", () => {
  const tree = markdownTree("# Title\n\nText\n- a\n- b\n  - c\n\n1. x\n2. y\n\n> q\n\n---\n\n| A | B |\n|:--|--:|\n| 1 | 2 |\n\n```py\nprint('</pre>')\n");
  assert.deepEqual(tree.children.map((b) => b.type), ["heading", "paragraph", "list", "list", "blockquote", "thematicBreak", "table", "code"]);
  const shown = md("| A | B |\n|:--|--:|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n```\nstill streaming");
  assert.ok(shown.startsWith('<div class="table-scroll" tabindex="0"><table><thead><tr><th class="align-left">A</th><th class="align-right">B</th>'), shown);
  assert.ok(shown.includes('<li><span class="md-task" role="img" aria-label="done">☑ </span>done</li>'), shown);
  assert.ok(shown.endsWith('<pre tabindex="0"><code>still streaming\n</code></pre>'), shown);
});

test("code blocks in a known language are highlighted as token spans; others stay plain", () => {
  assert.equal(md("```python\ndef f(): return 'x'\n```"), '<pre tabindex="0"><code class="language-python" data-lang="python">'
    + '<span class="hljs-keyword">def</span> <span class="hljs-title function_">f</span>(): '
    + '<span class="hljs-keyword">return</span> <span class="hljs-string">\'x\'</span>\n</code></pre>');
  assert.equal(md("```brainfuck\n+++\n```"), '<pre tabindex="0"><code class="language-brainfuck" data-lang="brainfuck">+++\n</code></pre>');
  assert.equal(md('```"><img\nx\n```'), '<pre tabindex="0"><code class="language-&quot;&gt;&lt;img" data-lang="&quot;&gt;&lt;img">x\n</code></pre>');
  assert.ok(md("```js\nconst a = 1;\n```").includes('<span class="hljs-keyword">const</span>'));
});

test("nesting on one line is cut short, quickly, instead of exhausting the parser's stack", () => {
  const started = Date.now();
  const shown = md(`${"- ".repeat(4000)}x`);
  assert.equal((shown.match(/<ul>/g) ?? []).length, 32); // past 32 markers, the rest of the line is text
  assert.ok(shown.includes("- - x"));
  assert.ok(md(`${"> ".repeat(4000)}x`).endsWith("</blockquote>"));
  assert.ok(Date.now() - started < 20000, "nested markers parse in bounded time");
});

test("stray delimiters and brackets in a long text parse in bounded time", () => {
  for (const text of ["*a `b [c _d ~~e ".repeat(2000), "[a](b ".repeat(2000), `${"[".repeat(10000)}](`, `[a](${"(".repeat(10000)}`]) {
    const started = Date.now();
    assert.equal(markdownTree(text).children.length, 1);
    assert.ok(Date.now() - started < 20000, text.slice(0, 8));
  }
});

// A chat answer as a model streams it: every construct the page shows, in an order that makes blocks close
// and reopen while the text grows (a paragraph that becomes a setext heading or a table, a list that
// becomes loose, a fence still open).
const ANSWERS = [
  "# Plan\n\nFirst a paragraph\nthat continues.\nSetext\n---\n\n- one\n- two\n\n- three (now loose)\n\n"
    + "1. a\n2. b\n\nname | value\n--- | ---:\nx | 1\ny | 2\n\n> quoted\nlazy\n\n```python\ndef f(x):\n    return x\n```\n\n"
    + "    indented code\n\nText with **bold**, `code` and https://example.org/page.\n\n***\n\nEnd.",
  "Intro\n\n<div>\nraw\n</div>\n\n* a\n\n  continued\n* b\n\n~~~\nunclosed fence\n\nstill code",
  // A definition inside a quote, after the reference: the reference becomes a link when it arrives.
  "See [b] and [c].\n\n> quoted\n> [b]: https://b.example/\n\n- [c]: https://c.example/\n\nEnd.",
];

test("streamed text shows exactly what a full render shows, at every length", () => {
  for (const answer of ANSWERS) {
    const target = doc.createElement("div");
    for (let end = 1; end <= answer.length; end += 1) {
      const text = answer.slice(0, end);
      updateMarkdown(target, text, doc);
      assert.equal(target.html, md(text), `after ${end} characters: ${JSON.stringify(text)}`);
    }
  }
});

test("streaming keeps the blocks that cannot change, and starts over when the text is not an extension", () => {
  const target = doc.createElement("div");
  updateMarkdown(target, "# Title\n\nFirst paragraph.\n\nSecond\n\nThi", doc);
  const [heading, first] = target.childNodes;
  updateMarkdown(target, "# Title\n\nFirst paragraph.\n\nSecond\n\nThird paragraph, longer.", doc);
  assert.equal(target.childNodes[0], heading, "the heading was drawn once");
  assert.equal(target.childNodes[1], first, "the closed paragraph was drawn once");
  updateMarkdown(target, "Something else", doc);
  assert.equal(target.html, "<p>Something else</p>");
  updateMarkdown(target, "[a]\n\nmore\n\n[a]: https://a.example/", doc); // a definition reaches back: whole parse
  assert.equal(target.html, md("[a]\n\nmore\n\n[a]: https://a.example/"));
});
