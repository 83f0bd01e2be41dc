// The server's native HTTP API: REST calls with the bearer token, and event streams read with fetch.
//
// EventSource cannot send an Authorization header, so streams are read from a fetch body through the
// SSE parser. Every failure becomes an ApiError carrying the server's error code and its sentence, or
// code "network" when the server could not be reached at all (the caller may retry those).

import { SSEParser } from "./sse.js";

export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 when no answer came
   * @param {string} code the server's snake_case error code ("network" when unreachable)
   * @param {string} message a full sentence for the person
   * @param {number | null} retryAfter seconds, from a 429's Retry-After
   */
  constructor(status, code, message, retryAfter = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  /** Worth trying again later: no answer, a rate limit, or the server's own trouble. A used-up token budget
   *  is a 429 too, but it resets in hours: the person reads its sentence instead of a page that waits. */
  get transient() {
    if (this.code === "budget_exceeded") return false;
    return this.status === 0 || this.status === 429 || this.status === 502 || this.status === 503 || this.status === 504;
  }
}

export class Api {
  /**
   * @param {{base: string | URL, token: string | null, fetch?: typeof fetch}} options
   *   `base` is the URL the `api/...` paths are resolved against (the page's own address by default).
   */
  constructor({ base, token, fetch: fetchImpl = globalThis.fetch.bind(globalThis) }) {
    this.base = new URL(base);
    this.token = token;
    this.fetch = fetchImpl;
  }

  url(path, query = {}) {
    const url = new URL(path, this.base);
    for (const [key, value] of Object.entries(query)) if (value !== null && value !== undefined) url.searchParams.set(key, String(value));
    return url;
  }

  async request(method, path, { body, query, headers = {}, signal, accept = "application/json" } = {}) {
    const init = { method, signal, headers: { Accept: accept, ...headers }, cache: "no-store" };
    if (this.token) init.headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await this.fetch(this.url(path, query), init);
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new ApiError(0, "network", "The server could not be reached. Check the connection; the page keeps trying.");
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async json(method, path, options) {
    const response = await this.request(method, path, options);
    if (response.status === 204) return null;
    return response.json();
  }

  /** Who the token belongs to: `{name}`. */
  me() {
    return this.json("GET", "api/me");
  }

  listChats() {
    return this.json("GET", "api/chats");
  }

  /** The signed-in person's chats matching `query`: `{results: [{chat, message_id, sequence_number, snippet}], next_cursor}`. */
  searchChats(query, { cursor = null, signal } = {}) {
    return this.json("GET", "api/search", { query: { q: query, cursor }, signal });
  }

  /** A new chat; `model` (an id of `listModels()`) is the model its runs use, by default the server's. */
  createChat(title, model = null) {
    const body = title ? { title } : {};
    if (model) body.model = model;
    return this.json("POST", "api/chats", { body });
  }

  /** The models a chat may use: `{models: [{id, label, default}]}`, the default first. */
  listModels() {
    return this.json("GET", "api/models");
  }

  /** Choose the chat's model (for its next runs); answers the chat. */
  setChatModel(chatId, model) {
    return this.json("PATCH", `api/chats/${encodeURIComponent(chatId)}`, { body: { model } });
  }

  getChat(chatId) {
    return this.json("GET", `api/chats/${encodeURIComponent(chatId)}`);
  }

  renameChat(chatId, title) {
    return this.json("PATCH", `api/chats/${encodeURIComponent(chatId)}`, { body: { title } });
  }

  deleteChat(chatId) {
    return this.json("DELETE", `api/chats/${encodeURIComponent(chatId)}`);
  }

  /**
   * The stored rows of the active branch (`after` a sequence number, when given) and how their runs ended:
   * `{messages: MessageRow[], runs: RunSummary[], leaf_id?}` (`runs` is empty from a server that does not send it).
   */
  async messages(chatId, after = null, signal) {
    const body = await this.json("GET", `api/chats/${encodeURIComponent(chatId)}/messages`, { query: { after }, signal });
    const history = { messages: body.messages, runs: Array.isArray(body.runs) ? body.runs : [] };
    if ("leaf_id" in body) history.leaf_id = body.leaf_id;
    return history;
  }

  /** Make the branch through `messageId` the chat's active one; answers that branch as `messages()` does. */
  switchLeaf(chatId, messageId, signal) {
    return this.json("PUT", `api/chats/${encodeURIComponent(chatId)}/leaf`, { body: { message_id: messageId }, signal });
  }

  /** Answer the turn of `messageId` again (regenerate, retry); the response is the new run's event stream. */
  regenerate(chatId, messageId, body, signal) {
    return this.request("POST", `api/chats/${encodeURIComponent(chatId)}/messages/${encodeURIComponent(messageId)}/regenerate`,
      { body, signal, accept: "text/event-stream" });
  }

  /** Start a run; the response is its event stream. */
  sendMessage(chatId, body, signal) {
    return this.request("POST", `api/chats/${encodeURIComponent(chatId)}/messages`, { body, signal, accept: "text/event-stream" });
  }

  /** Follow the chat's run after `cursor` (the whole current run when null); null when nothing is active (204). */
  async stream(chatId, cursor, signal) {
    const headers = cursor === null ? {} : { "Last-Event-ID": cursor };
    const response = await this.request("GET", `api/chats/${encodeURIComponent(chatId)}/stream`, { headers, signal, accept: "text/event-stream" });
    return response.status === 204 ? null : response;
  }

  cancel(chatId, runId) {
    return this.json("POST", `api/chats/${encodeURIComponent(chatId)}/runs/${encodeURIComponent(runId)}/cancel`);
  }

  /** Decide every waiting approval of the paused run; the response follows the resumed run. */
  decide(chatId, decisions, signal) {
    return this.request("POST", `api/chats/${encodeURIComponent(chatId)}/approvals`, { body: { decisions }, signal, accept: "text/event-stream" });
  }
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`.replace(" .", ".");
  try {
    const body = await response.json();
    if (body && typeof body.error === "object" && body.error !== null) {
      if (typeof body.error.code === "string") code = body.error.code;
      if (typeof body.error.message === "string" && body.error.message) message = body.error.message;
    }
  } catch {
    // not JSON: keep the status line
  }
  const retry = Number.parseFloat(response.headers.get("Retry-After") ?? "");
  return new ApiError(response.status, code, message, Number.isFinite(retry) ? retry : null);
}

/**
 * Read an event-stream response to its end, calling `onEvent(event, cursor)` for each frame's JSON.
 * `onEvent` returns true to stop reading (after `run_finished`). Resolves to true if it was stopped
 * that way, false if the body ended first (a dropped connection, or the server closing early).
 */
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let stopped = false;
  const parser = new SSEParser((frame) => {
    if (stopped) return;
    let event;
    try {
      event = JSON.parse(frame.data);
    } catch {
      return; // not an event of ours
    }
    if (event === null || typeof event !== "object" || typeof event.type !== "string") return;
    if (onEvent(event, frame.id) === true) stopped = true;
  });
  try {
    while (!stopped) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    if (stopped) reader.cancel().catch(() => {});
    else reader.releaseLock();
  }
  return stopped;
}
