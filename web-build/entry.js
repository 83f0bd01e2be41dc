// The entry module of src/toolwire/web/vendor/markdown-libs.js (scripts/build-web-vendor bundles it).
//
// What the page takes from libraries, and only that: a CommonMark + GFM parser that yields a syntax tree
// (mdast), the URL normaliser CommonMark's reference renderer uses, and a highlighter that yields a tree
// (lowlight, on highlight.js grammars). The page renders both trees itself, as elements and text nodes.
// Grammars: the languages models write most, so the bundle stays small; any other fence is plain text.
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import csharp from "highlight.js/lib/languages/csharp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { createLowlight } from "lowlight";
import { fromMarkdown } from "mdast-util-from-markdown";
import { gfmFromMarkdown } from "mdast-util-gfm";
import { gfm } from "micromark-extension-gfm";
import { normalizeUri } from "micromark-util-sanitize-uri";

export const lowlight = createLowlight({
  bash, c, cpp, csharp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql, typescript,
  xml, yaml,
});

// Raw HTML is not a construct here: a `<div>` or `<style>` line is text of its paragraph, and the Markdown
// around and inside it still counts (`<b>**bold**</b>` shows the tags as characters and "bold" in bold).
// The page never renders HTML from a message, so recognising HTML blocks would only swallow Markdown.
const noHtml = { disable: { null: ["htmlFlow", "htmlText"] } };
const extensions = [gfm(), noHtml];
const mdastExtensions = [gfmFromMarkdown()];

/** Markdown text as an mdast tree (CommonMark 0.31 + GitHub Flavored Markdown, raw HTML read as text). */
export function parseMarkdownTree(text) {
  return fromMarkdown(text, { extensions, mdastExtensions });
}

export { normalizeUri };
