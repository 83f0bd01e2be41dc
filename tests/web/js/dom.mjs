// A small DOM for the Node unit tests of markdown.js: the few calls the renderer makes (createElement,
// createTextNode, createDocumentFragment, append, replaceChildren, setAttribute), and `html` to read the
// result back. The CommonMark spec test (spec/) uses jsdom instead; this one needs no npm install.
const VOID = new Set(["br", "hr"]);

function escapeText(text) {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

class Node {
  constructor(name) {
    this.nodeName = name;
    this.childNodes = [];
    this.parentNode = null;
  }

  append(...nodes) {
    for (const node of nodes) {
      if (node.nodeName === "#fragment") {
        this.append(...node.childNodes);
        node.childNodes = [];
      } else {
        node.parentNode?.childNodes.splice(node.parentNode.childNodes.indexOf(node), 1);
        node.parentNode = this;
        this.childNodes.push(node);
      }
    }
  }

  replaceChildren(...nodes) {
    for (const child of this.childNodes) child.parentNode = null;
    this.childNodes = [];
    this.append(...nodes);
  }

  get firstChild() {
    return this.childNodes[0] ?? null;
  }

  get textContent() {
    return this.childNodes.map((child) => child.textContent).join("");
  }

  get html() {
    return this.childNodes.map((child) => child.outer).join("");
  }
}

class Text extends Node {
  constructor(data) {
    super("#text");
    this.data = String(data);
  }

  get textContent() {
    return this.data;
  }

  get outer() {
    return escapeText(this.data);
  }
}

class Element extends Node {
  constructor(tag) {
    super(tag.toUpperCase());
    this.tag = tag;
    this.attributes = new Map();
  }

  setAttribute(name, value) {
    this.attributes.set(name, String(value));
  }

  getAttribute(name) {
    return this.attributes.get(name) ?? null;
  }

  get outer() {
    const attributes = [...this.attributes].map(([k, v]) => ` ${k}="${escapeText(v).replaceAll('"', "&quot;")}"`).join("");
    return VOID.has(this.tag) ? `<${this.tag}${attributes}>` : `<${this.tag}${attributes}>${this.html}</${this.tag}>`;
  }
}

export const doc = {
  createElement: (tag) => new Element(tag),
  createTextNode: (data) => new Text(data),
  createDocumentFragment: () => new Node("#fragment"),
};

/** The HTML a Markdown renderer's fragment stands for. */
export function html(fragment) {
  return fragment.html;
}
