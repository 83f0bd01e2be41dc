// One open chat: loads its history, follows its runs, and reconnects where it left off.
//
// Opening a chat (a page load, a reload, switching chats):
//   GET chat (title, an active run, a paused round) → GET messages (the stored rows) → when a run is
//   active, GET stream with no cursor, which replays that run from its first event. The reducer draws
//   the replayed run in place of its stored rows, so nothing shows twice and nothing is missing.
// Losing the connection mid-stream: GET stream with `Last-Event-ID` = the last cursor applied, again and
// again with growing pauses (sooner when the browser says it is back online). 204 means the run ended
// meanwhile: the rows it stored are fetched. 410 means the cursor is too old: the chat is loaded anew.
// Sending a message or a decision: the POST's own response is the stream; a POST that got no answer
// is sent again with the same client_message_id, which the server treats as the same message.
// While nothing is followed (and the page is visible), GET chat now and then: a run started elsewhere
// (another tab, another device) is followed from its first event, and rows stored meanwhile are fetched.

import { ApiError, readEvents } from "./api.js";
import { continuesBranch, cutBranch, isBranch, showBranch, turnOf } from "./branches.js";
import { emptyChat, reduce } from "./reducer.js";
import { activeRun, lastSequence, pendingApprovals } from "./selectors.js";

const RETRY_DELAYS_MS = [250, 1000, 2000, 4000, 8000, 15000];
const IDLE_CHECK_MS = 3000;

export class ChatSession {
  /**
   * @param {{api: import("./api.js").Api, chatId: string, onChange: (state: object) => void,
   *          now?: () => number, retryDelays?: number[]}} options
   */
  constructor({ api, chatId, onChange, onRefused = null, now = () => performance.now(), retryDelays = RETRY_DELAYS_MS,
    idleCheckMs = IDLE_CHECK_MS }) {
    this.api = api;
    // Called with the 401 of a token the server no longer takes (say, a server restarted with another
    // token): the page then asks for a token at once instead of reporting a failure on every retry.
    this.onRefused = onRefused;
    this.chatId = chatId;
    this.onChange = onChange;
    this.now = now;
    this.retryDelays = retryDelays;
    this.state = emptyChat(chatId);
    this.abort = new AbortController();
    this.following = null; // the promise of the stream being followed
    this.redrawAfterRun = false; // the branch was switched while a run went on
    this.wake = null; // resolves a pending reconnect pause early
    this.idleCheckMs = idleCheckMs;
    this.idleWake = null; // ends the idle pause early (the page became visible again)
    this.onOnline = () => this.wake?.();
    this.onVisible = () => {
      if (!globalThis.document?.hidden) this.idleWake?.();
    };
    globalThis.addEventListener?.("online", this.onOnline);
    globalThis.document?.addEventListener?.("visibilitychange", this.onVisible);
  }

  get closed() {
    return this.abort.signal.aborted;
  }

  /** Stop following and forget the chat (switching chats, deleting it). */
  close() {
    this.abort.abort();
    this.wake?.();
    this.idleWake?.();
    globalThis.removeEventListener?.("online", this.onOnline);
    globalThis.document?.removeEventListener?.("visibilitychange", this.onVisible);
  }

  dispatch(event, cursor = null) {
    if (this.closed) return;
    const next = reduce(this.state, event, { id: cursor, at: this.now() });
    if (next === this.state) return;
    this.state = next;
    this.onChange(next);
  }

  notice(message, level = "error") {
    this.dispatch({ type: "client_notice", level, message });
  }

  /** Say what went wrong, once; a refused token goes to `onRefused` instead. */
  report(error) {
    if (error instanceof ApiError && error.status === 401 && this.onRefused !== null) {
      this.onRefused(error);
      return;
    }
    this.notice(describe(error));
  }

  /** Load the chat and follow its active run, if any. Throws the ApiError of a chat that cannot be opened. */
  async open() {
    const asked = this.now();
    const chat = await this.api.getChat(this.chatId);
    if (this.closed) return;
    this.dispatch({ type: "client_chat", chat, requested_at: asked });
    this.dispatch({ type: "client_history", ...(await this.api.messages(this.chatId, null, this.abort.signal)) });
    this.watchIdle();
    if (chat.active_run) await this.follow(() => this.api.stream(this.chatId, null, this.abort.signal));
  }

  /** Until closed: while nothing is followed and the page is visible, look at the chat every few seconds. */
  async watchIdle() {
    while (!this.closed) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, this.idleCheckMs);
        this.idleWake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.idleWake = null;
      if (this.closed) return;
      if (this.following !== null || globalThis.document?.hidden) continue;
      try {
        await this.checkIdle();
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) {
          this.notice("This chat was deleted (perhaps in another tab). Pick another chat or start a new one.");
          return;
        }
        if (error instanceof ApiError && error.status === 401) {
          this.report(error);
          return;
        }
        // anything else is retried at the next look; following and sending report their own errors
      }
    }
  }

  /** One look at an idle chat: follow a run started elsewhere, fetch rows stored meanwhile. */
  async checkIdle() {
    const known = this.state.chat;
    const asked = this.now();
    const chat = await this.api.getChat(this.chatId);
    if (this.closed || this.following !== null) return;
    // While a run goes, the branch shown stays (a run on another branch is followed, not drawn): the page draws
    // the chat's active branch once the chat is idle again.
    if (known !== null && chat.updated_at !== known.updated_at) await this.fetchNewRows({ redraw: !chat.active_run });
    this.dispatch({ type: "client_chat", chat, requested_at: asked });
    if (chat.active_run && this.following === null && activeRun(this.state) === null) {
      this.follow(() => this.api.stream(this.chatId, null, this.abort.signal)).catch(() => {});
    }
  }

  /** Fetch what was stored since the last row this page has, and the chat's current state. */
  async catchUp() {
    try {
      await this.fetchNewRows();
      const asked = this.now();
      const chat = await this.api.getChat(this.chatId);
      this.dispatch({ type: "client_chat", chat, requested_at: asked });
    } catch (error) {
      if (!this.closed) this.report(error);
    }
  }

  /**
   * The rows stored since the last one shown. They are the active branch's: when they do not go on from the
   * branch shown (it was switched, in another tab or by an edit), the whole active branch is drawn instead
   * (unless `redraw` is false).
   */
  async fetchNewRows({ redraw = true } = {}) {
    const history = await this.api.messages(this.chatId, lastSequence(this.state), this.abort.signal);
    if (continuesBranch(this.state.rows, history)) this.dispatch({ type: "client_history", ...history });
    else if (redraw) await this.redrawBranch();
  }

  /** Draw the active branch whole, from its stored rows. */
  async redrawBranch() {
    this.replace(showBranch(this.state, await this.api.messages(this.chatId, null, this.abort.signal)));
  }

  /** Draw `next` as it is: a branch read whole, which no event says. */
  replace(next) {
    if (this.closed) return;
    this.state = next;
    this.onChange(next);
  }

  /**
   * Show the branch through `messageId` (a version switcher): the server makes it the active one and answers it.
   * A run going on keeps being followed: drawn live if it goes on from the branch now shown, else not drawn.
   */
  async switchBranch(messageId) {
    const running = activeRun(this.state) !== null;
    try {
      this.replace(showBranch(this.state, await this.api.switchLeaf(this.chatId, messageId, this.abort.signal)));
      // The rows of a run drawn live carry no switchers: once it ends, the branch is drawn from its stored rows.
      if (running) this.redrawAfterRun = true;
    } catch (error) {
      if (!this.closed) this.report(error);
    }
  }

  /** An edit: `text` as a new message under `parentId` (null: a new first message), beside the one it replaces. */
  edit(parentId, text) {
    const shown = this.state;
    this.replace(cutBranch(this.state, parentId));
    const clientMessageId = newId();
    this.dispatch({ type: "client_send", client_message_id: clientMessageId, text });
    const body = { client_message_id: clientMessageId, text, on_disconnect: "continue", parent_id: parentId ?? "root" };
    return this.followBranch(shown, () => this.api.sendMessage(this.chatId, body, this.abort.signal));
  }

  /** A new answer to the turn of `rowId` beside the earlier one (regenerate; retry after a failed run). */
  regenerate(rowId) {
    const turn = turnOf(this.state.rows, rowId);
    if (turn === null) return Promise.resolve(null);
    const shown = this.state;
    this.replace(cutBranch(this.state, turn.id));
    const body = { client_message_id: newId(), on_disconnect: "continue" };
    return this.followBranch(shown, () => this.api.regenerate(this.chatId, turn.id, body, this.abort.signal));
  }

  /** Follow a run that starts a branch, then draw the branch from its stored rows (their versions are known then). */
  async followBranch(shown, open) {
    const refused = await this.follow(open, { retryOpen: true });
    if (refused !== null) { // nothing started: the branch shown before comes back
      this.replace({ ...shown, notices: this.state.notices, noticeCount: this.state.noticeCount });
      this.report(refused);
      return refused;
    }
    try {
      this.replace(showBranch(this.state, await this.api.messages(this.chatId, null, this.abort.signal)));
    } catch (error) {
      if (!this.closed) this.report(error);
    }
    return null;
  }

  /**
   * Send a message. Resolves to null once the run was followed to its end (or handed to reconnection),
   * or to the ApiError that refused it (nothing was started: the caller gives the text back).
   */
  async send(text, files = []) {
    const clientMessageId = newId();
    this.dispatch({ type: "client_send", client_message_id: clientMessageId, text });
    const body = { client_message_id: clientMessageId, text, on_disconnect: "continue" };
    if (files.length > 0) body.files = files; // ids of files uploaded to this chat (attachments.js)
    const refused = await this.follow(() => this.api.sendMessage(this.chatId, body, this.abort.signal), { retryOpen: true });
    if (refused !== null) this.dispatch({ type: "client_send_failed", message: describe(refused) });
    return refused;
  }

  /** Record one decision; once every waiting call of the paused run is decided, send them all. */
  async decide(approvalId, approved, reason = null) {
    this.dispatch({ type: "client_decide", approval_id: approvalId, approved, reason });
    const waiting = pendingApprovals(this.state);
    if (waiting.some((card) => card.decision === null)) return null;
    const decisions = waiting.map((card) => {
      const decision = { approval_id: card.approvalId, approved: card.decision.approved };
      if (!card.decision.approved && card.decision.reason) decision.reason = card.decision.reason;
      return decision;
    });
    // Marked sent when the request really goes (after any follow still finishing): a GET chat asked
    // before that moment cannot know of the decisions and must not take them back.
    const refused = await this.follow(() => {
      this.dispatch({ type: "client_decisions_sent", approval_ids: decisions.map((d) => d.approval_id) });
      return this.api.decide(this.chatId, decisions, this.abort.signal);
    });
    if (refused !== null) {
      this.report(refused);
      for (const card of waiting) this.dispatch({ type: "client_decide", approval_id: card.approvalId, approved: null });
      await this.catchUp();
    }
    return refused;
  }

  /** Take back a decision not sent yet. */
  undecide(approvalId) {
    this.dispatch({ type: "client_decide", approval_id: approvalId, approved: null });
  }

  /** Ask the server to stop the active run; the stream then ends with run_finished{cancelled}. */
  async stop() {
    const run = activeRun(this.state);
    if (run === null) return;
    try {
      await this.api.cancel(this.chatId, run.id);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409) return; // it had just finished
      this.report(error);
    }
  }

  /**
   * Follow a stream opened by `open()`, reconnecting by cursor until the run finishes. Resolves to null,
   * or to the ApiError with which the first `open()` was refused.
   */
  async follow(open, { retryOpen = false } = {}) {
    while (this.following !== null) await this.following.catch(() => {});
    let done;
    this.following = new Promise((resolve) => {
      done = resolve;
    });
    try {
      return await this.followLoop(open, retryOpen);
    } finally {
      this.following = null;
      done();
    }
  }

  async followLoop(open, retryOpen) {
    let opener = open;
    let received = false; // whether this follow saw any event yet
    let attempt = 0;
    for (;;) {
      if (this.closed) return null;
      let response;
      try {
        response = await opener();
      } catch (error) {
        if (this.closed) return null;
        if (!(error instanceof ApiError)) throw error;
        if (error.status === 410) {
          // The cursor is older than what the server keeps: start again from the stored history.
          const chat = await this.reload();
          if (chat === null || !chat.active_run) return null;
          opener = () => this.api.stream(this.chatId, null, this.abort.signal);
          received = true;
          continue;
        }
        // A message refused for the user's rate (429) is given back with the reason, not sent later unseen.
        if (!error.transient || (retryOpen && error.status === 429 && !received && opener === open)) {
          if (!received && opener === open) return error;
          this.report(error);
          this.dispatch({ type: "client_connection", status: "idle" });
          return null;
        }
        if (!received && !retryOpen && opener === open) {
          // Decisions are not sent twice blindly: the stream of the chat tells whether they arrived.
          opener = () => this.api.stream(this.chatId, this.state.cursor, this.abort.signal);
        }
        attempt = await this.pause(attempt, error.retryAfter);
        continue;
      }
      if (response === null) {
        // 204: nothing (more) to follow. Whatever finished meanwhile is in the stored rows.
        this.dispatch({ type: "client_connection", status: "idle" });
        await this.catchUp();
        return null;
      }
      this.dispatch({ type: "client_connection", status: "live" });
      let finished = false;
      try {
        finished = await readEvents(response, (event, cursor) => {
          received = true;
          attempt = 0;
          this.dispatch(event, cursor);
          return event.type === "run_finished";
        });
      } catch {
        if (this.closed) return null;
      }
      if (finished) {
        this.dispatch({ type: "client_connection", status: "idle" });
        if (this.redrawAfterRun || !isBranch(this.state.rows)) {
          this.redrawAfterRun = false;
          await this.redrawBranch().catch((error) => this.closed || this.report(error));
        }
        if (this.state.runs.at(-1)?.status === "paused") await this.catchUp();
        return null;
      }
      // The body ended before run_finished: the connection dropped. Carry on from the last cursor.
      opener = () => this.api.stream(this.chatId, this.state.cursor, this.abort.signal);
      attempt = await this.pause(attempt, null);
    }
  }

  async pause(attempt, retryAfter) {
    this.dispatch({ type: "client_connection", status: "reconnecting" });
    const planned = this.retryDelays[Math.min(attempt, this.retryDelays.length - 1)];
    const delay = retryAfter === null ? planned : Math.max(planned, retryAfter * 1000);
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, delay);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = null;
    return attempt + 1;
  }

  /**
   * Forget everything but the notices and load the chat again; resolves to the chat, or null. A server that
   * cannot answer for now (restarting, busy, the network away) is asked again after a pause, as a stream is:
   * the page was emptied, so giving up would leave it blank.
   */
  async reload() {
    this.state = { ...emptyChat(this.chatId), notices: this.state.notices, noticeCount: this.state.noticeCount };
    this.onChange(this.state);
    let attempt = 0;
    for (;;) {
      try {
        const asked = this.now();
        const chat = await this.api.getChat(this.chatId);
        const history = await this.api.messages(this.chatId, null, this.abort.signal);
        this.dispatch({ type: "client_chat", chat, requested_at: asked });
        this.dispatch({ type: "client_history", ...history });
        return chat;
      } catch (error) {
        if (this.closed) return null;
        if (!(error instanceof ApiError) || !error.transient) {
          this.report(error);
          return null;
        }
        attempt = await this.pause(attempt, error.retryAfter);
        if (this.closed) return null;
      }
    }
  }
}

// The page's own sentences for what the server refuses: the server's are written for API clients (they
// name routes, headers and run ids); a person is told what happened and what to do, in the page's terms.
const PAGE_SENTENCES = {
  run_active: "This chat is still answering the last message. Wait for it to finish, or stop it, then send again.",
  run_paused: "This chat waits for your decision on a tool call. Approve or deny it, then send again.",
  not_paused: "This chat no longer waits for a decision; it was decided elsewhere.",
  approval_decided: "This tool call was already decided, perhaps in another tab.",
  client_message_id_reused: "This message was already sent.",
  chat_not_found: "This chat does not exist, or it is not yours. Pick another chat or start a new one.",
  run_not_found: "This answer is no longer running.",
  cursor_expired: "The chat moved on while the page was away; reload the page to see it.",
  server_busy: "The server is busy with other answers right now. Try again in a moment.",
  shutting_down: "The server is restarting. Try again in a moment.",
};

/** A sentence for the person from any failure. */
export function describe(error) {
  if (error instanceof ApiError) return PAGE_SENTENCES[error.code] ?? error.message;
  return `Something went wrong in the page: ${error?.message ?? error}. Reload the page to continue.`;
}

function newId() {
  if (globalThis.crypto?.randomUUID) {
    try {
      return globalThis.crypto.randomUUID(); // secure contexts only (https, localhost)
    } catch {
      // fall through
    }
  }
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
