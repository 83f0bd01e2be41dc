// Searching the signed-in person's chats (`GET api/search`): a box above the chat list. While it holds
// words, the list gives way to the matching chats, newest first, each with a snippet of the matching
// message whose words are marked; "More results" follows the server's cursor. Typing waits a moment
// before asking, and an answer to an older query never replaces a newer one.

const DELAY_MS = 250;
const WORD = /[\p{L}\p{N}]+/gu; // what the server counts as a word (letters and digits)

/** The words of a query, lower-cased and unique, as the server reads them. */
export function searchWords(query) {
  return [...new Set((query.toLowerCase().match(WORD) ?? []))].slice(0, 8);
}

/** `text` as nodes, each stretch that starts with one of `words` (case ignored) wrapped in <mark>. */
export function markWords(doc, text, words) {
  if (words.length === 0) return [doc.createTextNode(text)];
  const escaped = words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(${escaped.join("|")})`, "giu");
  return text.split(pattern).map((piece, index) => {
    if (index % 2 === 0) return doc.createTextNode(piece);
    const mark = doc.createElement("mark");
    mark.textContent = piece;
    return mark;
  });
}

export class ChatSearch {
  /**
   * @param {{doc: Document, input: HTMLInputElement, results: HTMLElement, list: HTMLElement,
   *          status: HTMLElement, api: () => import("./api.js").Api | null, onError: (error: Error) => void}} options
   *   `list` is the chat list the results stand in for; `onError` gets failures such as a refused token.
   */
  constructor({ doc, input, results, list, status, api, onError }) {
    Object.assign(this, { doc, input, results, list, status, api, onError });
    this.timer = null;
    this.asked = 0; // the number of the newest request: older answers are dropped
    this.controller = null;
    input.addEventListener("input", () => this.schedule());
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && input.value) {
        event.preventDefault();
        this.clear();
      } else if (event.key === "Enter") {
        event.preventDefault();
        this.run();
      }
    });
  }

  get active() {
    return searchWords(this.input.value).length > 0;
  }

  clear() {
    this.input.value = "";
    this.run();
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), this.active ? DELAY_MS : 0);
  }

  /** Ask now (or, when the box holds no words, show the chat list again). */
  async run(cursor = null) {
    clearTimeout(this.timer);
    this.controller?.abort();
    const query = this.input.value.trim();
    const number = ++this.asked;
    if (!this.active) {
      this.results.hidden = true;
      this.results.replaceChildren();
      this.list.hidden = false;
      this.status.textContent = "";
      return;
    }
    const api = this.api();
    if (api === null) return;
    this.controller = new AbortController();
    this.status.textContent = cursor === null ? "Searching…" : "";
    let body;
    try {
      body = await api.searchChats(query, { cursor, signal: this.controller.signal });
    } catch (error) {
      if (number !== this.asked || error?.name === "AbortError") return;
      this.status.textContent = "";
      this.onError(error);
      return;
    }
    if (number !== this.asked) return;
    this.show(body, searchWords(query), cursor !== null);
  }

  show(body, words, more) {
    const { doc } = this;
    this.list.hidden = true;
    this.results.hidden = false;
    this.results.querySelector(".search-more")?.remove();
    const items = body.results.map((hit) => {
      const li = doc.createElement("li");
      li.className = "chat-item search-hit";
      const link = doc.createElement("a");
      link.className = "chat-link";
      link.href = `#chat=${encodeURIComponent(hit.chat.id)}`;
      const title = doc.createElement("span");
      title.className = "search-title";
      title.append(...markWords(doc, hit.chat.title || "New chat", words));
      const snippet = doc.createElement("span");
      snippet.className = "search-snippet";
      if (hit.message_id !== null) snippet.append(...markWords(doc, hit.snippet, words));
      link.append(title, snippet);
      li.append(link);
      return li;
    });
    if (more) this.results.append(...items);
    else this.results.replaceChildren(...items);
    const count = this.results.querySelectorAll(".search-hit").length;
    this.status.textContent = count === 0 ? "No chat has all of these words." : `${count} ${count === 1 ? "chat" : "chats"} found.`;
    if (body.next_cursor !== null) {
      const li = doc.createElement("li");
      li.className = "search-more";
      const button = doc.createElement("button");
      button.type = "button";
      button.className = "secondary";
      button.textContent = "More results";
      button.addEventListener("click", () => this.run(body.next_cursor));
      li.append(button);
      this.results.append(li);
    }
  }
}
