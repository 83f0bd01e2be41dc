// Markdown for model text, safe by construction.
//
// The text is parsed into a small tree, and the tree becomes DOM nodes through createElement and text
// nodes only: no HTML string is ever built or parsed, so HTML in the text (`<img onerror=...>`,
// `<script>`, `</pre>`) is shown as the characters it is. Links keep only absolute http(s) and mailto
// URLs; anything else (`javascript:`, `data:`, relative paths) stays plain text. Images are never loaded:
// a model (or a web page it read) can smuggle data out through an image URL, so an image becomes a link
// the person can choose to follow.
//
// The subset is what chat models write: paragraphs (a single newline is a line break, as in chat),
// headings, emphasis, strong, strikethrough, inline code, fenced code (an unclosed fence while streaming
// runs to the end), block quotes, nested lists, GitHub tables, rules, links, autolinks and bare URLs.
// Parsing is linear in practice: a delimiter with no closer is remembered, so a text full of stray
// `*` or backticks is not rescanned.

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`]*?)[ \t]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*)|[ \t]*)$/;
const TABLE_DELIMITER = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_DEPTH = 12; // deeper nesting (quotes in lists in quotes...) is shown as plain paragraphs

/** The URL if it may become a link (absolute http, https or mailto), else null. */
export function safeUrl(raw) {
  let url;
  try {
    url = new URL(String(raw).trim());
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

// ---------------------------------------------------------------- blocks

/** Parse Markdown text into a list of block nodes: {t: "p" | "h" | "code" | "quote" | "list" | "table" | "hr", ...}. */
export function parseMarkdown(text) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  return parseBlocks(lines, 0);
}

function isBlank(line) {
  return line.trim().length === 0;
}

function startsBlock(line, inParagraph) {
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) return true;
  const item = ITEM.exec(line);
  if (item === null) return false;
  if (!inParagraph) return true;
  // Inside a paragraph only a non-empty bullet or an ordered list starting at 1 begins a list.
  return item[4] !== undefined && item[4].trim() !== "" && (/^[-*+]$/.test(item[2]) || /^1[.)]$/.test(item[2]));
}

function parseBlocks(lines, depth) {
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i += 1;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line)) !== null) {
      const mark = m[1];
      const body = [];
      i += 1;
      while (i < lines.length) {
        const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
        if (close !== null && close[1][0] === mark[0] && close[1].length >= mark.length) {
          i += 1;
          break;
        }
        body.push(lines[i]);
        i += 1;
      }
      if (i >= lines.length) while (body.length > 0 && isBlank(body[body.length - 1])) body.pop(); // still streaming
      blocks.push({ t: "code", lang: m[2].split(/[ \t]/)[0] ?? "", text: body.join("\n") });
      continue;
    }
    if ((m = HEADING.exec(line)) !== null) {
      blocks.push({ t: "h", level: m[1].length, c: parseInline(m[2] ?? "") });
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      blocks.push({ t: "hr" });
      i += 1;
      continue;
    }
    if (depth < MAX_DEPTH && QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i])) !== null) {
        inner.push(m[1]);
        i += 1;
      }
      blocks.push({ t: "quote", c: parseBlocks(inner, depth + 1) });
      continue;
    }
    if (depth < MAX_DEPTH && ITEM.test(line)) {
      const [list, next] = parseList(lines, i, depth);
      blocks.push(list);
      i = next;
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_DELIMITER.test(lines[i + 1])) {
      const table = parseTable(lines, i);
      if (table !== null) {
        blocks.push(table[0]);
        i = table[1];
        continue;
      }
    }
    const paragraph = [line.trim()];
    i += 1;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i], true)) {
      if (lines[i].includes("|") && i + 1 < lines.length && TABLE_DELIMITER.test(lines[i + 1])) break;
      paragraph.push(lines[i].trim());
      i += 1;
    }
    blocks.push({ t: "p", c: parseInline(paragraph.join("\n")) });
  }
  return blocks;
}

function markerKind(marker) {
  return /^\d/.test(marker) ? `ol${marker[marker.length - 1]}` : `ul${marker}`;
}

function parseList(lines, start, depth) {
  const first = ITEM.exec(lines[start]);
  const kind = markerKind(first[2]);
  const ordered = kind.startsWith("ol");
  const list = { t: "list", ordered, start: ordered ? Number.parseInt(first[2], 10) : 1, items: [] };
  let i = start;
  let loose = false;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (m === null || markerKind(m[2]) !== kind) break;
    const indent = m[1].length + m[2].length + (m[3] === undefined ? 1 : Math.min(m[3].length, 4));
    const content = [m[4] ?? ""];
    i += 1;
    let blankBefore = false;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        blankBefore = true;
        content.push("");
        i += 1;
        continue;
      }
      const lead = line.length - line.trimStart().length;
      if (lead >= indent) {
        if (blankBefore) loose = true;
        content.push(line.slice(Math.min(indent, lead)));
        blankBefore = false;
        i += 1;
        continue;
      }
      if (!blankBefore && !startsBlock(line, true)) {
        content.push(line.trim()); // a lazy continuation of the item's paragraph
        i += 1;
        continue;
      }
      break;
    }
    while (content.length > 0 && content[content.length - 1] === "") content.pop();
    if (blankBefore && i < lines.length && ITEM.test(lines[i])) loose = true;
    list.items.push(parseBlocks(content, depth + 1));
  }
  list.loose = loose;
  return [list, i];
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let k = 0; k < row.length; k += 1) {
    if (row[k] === "\\" && row[k + 1] === "|") {
      cell += "|";
      k += 1;
    } else if (row[k] === "|") {
      cells.push(cell.trim());
      cell = "";
    } else {
      cell += row[k];
    }
  }
  cells.push(cell.trim());
  return cells;
}

function parseTable(lines, start) {
  const header = splitRow(lines[start]);
  const delimiter = splitRow(lines[start + 1]);
  if (header.length !== delimiter.length) return null;
  const align = delimiter.map((d) => (d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right"
    : d.startsWith(":") ? "left" : null));
  const rows = [];
  let i = start + 2;
  while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|") && !startsBlock(lines[i], false)) {
    const cells = splitRow(lines[i]);
    rows.push(header.map((_, k) => parseInline(cells[k] ?? "")));
    i += 1;
  }
  return [{ t: "table", align, head: header.map((h) => parseInline(h)), rows }, i];
}

// ---------------------------------------------------------------- inline

/** Parse inline Markdown into nodes: strings, and {t: "em" | "strong" | "del" | "code" | "a" | "br", ...}. */
export function parseInline(text) {
  return new InlineParser(text).parse(0, text.length, 0);
}

class InlineParser {
  constructor(text) {
    this.text = text;
    this.found = new Map(); // search string -> {from, at}: the last answer of `next`
    this.noCloser = new Map(); // emphasis mark -> a position after which no valid closer exists
    this.lastLinkEnd = text.lastIndexOf("](");
  }

  /** `text.indexOf(needle, from)`, answered from the last search when it still holds (linear overall). */
  next(needle, from) {
    const last = this.found.get(needle);
    if (last !== undefined && from >= last.from && (last.at < 0 || last.at >= from)) return last.at;
    const at = this.text.indexOf(needle, from);
    this.found.set(needle, { from, at });
    return at;
  }

  parse(start, end, depth) {
    const text = this.text;
    const out = [];
    let plain = "";
    const flush = () => {
      if (plain.length > 0) out.push(plain);
      plain = "";
    };
    let i = start;
    while (i < end) {
      const c = text[i];
      if (c === "\\" && i + 1 < end && PUNCTUATION.includes(text[i + 1])) {
        plain += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        out.push({ t: "br" });
        i += 1;
        continue;
      }
      if (c === "`") {
        let run = 1;
        while (i + run < end && text[i + run] === "`") run += 1;
        const close = this.findRun("`".repeat(run), i + run, end);
        if (close < 0) {
          plain += text.slice(i, i + run);
          i += run;
          continue;
        }
        let code = text.slice(i + run, close).replace(/\n/g, " ");
        if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim() !== "") code = code.slice(1, -1);
        flush();
        out.push({ t: "code", text: code });
        i = close + run;
        continue;
      }
      if ((c === "[" || (c === "!" && text[i + 1] === "[")) && depth < MAX_DEPTH) {
        const link = this.link(i, end, depth);
        if (link !== null) {
          flush();
          out.push(link.node);
          i = link.next;
          continue;
        }
      }
      if (c === "<") {
        const close = this.next(">", i + 1);
        if (close > 0 && close < end && close - i < 2048) {
          const inner = text.slice(i + 1, close);
          const href = /^[a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*$/.test(inner) ? safeUrl(inner) : null;
          if (href !== null) {
            flush();
            out.push({ t: "a", href, c: [inner] });
            i = close + 1;
            continue;
          }
        }
      }
      if ((c === "h" || c === "H") && (i === start || /[\s(*_~]/.test(text[i - 1]))) {
        const m = /^https?:\/\/[^\s<]+/i.exec(text.slice(i, Math.min(end, i + 2048)));
        if (m !== null) {
          let url = m[0].replace(/[.,:;!?'"]+$/, "");
          if (url.endsWith(")") && countOf(url, "(") < countOf(url, ")")) url = url.slice(0, -1);
          const href = safeUrl(url);
          if (href !== null) {
            flush();
            out.push({ t: "a", href, c: [url] });
            i += url.length;
            continue;
          }
        }
      }
      if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
        const span = this.emphasis(i, end, depth);
        if (span !== null) {
          flush();
          out.push(span.node);
          i = span.next;
          continue;
        }
      }
      plain += c;
      i += 1;
    }
    flush();
    return out;
  }

  /** The position of `run` at or after `from` and before `end`, or -1. */
  findRun(run, from, end) {
    let at = this.next(run, from);
    // A run of backticks must match exactly in length.
    while (at >= 0 && run[0] === "`" && (this.text[at + run.length] === "`" || this.text[at - 1] === "`")) {
      let skip = at;
      while (this.text[skip] === "`") skip += 1;
      at = this.next(run, skip);
    }
    return at < 0 || at >= end ? -1 : at;
  }

  emphasis(i, end, depth) {
    const text = this.text;
    const c = text[i];
    const double = text[i + 1] === c;
    if (c === "~" && !double) return null;
    const mark = double ? c + c : c;
    const after = text[i + mark.length];
    if (after === undefined || /\s/.test(after) || after === c) return null;
    if (c === "_" && i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1])) return null; // snake_case stays text
    const start = i + mark.length;
    const known = this.noCloser.get(mark);
    if (known !== undefined && start >= known) return null;
    let from = start;
    for (;;) {
      const close = this.findRun(mark, from, end);
      if (close < 0) {
        // Whether a closer is valid depends on the closer alone: none from here on, for any opener.
        if (end === this.text.length) this.noCloser.set(mark, Math.min(start, known ?? start));
        return null;
      }
      const before = text[close - 1];
      const next = text[close + mark.length];
      const intraword = c === "_" && next !== undefined && /[\p{L}\p{N}]/u.test(next);
      if (!/\s/.test(before) && next !== c && !intraword && close > i + mark.length) {
        const kind = c === "~" ? "del" : double ? "strong" : "em";
        return { node: { t: kind, c: this.parse(i + mark.length, close, depth + 1) }, next: close + mark.length };
      }
      from = close + 1;
    }
  }

  link(i, end, depth) {
    const text = this.text;
    const image = text[i] === "!";
    const open = image ? i + 1 : i;
    if (open >= this.lastLinkEnd) return null;
    let level = 0;
    let close = -1;
    // Labels and destinations are short: bounded scans keep a text full of brackets linear.
    const labelEnd = Math.min(end, open + 1024);
    for (let k = open; k < labelEnd; k += 1) {
      const ch = text[k];
      if (ch === "\\") {
        k += 1;
      } else if (ch === "[") {
        level += 1;
      } else if (ch === "]") {
        level -= 1;
        if (level === 0) {
          close = k;
          break;
        }
      } else if (ch === "\n" && text[k + 1] === "\n") {
        break;
      }
    }
    if (close < 0 || text[close + 1] !== "(") return null;
    let paren = 0;
    let destEnd = -1;
    const destLimit = Math.min(end, close + 4096);
    for (let k = close + 1; k < destLimit; k += 1) {
      const ch = text[k];
      if (ch === "\\") {
        k += 1;
      } else if (ch === "(") {
        paren += 1;
      } else if (ch === ")") {
        paren -= 1;
        if (paren === 0) {
          destEnd = k;
          break;
        }
      } else if (ch === "\n") {
        break;
      }
    }
    if (destEnd < 0) return null;
    let dest = text.slice(close + 2, destEnd).trim();
    if (dest.startsWith("<")) {
      const gt = dest.indexOf(">");
      dest = gt > 0 ? dest.slice(1, gt) : dest.slice(1);
    } else {
      dest = dest.split(/\s+/)[0] ?? "";
    }
    const href = safeUrl(dest);
    const label = this.parse(open + 1, close, depth + 1);
    const node = image ? { t: "img", href, alt: text.slice(open + 1, close) } : href === null
      ? { t: "span", c: label } : { t: "a", href, c: label };
    return { node, next: destEnd + 1 };
  }
}

function countOf(text, ch) {
  let n = 0;
  for (const c of text) if (c === ch) n += 1;
  return n;
}

// ---------------------------------------------------------------- DOM

/** Markdown text as a DocumentFragment built from elements and text nodes only. */
export function renderMarkdown(text, doc = document) {
  const fragment = doc.createDocumentFragment();
  for (const block of parseMarkdown(text)) fragment.append(blockNode(block, doc));
  return fragment;
}

function element(doc, tag, children = [], className = null) {
  const node = doc.createElement(tag);
  if (className !== null) node.className = className;
  for (const child of children) node.append(child);
  return node;
}

function blockNode(block, doc) {
  switch (block.t) {
    case "p":
      return element(doc, "p", inlineNodes(block.c, doc));
    case "h":
      return element(doc, `h${block.level}`, inlineNodes(block.c, doc));
    case "hr":
      return doc.createElement("hr");
    case "code": {
      const code = element(doc, "code", [doc.createTextNode(block.text)]);
      if (/^[\w+#.-]{1,32}$/.test(block.lang)) code.dataset.lang = block.lang;
      return element(doc, "pre", [code]);
    }
    case "quote":
      return element(doc, "blockquote", block.c.map((b) => blockNode(b, doc)));
    case "list": {
      const list = doc.createElement(block.ordered ? "ol" : "ul");
      if (block.ordered && block.start !== 1) list.start = block.start;
      for (const item of block.items) {
        const li = doc.createElement("li");
        for (const inner of item) {
          // A tight list shows its paragraphs without paragraph spacing.
          if (inner.t === "p" && !block.loose) li.append(...inlineNodes(inner.c, doc));
          else li.append(blockNode(inner, doc));
        }
        list.append(li);
      }
      return list;
    }
    case "table": {
      const head = element(doc, "tr", block.head.map((cell, k) => aligned(element(doc, "th", inlineNodes(cell, doc)), block.align[k])));
      const body = block.rows.map((row) => element(doc, "tr", row.map((cell, k) => aligned(element(doc, "td", inlineNodes(cell, doc)), block.align[k]))));
      const table = element(doc, "table", [element(doc, "thead", [head]), element(doc, "tbody", body)]);
      return element(doc, "div", [table], "table-scroll");
    }
    default:
      return doc.createTextNode("");
  }
}

function aligned(cell, align) {
  if (align !== null) cell.classList.add(`align-${align}`);
  return cell;
}

function inlineNodes(nodes, doc) {
  return nodes.map((node) => inlineNode(node, doc));
}

function inlineNode(node, doc) {
  if (typeof node === "string") return doc.createTextNode(node);
  switch (node.t) {
    case "br":
      return doc.createElement("br");
    case "code":
      return element(doc, "code", [doc.createTextNode(node.text)]);
    case "em":
    case "strong":
    case "del":
    case "span":
      return element(doc, node.t, inlineNodes(node.c, doc));
    case "a":
      return link(doc, node.href, inlineNodes(node.c, doc));
    case "img": {
      const label = `image: ${node.alt || "untitled"}`;
      if (node.href === null) return element(doc, "span", [doc.createTextNode(`[${label}]`)], "md-image");
      const a = link(doc, node.href, [doc.createTextNode(`[${label}]`)]);
      a.classList.add("md-image");
      return a;
    }
    default:
      return doc.createTextNode("");
  }
}

function link(doc, href, children) {
  const a = element(doc, "a", children);
  a.href = href; // only ever an absolute http(s)/mailto URL (safeUrl)
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}
