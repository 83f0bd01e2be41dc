// The page: the access token, the chat list, the open chat and the message box.
//
// The token comes from the address's fragment (`#token=...`, as `toolwire serve` prints it), is kept in
// localStorage under `toolwire.token`, and is removed from the address bar at once. A token in the address
// never silently replaces a stored one of another user: a link made by someone else would otherwise sign
// the person into that someone's account, where their next message would land (login CSRF). The page asks
// first, in the page as deleting a chat does (a window.confirm would block the page and cannot say which
// button is the safe one), and always shows who is signed in (`GET api/me`). The open chat is
// kept in the fragment (`#chat=<id>`), so a reload reopens it and follows its run where it is.
// Every request resolves `api/...` against the page's own address, so the page also works when a
// proxy serves it under a path prefix.

import { Attachments, setFileSource } from "./attachments.js";
import { Api, ApiError } from "./api.js";
import { BranchControls } from "./branches.js";
import { warmUpMarkdown } from "./markdown.js";
import { ModelPicker } from "./models.js";
import { ConversationView } from "./render.js";
import { ChatSearch } from "./search.js";
import { activeRun, pendingApprovals } from "./selectors.js";
import { ChatSession, describe } from "./session.js";
import { bindThemeButton } from "./theme.js";

export const TOKEN_KEY = "toolwire.token";
const TITLE_LENGTH = 60;
const MAX_TITLE = 500; // the server's default title limit (Limits.max_title_chars); a lower one is said by its 422

/** Take a `#token=` out of the address: the stored token, and the one the address offered (not stored yet). */
export function takeToken(win = window) {
  const params = new URLSearchParams(win.location.hash.slice(1));
  const offered = params.get("token") || null;
  if (offered) {
    params.delete("token");
    const rest = params.toString();
    win.history.replaceState(null, "", `${win.location.pathname}${win.location.search}${rest ? `#${rest}` : ""}`);
  }
  return { stored: win.localStorage.getItem(TOKEN_KEY), offered };
}

function chatIdFromAddress(win = window) {
  return new URLSearchParams(win.location.hash.slice(1)).get("chat");
}

/** A chat title from the first line of the first message. */
export function titleFrom(text) {
  const line = text.trim().split("\n")[0].trim();
  return line.length > TITLE_LENGTH ? `${line.slice(0, TITLE_LENGTH - 1)}…` : line;
}

class App {
  constructor(doc) {
    this.doc = doc;
    const $ = (id) => doc.getElementById(id);
    this.ui = {
      app: $("app"), login: $("login"), loginForm: $("login-form"), loginToken: $("login-token"), loginMessage: $("login-message"),
      sidebar: $("sidebar"), menu: $("menu"), newChat: $("new-chat"), chatList: $("chat-list"), listMessage: $("list-message"),
      title: $("chat-title"), connection: $("connection"), conversation: $("conversation"), empty: $("empty"),
      signedIn: $("signed-in"), switchBox: $("switch"), switchMessage: $("switch-message"), switchYes: $("switch-yes"),
      switchNo: $("switch-no"), search: $("search"), searchResults: $("search-results"), searchStatus: $("search-status"),
      composer: $("composer"), message: $("message"), send: $("send"), stop: $("stop"), composerHint: $("composer-hint"),
      rename: $("rename"), renameForm: $("rename-form"), renameTitle: $("rename-title"), renameCancel: $("rename-cancel"),
      theme: $("theme"), suggestions: $("suggestions"), modelPicker: $("model-picker"), model: $("model"),
    };
    this.api = null;
    this.attachments = new Attachments(doc, this.ui.composer, this.ui.message);
    this.models = new ModelPicker(this.ui.modelPicker, this.ui.model, { onError: (error) => this.fail(error, this.ui.composerHint) });
    this.session = null;
    this.view = null;
    this.chats = [];
    this.confirming = null; // the chat id whose delete button asks for confirmation
    this.running = null; // the id of the open chat's run being followed
    this.who = Promise.resolve(null); // the signed-in user's name (`api/me`), once known
    this.onSwitchYes = null; // what the question box's first button does
  }

  start() {
    bindThemeButton(this.ui.theme);
    this.bind();
    this.takeAddressToken();
    warmUpMarkdown(this.doc); // while the first requests are out: the first chat opened draws faster
  }

  /** At start, and whenever the address gets a `#token=` (a link opened in this tab). */
  takeAddressToken() {
    const { stored, offered } = takeToken();
    if (offered && stored && offered !== stored) {
      if (this.api === null) this.signIn(stored);
      else this.route();
      this.offerSwitch(offered);
      return;
    }
    if (offered) localStorage.setItem(TOKEN_KEY, offered);
    const token = offered ?? stored;
    if (!token) {
      this.showLogin("This page needs the access token that `toolwire serve` printed. Open the URL it printed, or paste the token here.");
      return;
    }
    if (this.api?.token === token && !this.ui.app.hidden) this.route();
    else this.signIn(token);
  }

  signIn(token) {
    this.api = new Api({ base: this.doc.baseURI, token });
    setFileSource(this.api);
    this.ui.login.hidden = true;
    this.ui.app.hidden = false;
    this.ui.signedIn.textContent = "";
    this.search.clear(); // another person's results must not stay on screen
    this.who = this.showWho(this.api);
    this.models.load(this.api);
    this.refreshChats();
    this.route();
  }

  /** Show who the token belongs to; the user's name, or null when the server did not say. */
  async showWho(api) {
    try {
      const { name, suggestions } = await api.me();
      if (api === this.api) {
        this.ui.signedIn.textContent = `Signed in as ${name}`;
        this.ui.signedIn.title = `Signed in as ${name}`; // the whole name, where a phone cuts it short
        this.showSuggestions(Array.isArray(suggestions) ? suggestions : []);
      }
      return name;
    } catch (error) {
      if (api === this.api && error instanceof ApiError && error.status === 401) this.fail(error);
      return null; // a server without `api/me` works all the same
    }
  }

  /** The address offered another token than the stored one: ask before signing in as someone else. */
  async offerSwitch(offered) {
    const { ui } = this;
    const current = await this.who;
    let name;
    try {
      ({ name } = await new Api({ base: this.doc.baseURI, token: offered }).me());
    } catch (error) {
      this.ask(`The address you opened carried an access token that did not work (${describe(error)}) You are still ${current ? `signed in as ${current}` : "signed in"}.`, null);
      return;
    }
    if (current === null || current === name) {
      this.switchTo(offered); // the same person (another of their tokens), or no one signed in to protect
      return;
    }
    this.ask(`The address you opened signs in as ${name}. You are signed in as ${current}: your chats and messages stay in ${current}'s account unless you switch.`,
      { yes: `Switch to ${name}`, no: `Stay ${current}`, onYes: () => this.switchTo(offered) });
    ui.switchNo.focus();
  }

  /** Show the question box: a message, and either two choices or (choices null) one button that closes it. */
  ask(message, choices) {
    const { ui } = this;
    ui.switchMessage.textContent = message;
    ui.switchYes.hidden = choices === null;
    ui.switchNo.textContent = choices === null ? "OK" : choices.no;
    if (choices !== null) ui.switchYes.textContent = choices.yes;
    this.onSwitchYes = choices?.onYes ?? null;
    ui.switchBox.hidden = false;
  }

  switchTo(token) {
    this.ui.switchBox.hidden = true;
    localStorage.setItem(TOKEN_KEY, token);
    this.closeChat();
    this.signIn(token);
  }

  showLogin(message) {
    this.closeChat();
    this.ui.app.hidden = true;
    this.ui.login.hidden = false;
    this.ui.loginMessage.textContent = message;
    this.ui.loginToken.focus();
  }

  /** A failure anywhere: a refused token shows the sign-in form, anything else a notice. */
  fail(error, where = null) {
    if (error instanceof ApiError && error.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      this.showLogin(`${error.message} Paste a valid token to continue.`);
      return;
    }
    if (this.session !== null) this.session.notice(describe(error));
    else if (where !== null) where.textContent = describe(error);
  }

  bind() {
    const { ui } = this;
    ui.loginForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const token = ui.loginToken.value.trim();
      if (!token) return;
      localStorage.setItem(TOKEN_KEY, token);
      ui.loginToken.value = "";
      this.signIn(token);
    });
    ui.switchYes.addEventListener("click", () => this.onSwitchYes?.());
    ui.switchNo.addEventListener("click", () => {
      ui.switchBox.hidden = true;
      ui.message.focus();
    });
    this.search = new ChatSearch({ doc: this.doc, input: ui.search, results: ui.searchResults, list: ui.chatList,
      status: ui.searchStatus, api: () => this.api, onError: (error) => this.fail(error, ui.searchStatus) });
    ui.searchResults.addEventListener("click", (event) => {
      if (event.target.closest(".chat-link")) this.toggleSidebar(false);
    });
    ui.newChat.addEventListener("click", () => this.newChat());
    ui.rename.addEventListener("click", () => this.startRename());
    ui.renameCancel.addEventListener("click", () => this.endRename());
    ui.renameForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.rename();
    });
    ui.renameTitle.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.endRename();
      }
    });
    ui.menu.addEventListener("click", () => this.toggleSidebar());
    // Picking a chat closes the list on a phone, even the chat already open (no hashchange then).
    ui.chatList.addEventListener("click", (event) => {
      if (event.target.closest(".chat-link")) this.toggleSidebar(false);
    });
    ui.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    ui.message.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      } else if (event.key === "Escape" && this.session && activeRun(this.session.state)) {
        event.preventDefault();
        this.session.stop();
      }
    });
    ui.message.addEventListener("input", () => this.fitMessageBox());
    ui.stop.addEventListener("click", () => this.session?.stop());
    window.addEventListener("hashchange", () => {
      if (new URLSearchParams(location.hash.slice(1)).has("token")) this.takeAddressToken();
      else this.route();
    });
    // Chats made or renamed in another tab show up when this one is looked at again.
    this.doc.addEventListener("visibilitychange", () => {
      if (!this.doc.hidden && this.api !== null && !this.ui.app.hidden) this.refreshChats();
    });
  }

  toggleSidebar(open = !this.ui.app.classList.contains("sidebar-open")) {
    this.ui.app.classList.toggle("sidebar-open", open);
    this.ui.menu.setAttribute("aria-expanded", String(open));
  }

  fitMessageBox() {
    const box = this.ui.message;
    box.style.height = "auto";
    box.style.height = `${Math.min(box.scrollHeight, 240)}px`;
  }

  // ---- the chat list

  async refreshChats() {
    try {
      const body = await this.api.listChats();
      this.chats = body.chats;
      this.ui.listMessage.textContent = this.chats.length === 0 ? "No chats yet." : "";
      this.drawChats();
    } catch (error) {
      this.fail(error, this.ui.listMessage);
    }
  }

  drawChats() {
    const current = this.session?.chatId ?? null;
    const items = this.chats.map((chat) => {
      const li = this.doc.createElement("li");
      li.className = "chat-item";
      li.dataset.chatId = chat.id;
      const open = this.doc.createElement("a");
      open.className = "chat-link";
      open.href = `./#chat=${encodeURIComponent(chat.id)}`; // "./": a chat, not a skip link to an element (axe)
      open.textContent = chat.title || "New chat";
      if (chat.id === current) open.setAttribute("aria-current", "page");
      li.append(open);
      if (this.confirming === chat.id) {
        const yes = this.button("Delete", "danger", () => this.deleteChat(chat.id));
        yes.setAttribute("aria-label", `Delete ${chat.title || "this chat"} for good`);
        const no = this.button("Keep", "secondary", () => {
          this.confirming = null;
          this.drawChats();
        });
        li.append(yes, no);
        queueMicrotask(() => yes.focus());
      } else {
        const del = this.button("×", "delete", () => {
          this.confirming = chat.id;
          this.drawChats();
        });
        del.setAttribute("aria-label", `Delete chat ${chat.title || ""}`.trim());
        del.title = "Delete chat";
        li.append(del);
      }
      return li;
    });
    this.ui.chatList.replaceChildren(...items);
  }

  button(text, className, onClick) {
    const button = this.doc.createElement("button");
    button.type = "button";
    button.className = className;
    button.textContent = text;
    button.addEventListener("click", onClick);
    return button;
  }

  /** "New chat": the empty page, ready for a first message; the chat itself is made when that is sent. */
  newChat() {
    this.go(null);
    this.toggleSidebar(false);
    this.ui.message.focus();
  }

  async createChat(title = null) {
    try {
      const chat = await this.api.createChat(title, this.models.choice());
      this.chats = [chat, ...this.chats.filter((c) => c.id !== chat.id)];
      this.ui.listMessage.textContent = "";
      this.drawChats();
      this.go(chat.id);
      return chat;
    } catch (error) {
      this.fail(error, this.ui.listMessage);
      return null;
    }
  }

  async deleteChat(chatId) {
    this.confirming = null;
    try {
      await this.api.deleteChat(chatId);
      this.chats = this.chats.filter((c) => c.id !== chatId);
      if (this.chats.length === 0) this.ui.listMessage.textContent = "No chats yet.";
      if (this.session?.chatId === chatId) this.go(null);
      this.drawChats();
    } catch (error) {
      this.fail(error, this.ui.listMessage);
      this.drawChats();
    }
  }

  // ---- the open chat

  go(chatId) {
    const hash = chatId === null ? "" : `#chat=${encodeURIComponent(chatId)}`;
    if (location.hash !== hash) {
      history.pushState(null, "", `${location.pathname}${location.search}${hash}`);
    }
    this.route();
  }

  route() {
    if (this.api === null) return;
    const chatId = chatIdFromAddress();
    if (chatId === (this.session?.chatId ?? null)) return;
    this.toggleSidebar(false);
    if (chatId === null) {
      this.closeChat();
      return;
    }
    this.openChat(chatId);
  }

  closeChat() {
    this.running = null;
    this.session?.close();
    this.view?.destroy();
    this.session = null;
    this.view = null;
    this.ui.conversation.replaceChildren();
    this.ui.empty.hidden = false;
    this.ui.title.textContent = "toolwire";
    this.doc.title = "toolwire";
    this.endRename();
    this.ui.rename.hidden = true;
    this.models.show(null, null); // a new chat starts on the default model, unless another is picked
    this.updateControls(null);
    this.drawChats();
  }

  openChat(chatId) {
    this.closeChat();
    this.ui.empty.hidden = true;
    const session = new ChatSession({ api: this.api, chatId, onChange: (state) => this.onState(session, state),
      onRefused: (error) => this.fail(error) });
    this.session = session;
    this.view = new ConversationView(this.ui.conversation, {
      onDecide: (approvalId, approved, reason) => session.decide(approvalId, approved, reason).catch((e) => this.fail(e)),
      onUndecide: (approvalId) => session.undecide(approvalId),
      onDismiss: (id) => session.dispatch({ type: "client_dismiss", id }),
    });
    this.branches = new BranchControls(this.ui.conversation, {
      onSwitch: (rowId) => session.switchBranch(rowId),
      onEdit: (row, text) => session.edit(row.parent_id ?? null, text),
      onRegenerate: (rowId) => session.regenerate(rowId),
    });
    this.drawChats();
    this.ui.title.textContent = this.chats.find((c) => c.id === chatId)?.title || "Chat";
    this.ui.rename.hidden = false;
    this.ui.message.focus();
    session.open().catch((error) => {
      if (error instanceof ApiError && error.status === 404) {
        session.notice("This chat does not exist, or it is not yours. Pick another chat or start a new one.");
      } else {
        this.fail(error);
      }
    });
  }

  onState(session, state) {
    if (session !== this.session) return;
    this.view.update(state);
    this.branches.draw(state, this.view);
    // A run that ends changes the list (its chat moves to the top; a chat untitled until then has a title).
    const running = activeRun(state)?.id ?? null;
    if (this.running !== null && running === null) this.refreshChats();
    this.running = running;
    // The last event drawn (tests wait on it; a person never sees it).
    this.ui.conversation.dataset.cursor = state.cursor ?? "";
    // The chat's model once its GET answered; later changes are the picker's own (stored as they are made).
    if (state.chat && this.models.chatId !== session.chatId) this.models.show(session.chatId, state.chat.model ?? null);
    if (state.chat) {
      // The list is fetched again after every run and rename; the chat itself only when it is opened.
      const listed = this.chats.find((c) => c.id === session.chatId)?.title;
      this.showTitle(listed || state.chat.title || "New chat");
    }
    this.updateControls(state);
  }

  /** The open chat's title, in the top bar and the browser's tab. */
  showTitle(title) {
    this.ui.title.textContent = title;
    this.doc.title = `${title} · toolwire`;
  }

  updateControls(state) {
    const { ui } = this;
    const running = state !== null && activeRun(state) !== null;
    const waiting = state !== null && pendingApprovals(state).length > 0;
    ui.stop.hidden = !running;
    ui.send.hidden = running;
    ui.send.disabled = waiting;
    ui.composerHint.textContent = waiting ? "Approve or deny the waiting tool calls to go on."
      : running ? "Working… Esc or Stop cancels." : "Enter sends · Shift+Enter starts a new line";
    const connection = state?.connection ?? "idle";
    ui.connection.textContent = connection === "reconnecting" ? "Reconnecting…" : "";
    ui.connection.dataset.state = connection;
  }

  async send() {
    const { ui } = this;
    const text = ui.message.value;
    if (text.trim() === "") return;
    const state = this.session?.state ?? null;
    if (state !== null && (activeRun(state) !== null || pendingApprovals(state).length > 0)) return;
    ui.message.value = "";
    this.fitMessageBox();
    let session = this.session;
    if (session === null) {
      const chat = await this.createChat(titleFrom(text));
      if (chat === null) {
        ui.message.value = text;
        return;
      }
      session = this.session;
    } else if (session.state.chat !== null && !session.state.chat.title && session.state.rows.length === 0) {
      // Only a chat known to be untitled (its GET answered): one typed into before that keeps its title.
      this.nameChat(session.chatId, titleFrom(text));
    }
    let files = [];
    if (this.attachments.count > 0) {
      files = await this.attachments.uploadAll(this.api, session.chatId);
      if (files instanceof Error) { // the files stay in the composer with their error; the text comes back
        if (ui.message.value === "") ui.message.value = text;
        return;
      }
      this.attachments.clear();
    }
    const refused = await session.send(text, files);
    if (refused !== null && ui.message.value === "") {
      ui.message.value = text; // nothing was sent: the text is not lost
      this.fitMessageBox();
    }
    if (refused instanceof ApiError && refused.status === 401) this.fail(refused);
  }

  /** The prompts the server suggests, as buttons in the empty page; a click sends one into a new chat. */
  showSuggestions(prompts) {
    const items = prompts.map((prompt) => {
      const li = this.doc.createElement("li");
      li.append(this.button(prompt, "suggestion", () => {
        if (this.session !== null) return;
        this.ui.message.value = prompt;
        this.send();
      }));
      return li;
    });
    this.ui.suggestions.replaceChildren(...items);
    this.ui.suggestions.hidden = items.length === 0;
  }

  startRename() {
    const { ui } = this;
    if (this.session === null) return;
    ui.renameTitle.value = this.session.state.chat?.title || this.chats.find((c) => c.id === this.session.chatId)?.title || "";
    ui.renameTitle.maxLength = MAX_TITLE;
    ui.title.hidden = true;
    ui.rename.hidden = true;
    ui.renameForm.hidden = false;
    ui.renameTitle.focus();
    ui.renameTitle.select();
  }

  endRename() {
    const { ui } = this;
    if (ui.renameForm.hidden) return;
    ui.renameForm.hidden = true;
    ui.title.hidden = false;
    ui.rename.hidden = this.session === null;
  }

  async rename() {
    const session = this.session;
    const title = this.ui.renameTitle.value.trim();
    if (session === null) return;
    if (title === "") {
      this.ui.renameTitle.setCustomValidity("A chat needs a title.");
      this.ui.renameTitle.reportValidity();
      return;
    }
    this.ui.renameTitle.setCustomValidity("");
    this.endRename();
    try {
      const chat = await this.api.renameChat(session.chatId, title);
      this.chats = this.chats.map((c) => (c.id === chat.id ? chat : c));
      this.drawChats();
      if (session === this.session) this.showTitle(chat.title || "New chat");
    } catch (error) {
      this.fail(error);
    }
  }

  async nameChat(chatId, title) {
    try {
      const chat = await this.api.renameChat(chatId, title);
      this.chats = this.chats.map((c) => (c.id === chatId ? chat : c));
      this.drawChats();
    } catch {
      // a missing title is cosmetic: the chat works without one
    }
  }
}

if (typeof document !== "undefined" && document.getElementById("app")) {
  new App(document).start();
}
