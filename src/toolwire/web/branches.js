// Branches in the page: "‹ 2 / 3 ›" between the versions of a message, editing a sent message, regenerating
// the last answer and retrying a failed one (docs/guides/branches.md, "In the page").
//
// The page shows one branch of the chat's tree: `state.rows` are the rows from its root to its leaf, in order,
// each with `parent_id` and `sibling_ids` (GET .../messages). Every branch change goes through the server
// (PUT leaf, a message with `parent_id`, regenerate), and the page then draws the branch the server answers
// from its stored rows: the server's active leaf is the branch a reload shows.
//
// The page follows every run of the chat, whatever its branch: a run that goes on from another branch (a
// regenerate in another tab, or the shown branch switched while it runs) is followed but not drawn
// (`run.elsewhere`); its rows only add to the versions ("‹ 1 / 3 ›") of the shown rows they are siblings of, and
// switching to its branch draws it live.
//
// The functions on the state are pure (unit-tested in tests/web/js/branches.test.mjs); `BranchControls` puts
// the buttons on the drawn conversation after each draw, and asks its owner (app.js) to act.

/** Versions of a row: its position (1-based) among its siblings and their count; null when it has none. */
export function versionOf(row) {
  const siblings = Array.isArray(row.sibling_ids) ? row.sibling_ids : [];
  const index = siblings.indexOf(row.id);
  if (siblings.length < 2 || index < 0) return null;
  return { index: index + 1, count: siblings.length, previous: siblings[index - 1] ?? null, next: siblings[index + 1] ?? null };
}

function busy(state) {
  return state.runs.some((run) => run.status === "running" || run.status === "paused");
}

/**
 * The state showing `branch` (a GET .../messages or PUT .../leaf answer, read whole): its rows replace the
 * ones shown, so no row of another branch stays. Runs followed by this page are dropped (their rows are
 * stored now and drawn as such), unless one is still going: that one keeps drawing live.
 */
export function showBranch(state, branch) {
  const rows = [...(branch.messages ?? [])].sort((a, b) => a.sequence_number - b.sequence_number);
  const summaries = { ...state.summaries };
  for (const summary of branch.runs ?? []) if (summary && typeof summary.run_id === "string") summaries[summary.run_id] = summary;
  const keep = busy(state);
  const runs = keep ? state.runs.map((run) => placed(run, rows)) : [];
  return { ...state, rows, summaries, runs, where: keep ? state.where : {} };
}

/** `run`, marked as going on from the branch `rows` or elsewhere. */
function placed(run, rows) {
  const shown = run.rowIds.some((id) => rows.some((row) => row.id === id))
    || extendsShown(rows, run.id, run.leafId ?? null, run.userRow ?? null);
  return shown === !run.elsewhere ? run : { ...run, elsewhere: !shown };
}

/**
 * Whether a run that extends the row `leafId` (run_started's `leaf_id`; `userRow`: the message it stored, if any)
 * goes on from the branch shown in `rows`: the row it extends is shown, and every shown row after it is the run's
 * own. Yes when the server names no leaf (a server without branches).
 */
export function extendsShown(rows, runId, leafId, userRow = null) {
  if (leafId === null || leafId === undefined) return true;
  let anchor = leafId;
  if (!rows.some((row) => row.id === leafId)) {
    if (userRow === null || userRow.id !== leafId) return false; // it extends a row of another branch
    anchor = userRow.parent_id ?? null; // a new message: it goes on from its parent
  }
  const start = anchor === null ? 0 : rows.findIndex((row) => row.id === anchor) + 1;
  if (anchor !== null && start === 0) return false;
  return rows.slice(start).every((row) => row.run_id === runId);
}

/** `rows` with `row`, stored on a branch not shown, counted among the versions of the shown row beside it. */
export function withSibling(rows, row) {
  if (!("parent_id" in row)) return rows;
  const parent = row.parent_id ?? null;
  const at = rows.findIndex((shown) => (shown.parent_id ?? null) === parent);
  if (at < 0 || rows[at].id === row.id) return rows;
  const siblings = Array.isArray(rows[at].sibling_ids) ? rows[at].sibling_ids : [rows[at].id];
  if (siblings.includes(row.id)) return rows;
  return replaceRow(rows, at, { ...rows[at], sibling_ids: [...siblings, row.id] });
}

function replaceRow(rows, index, row) {
  const copy = rows.slice();
  copy[index] = row;
  return copy;
}

/** The state shown while a new branch starts under `parentId` (null: a new first message): the rows up to it. */
export function cutBranch(state, parentId) {
  const end = parentId === null ? -1 : state.rows.findIndex((row) => row.id === parentId);
  return { ...state, rows: state.rows.slice(0, end + 1), runs: [], where: {} };
}

/** Whether rows fetched with `?after=` go on from the last row shown (else the active branch changed). */
export function continuesBranch(rows, history) {
  let last = rows.length === 0 ? null : rows[rows.length - 1].id;
  for (const row of history.messages ?? []) {
    if (!("parent_id" in row)) return true; // a server without branches: every row follows the one before
    if (row.parent_id !== last) return false;
    last = row.id;
  }
  return !("leaf_id" in history) || history.leaf_id === last;
}

/** Whether `rows` are one branch: each row under the one before it. */
export function isBranch(rows) {
  return rows.every((row, i) => !("parent_id" in row) || row.parent_id === (i === 0 ? null : rows[i - 1].id));
}

/** The user message of the turn that `rowId` belongs to (the row itself, or the nearest user row before it). */
export function turnOf(rows, rowId) {
  const end = rows.findIndex((row) => row.id === rowId);
  for (let i = end; i >= 0; i -= 1) if (rows[i].kind === "user") return rows[i];
  return null;
}

/**
 * What the end of the branch offers: "retry" after a failed run, "regenerate" after an answer, or null (nothing
 * stored yet, a run going or waiting, a message being sent). `rowId` is the row to regenerate from.
 */
export function lastTurnAction(state) {
  if (busy(state) || state.outbox !== null || state.rows.length === 0) return null;
  const last = state.rows[state.rows.length - 1];
  const run = state.runs.findLast((r) => r.id === last.run_id || r.rowIds?.includes(last.id));
  const status = run?.status ?? (last.run_id === null ? null : state.summaries[last.run_id]?.status ?? null);
  if (status === "failed") return { action: "retry", rowId: last.id };
  if (last.kind === "user") return null;
  return { action: "regenerate", rowId: last.id };
}

function button(label, className, onClick, text = null) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = className;
  node.setAttribute("aria-label", label);
  if (text !== label) node.title = label; // a tooltip where the visible label is shorter than the name
  if (text !== null) node.dataset.label = text; // drawn by style.css: the conversation's text stays the messages'
  node.addEventListener("click", onClick);
  return node;
}

/**
 * The branch buttons on a drawn conversation. `draw(state, view)` after each draw of the ConversationView:
 * switchers on rows with versions, a pencil on user messages, Regenerate or Retry after the last turn.
 */
export class BranchControls {
  /**
   * @param {HTMLElement} root the conversation container (the view's root)
   * @param {{onSwitch: (rowId: string) => void, onEdit: (row: object, text: string) => void,
   *          onRegenerate: (rowId: string) => void}} actions
   */
  constructor(root, actions) {
    this.root = root;
    this.actions = actions;
    this.editing = null; // the id of the user row whose editor is open
    this.draft = null; // the text of an edit the server refused, shown again in the editor
    this.bar = document.createElement("div");
    this.bar.className = "turn-actions";
    this.state = null;
    this.view = null;
  }

  draw(state, view) {
    this.state = state;
    this.view = view;
    // Editing waits for the run going (the server would refuse it); switching waits only for a message being sent.
    const sending = state.outbox !== null;
    const locked = busy(state) || sending;
    for (const row of state.rows) {
      const node = this.nodeOf(row);
      if (node !== null) this.decorate(node, row, locked, sending);
    }
    for (const run of state.runs) {
      if (run.userRow) {
        const node = view.itemNodes.get(`run:${run.id}`)?.node.querySelector(".run-user .user-message") ?? null;
        if (node !== null) this.decorate(node, run.userRow, locked, sending);
      }
    }
    const end = lastTurnAction(state);
    const key = end === null ? "" : `${end.action}:${end.rowId}`;
    if (this.bar.dataset.key !== key) {
      this.bar.dataset.key = key;
      this.bar.replaceChildren(...(end === null ? [] : [end.action === "retry"
        ? button("Retry", "branch-retry", () => this.actions.onRegenerate(end.rowId), "Retry")
        : button("Regenerate answer", "branch-regenerate", () => this.actions.onRegenerate(end.rowId), "Regenerate")]));
    }
    const notices = this.root.querySelector(".notices");
    if (this.bar.parentNode !== this.root || this.bar.nextSibling !== notices) this.root.insertBefore(this.bar, notices);
  }

  /** The drawn node of a stored row (a user bubble, or an answer's step), or null when a run draws it. */
  nodeOf(row) {
    return this.view.itemNodes.get(`row:${row.id}`)?.node ?? null;
  }

  decorate(node, row, locked, sending) {
    const version = versionOf(row);
    const user = row.kind === "user";
    const key = `${row.sibling_ids?.join(",")}|${locked}|${sending}|${this.editing === row.id}`;
    if (node.dataset.branchKey === key) return;
    node.dataset.branchKey = key;
    node.dataset.rowId = row.id;
    let bar = node.querySelector(":scope > .branch-actions");
    if (bar === null) {
      bar = document.createElement("div");
      bar.className = "branch-actions";
      node.append(bar);
    }
    const items = [];
    if (version !== null) {
      const nav = document.createElement("nav");
      nav.className = "versions";
      nav.setAttribute("aria-label", user ? "Versions of this message" : "Versions of this answer");
      const previous = button("Previous version", "version-previous", () => this.actions.onSwitch(version.previous), "‹");
      const next = button("Next version", "version-next", () => this.actions.onSwitch(version.next), "›");
      previous.disabled = sending || version.previous === null;
      next.disabled = sending || version.next === null;
      const position = document.createElement("span");
      position.className = "version-position";
      position.dataset.label = `${version.index} / ${version.count}`;
      position.setAttribute("role", "status");
      position.setAttribute("aria-label", `Version ${version.index} of ${version.count}`);
      nav.append(previous, position, next);
      items.push(nav);
    }
    if (user) {
      const edit = button("Edit message", "edit-message", () => {
        this.draft = null;
        this.openEditor(row);
      }, "Edit");
      edit.disabled = locked;
      items.push(edit);
    }
    bar.replaceChildren(...items);
    node.querySelector(":scope > .message-editor")?.remove();
    node.classList.toggle("editing", this.editing === row.id);
    if (this.editing === row.id) node.append(this.editor(row));
  }

  openEditor(row) {
    this.editing = row.id;
    this.redraw();
    this.root.querySelector(".message-editor textarea")?.focus();
  }

  closeEditor() {
    this.editing = null;
    this.draft = null;
    this.redraw();
  }

  redraw() {
    for (const node of this.root.querySelectorAll("[data-branch-key]")) delete node.dataset.branchKey;
    if (this.state !== null) this.draw(this.state, this.view);
  }

  editor(row) {
    const form = document.createElement("form");
    form.className = "message-editor";
    const box = document.createElement("textarea");
    box.setAttribute("aria-label", "Edited message");
    box.rows = 3;
    box.value = this.draft ?? (row.messages?.[0]?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");
    const save = document.createElement("button");
    save.type = "submit";
    save.className = "primary";
    save.textContent = "Save";
    const cancel = button("Cancel", "secondary", () => this.closeEditor());
    cancel.textContent = "Cancel";
    form.append(box, save, cancel);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = box.value;
      if (text.trim() === "") return;
      this.editing = null;
      this.draft = null;
      // Refused (nothing was stored): the editor opens again with the text, which is not lost.
      Promise.resolve(this.actions.onEdit(row, text)).then((refused) => {
        if (refused == null || this.state === null || !this.state.rows.some((r) => r.id === row.id)) return;
        this.draft = text;
        this.openEditor(row);
      });
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.closeEditor();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    return form;
  }
}
