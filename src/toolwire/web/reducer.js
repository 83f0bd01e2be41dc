// The chat state and the pure reducer that folds the server's event stream into it.
//
// `reduce(state, event, meta)` returns a new state and never touches its input: whatever did not change
// is shared with the previous state, so the renderer finds what to redraw by comparing objects (`===`).
// No DOM, no clock, no I/O: the receive time comes in `meta.at`, so the module runs under Node as it is.
//
// One vocabulary from the wire to the screen: the events are the server's (run_started, text_delta,
// tool_call_start, tool_result, message_saved, run_finished, ...). The page adds a few actions of its own,
// all named `client_*` (history loaded, message sent, decision taken, connection state, notices).
//
// Invariants:
// - A tool call is one card, found by its call id wherever it is. Whatever order events arrive in (a
//   result before its call finished streaming, a resumed run answering the calls of a paused one), each
//   event updates that one card. A card never goes back: a result is final, and an invalid call stays
//   invalid (it is never shown as executing).
// - A committed row (`message_saved`, `GET /messages`) is the truth for its step: whatever the live
//   stream missed (a resumed run replays only its own events) is filled in from the row.
// - An event whose cursor is not after the last one applied is ignored, so a replayed stream never
//   duplicates text or cards.

import { extendsShown, withSibling } from "./branches.js";
import {
  CardStatus, FINAL, addCardToStep, advance, callsOf, closeOpenCards, completedCall, newCard, newStep, pick, replaceAt,
  resultOf, stepFromMessages, storedCallIds, withResult,
} from "./cards.js";

/** The state of one chat, before anything is known. */
export function emptyChat(chatId = null) {
  return {
    chatId,
    chat: null, // Chat / ChatDetail as last fetched
    rows: [], // committed MessageRows, in sequence_number order
    summaries: {}, // run id -> how that run of the stored rows ended (GET messages' `runs`)
    runs: [], // runs known from events (or a paused run from GET chat), in the order they became known
    where: {}, // call id -> [run index, step index]
    cursor: null, // the last event id applied
    outbox: null, // {client_message_id, text} sent, not yet confirmed by run_started
    notices: [], // client-side problems: {id, level, message}
    connection: "idle", // idle | live | reconnecting
    noticeCount: 0,
  };
}

/** Compare two cursors `<run_number>-<index>` numerically; null sorts first. */
export function compareCursors(a, b) {
  if (a === b) return 0;
  if (a == null) return -1;
  if (b == null) return 1;
  const [ra, ia] = splitCursor(a);
  const [rb, ib] = splitCursor(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  if (ia !== ib) return ia < ib ? -1 : 1;
  return 0;
}

function splitCursor(cursor) {
  const dash = cursor.indexOf("-");
  if (dash < 0) return [Number(cursor), 0];
  return [Number(cursor.slice(0, dash)), Number(cursor.slice(dash + 1))];
}

/**
 * Fold one event (a server event or a `client_*` action) into the chat state.
 * @param {object} state from `emptyChat` or a previous `reduce`
 * @param {object} event the event's JSON
 * @param {{id?: string|null, at?: number}} [meta] the SSE cursor of the event and its receive time (ms)
 */
export function reduce(state, event, meta = {}) {
  const handler = HANDLERS[event.type];
  if (handler === undefined) return state; // unknown events are ignored (the vocabulary may grow)
  const id = meta.id ?? null;
  if (id !== null && state.cursor !== null && compareCursors(id, state.cursor) <= 0) return state;
  const next = handler(state, event, meta.at ?? 0);
  if (id === null) return next;
  return next === state ? { ...state, cursor: id } : { ...next, cursor: id };
}

/** Fold a whole sequence (tests, replays). Each item is an event or `{id, at, event}`. */
export function reduceAll(state, items) {
  let current = state;
  for (const item of items) {
    if (item !== null && typeof item === "object" && "event" in item && !("type" in item)) {
      current = reduce(current, item.event, { id: item.id ?? null, at: item.at ?? 0 });
    } else {
      current = reduce(current, item);
    }
  }
  return current;
}

// ---------------------------------------------------------------- helpers on runs, steps and cards

function newRun(fields) {
  return {
    id: fields.id,
    number: fields.number ?? null,
    resumed: fields.resumed ?? false,
    status: fields.status ?? "running",
    userRow: fields.userRow ?? null,
    rowIds: fields.rowIds ?? [],
    leafId: fields.leafId ?? null, // the row it goes on from (run_started's leaf_id)
    elsewhere: fields.elsewhere ?? false, // it goes on from a branch not shown: followed, not drawn (branches.js)
    asRows: false, // finished, and drawn from its stored rows (one of them got versions meanwhile)
    steps: fields.steps ?? [],
    usage: null,
    stepsCount: null,
    duration: null,
    error: null,
    startedAt: fields.startedAt ?? null,
    restarts: 0, // how many times another server continued the run after the one running it stopped
  };
}

function runIndexOf(state, runId) {
  for (let i = state.runs.length - 1; i >= 0; i -= 1) if (state.runs[i].id === runId) return i;
  return -1;
}

/** The run an event belongs to, created when the stream starts in its middle. */
function ensureRun(state, runId, at) {
  let index = runIndexOf(state, runId);
  if (index >= 0) return [state, index];
  const run = newRun({ id: runId, startedAt: at });
  index = state.runs.length;
  return [{ ...state, runs: [...state.runs, run] }, index];
}

function stepPosition(run, stepIndex) {
  for (let i = run.steps.length - 1; i >= 0; i -= 1) if (run.steps[i].index === stepIndex) return i;
  return -1;
}

/** The step a model event belongs to: by its `step` number, or the run's latest step. */
function ensureStep(state, runIndex, stepIndex) {
  const run = state.runs[runIndex];
  let position;
  if (stepIndex === null || stepIndex === undefined) {
    position = run.steps.length - 1;
    if (position >= 0) return [state, position];
    stepIndex = 0;
  } else {
    position = stepPosition(run, stepIndex);
    if (position >= 0) return [state, position];
  }
  const steps = [...run.steps, newStep(stepIndex)];
  steps.sort((a, b) => a.index - b.index);
  position = steps.findIndex((s) => s.index === stepIndex);
  const where = shiftWhere(state.where, runIndex, position);
  return [{ ...state, where, runs: replaceAt(state.runs, runIndex, { ...run, steps }) }, position];
}

/** A step was inserted before others of its run: move their cards' locations along. */
function shiftWhere(where, runIndex, insertedAt) {
  let copy = null;
  for (const [id, [r, s]] of Object.entries(where)) {
    if (r === runIndex && s >= insertedAt) {
      copy ??= { ...where };
      copy[id] = [r, s + 1];
    }
  }
  return copy ?? where;
}

function updateStep(state, runIndex, position, update) {
  const run = state.runs[runIndex];
  const step = update(run.steps[position]);
  if (step === run.steps[position]) return state;
  const steps = replaceAt(run.steps, position, step);
  return { ...state, runs: replaceAt(state.runs, runIndex, { ...run, steps }) };
}

function updateRun(state, runIndex, update) {
  const run = update(state.runs[runIndex]);
  if (run === state.runs[runIndex]) return state;
  return { ...state, runs: replaceAt(state.runs, runIndex, run) };
}

/**
 * Apply `update` to the card with this id wherever it is; when no card has it yet, create it in the
 * step the event belongs to (`fallback`: [runIndex, stepIndex]) from `create()`.
 */
function withCard(state, callId, fallback, create, update) {
  const found = state.where[callId];
  if (found !== undefined) {
    const [r, s] = found;
    return updateStep(state, r, s, (step) => {
      const card = step.cards[callId];
      const changed = update(card);
      return changed === card ? step : { ...step, cards: { ...step.cards, [callId]: changed } };
    });
  }
  const [runIndex, stepIndex] = fallback;
  let next = state;
  let position;
  [next, position] = ensureStep(next, runIndex, stepIndex);
  const card = update(create());
  next = updateStep(next, runIndex, position, (step) => addCardToStep(step, card));
  return { ...next, where: { ...next.where, [callId]: [runIndex, position] } };
}

function addRow(rows, row) {
  const existing = rows.findIndex((r) => r.id === row.id);
  if (existing >= 0) return rows[existing] === row ? rows : replaceAt(rows, existing, row);
  const copy = [...rows, row];
  // Rows usually arrive in order: only a late one needs moving back.
  for (let i = copy.length - 1; i > 0 && copy[i - 1].sequence_number > copy[i].sequence_number; i -= 1) {
    [copy[i - 1], copy[i]] = [copy[i], copy[i - 1]];
  }
  return copy;
}

// ---------------------------------------------------------------- a live step filled in from its stored message

/** Fill a live step with whatever its committed (or assembled) message has and the stream missed. */
function reconcile(state, runIndex, position, assistant, results) {
  const stored = stepFromMessages(assistant, results);
  let next = state;
  next = updateStep(next, runIndex, position, (step) => {
    let merged = step;
    const hasText = step.blocks.some((b) => b.kind === "text" || b.kind === "thinking");
    if (!hasText) {
      const words = stored.blocks.filter((b) => b.kind === "text" || b.kind === "thinking");
      if (words.length > 0) {
        const tools = merged.blocks.filter((b) => b.kind !== "text" && b.kind !== "thinking");
        merged = { ...merged, blocks: [...words, ...tools] };
      }
    }
    for (const id of storedCallIds(stored)) {
      const known = merged.cards[id];
      const from = stored.cards[id];
      if (known === undefined) {
        if (state.where[id] === undefined) merged = addCardToStep(merged, from);
        continue;
      }
      let card = known;
      if (card.status === CardStatus.STREAMING || card.status === CardStatus.PENDING || card.args === undefined) {
        card = from.status === CardStatus.INVALID ? { ...card, ...pick(from, "status", "reason", "argsText", "name") }
          : { ...card, name: from.name, argsText: from.argsText, args: from.args, status: advance(card, from.status) };
      }
      if (from.hasResult && !card.hasResult) card = withResult(card, resultOf(from), null);
      if (card !== known) merged = { ...merged, cards: { ...merged.cards, [id]: card } };
    }
    return merged;
  });
  // Calls first seen here get their location.
  const step = next.runs[runIndex].steps[position];
  let where = next.where;
  for (const id of Object.keys(step.cards)) {
    if (where[id] === undefined) {
      if (where === next.where) where = { ...where };
      where[id] = [runIndex, position];
    }
  }
  return where === next.where ? next : { ...next, where };
}

// ---------------------------------------------------------------- the handlers, one per event type

function onModelEvent(update) {
  return (state, event, at) => {
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    let position;
    [next, position] = ensureStep(next, runIndex, event.step);
    return update(next, runIndex, position, event, at);
  };
}

function appendWords(kind) {
  return onModelEvent((state, runIndex, position, event) =>
    updateStep(state, runIndex, position, (step) => {
      const last = step.blocks[step.blocks.length - 1];
      if (last !== undefined && last.kind === kind) {
        return { ...step, blocks: replaceAt(step.blocks, step.blocks.length - 1, { kind, text: last.text + event.text }) };
      }
      return { ...step, blocks: [...step.blocks, { kind, text: event.text }] };
    }),
  );
}

/** Find a card of this step by its position among the step's calls (tool_call_end names no id). */
function idByIndex(state, runIndex, position, index) {
  const step = state.runs[runIndex].steps[position];
  for (const card of Object.values(step.cards)) if (card.index === index) return card.id;
  return null;
}

function findApproval(state, approvalId) {
  for (const [id, [r, s]] of Object.entries(state.where)) {
    const card = state.runs[r].steps[s].cards[id];
    if (card.approvalId === approvalId) return card;
  }
  return null;
}

function decideCard(state, approvalId, decision) {
  for (const [id, [r, s]] of Object.entries(state.where)) {
    const card = state.runs[r].steps[s].cards[id];
    if (card.approvalId === approvalId) {
      return updateStep(state, r, s, (step) => ({ ...step, cards: { ...step.cards, [id]: { ...card, decision } } }));
    }
  }
  return state;
}

/**
 * `row`, stored by a run on another branch, counted among the versions of the shown row beside it. A finished run
 * that drew that row is drawn from its stored rows from then on (`asRows`), which carry the version switchers.
 */
function countVersion(state, row) {
  const rows = withSibling(state.rows, row);
  if (rows === state.rows) return state;
  const changed = rows.find((shown, i) => shown !== state.rows[i]);
  const runs = state.runs.map((run) => (run.elsewhere || run.asRows || run.status === "running" || run.status === "paused"
    || !(run.rowIds.includes(changed.id) || run.id === changed.run_id) ? run : { ...run, asRows: true }));
  return { ...state, rows, runs };
}

function claimRow(run, row) {
  if (run.rowIds.includes(row.id)) return run;
  return { ...run, rowIds: [...run.rowIds, row.id] };
}

/** The step a committed row belongs to: the one holding its calls, else the event's step. */
function stepForRow(state, runIndex, row, stepIndex) {
  const [assistant] = row.messages ?? [];
  for (const call of callsOf(assistant)) {
    const found = state.where[call.id];
    if (found !== undefined) return [state, found[0], found[1]];
  }
  const run = state.runs[runIndex];
  if (stepIndex !== null && stepIndex !== undefined && stepPosition(run, stepIndex) >= 0) {
    return [state, runIndex, stepPosition(run, stepIndex)];
  }
  const open = run.steps.findIndex((s) => !s.saved);
  if (open >= 0 && (stepIndex === null || stepIndex === undefined)) return [state, runIndex, open];
  const [next, position] = ensureStep(state, runIndex, stepIndex ?? run.steps.length);
  return [next, runIndex, position];
}

const HANDLERS = {
  run_started(state, event, at) {
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    const userRow = event.user_message ?? null;
    const leafId = event.leaf_id ?? null;
    const elsewhere = !extendsShown(state.rows, event.run_id, leafId, userRow);
    next = updateRun(next, runIndex, (run) => {
      let updated = { ...run, number: event.run_number ?? run.number, resumed: Boolean(event.resumed),
        status: "running", startedAt: run.startedAt ?? at, leafId, elsewhere };
      if (userRow !== null) updated = claimRow({ ...updated, userRow }, userRow);
      return updated;
    });
    if (userRow !== null) next = elsewhere ? countVersion(next, userRow) : { ...next, rows: addRow(next.rows, userRow) };
    return elsewhere ? next : { ...next, outbox: null };
  },

  step_started: onModelEvent((state) => state),

  // Another server continues the run (docs/guides/durable-runs.md): a step asked for again starts over, its
  // earlier text replaced by the new attempt's; the run says it was resumed.
  // A stream that starts here (the page loaded the chat after a restart, whose log lost the run's earlier events)
  // knows only the run's rest: like a paused run's round, it is `partial`, and the rows it stored before (the
  // question, its earlier rounds) stay drawn as stored rows above it.
  run_resumed(state, event, at) {
    const partial = runIndexOf(state, event.run_id) < 0;
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    next = updateRun(next, runIndex, (run) => ({ ...run, ...(partial ? { partial } : {}), status: "running",
      restarts: (run.restarts ?? 0) + 1 }));
    const restarted = event.restarted_step;
    const position = restarted === null || restarted === undefined ? -1 : stepPosition(next.runs[runIndex], restarted);
    if (position < 0) return next;
    return updateStep(next, runIndex, position, (step) => ({ ...step, blocks: [], ended: false, message: null }));
  },

  text_delta: appendWords("text"),
  thinking_delta: appendWords("thinking"),

  tool_call_start: onModelEvent((state, runIndex, position, event) =>
    withCard(state, event.id, [runIndex, state.runs[runIndex].steps[position].index],
      () => newCard(event.id),
      (card) => ({ ...card, name: event.name || card.name, index: card.index ?? event.index }))),

  tool_call_delta: onModelEvent((state, runIndex, position, event) => {
    const id = event.id || idByIndex(state, runIndex, position, event.index);
    if (id === null) return state;
    return withCard(state, id, [runIndex, state.runs[runIndex].steps[position].index],
      () => newCard(id, { index: event.index }),
      (card) => (FINAL.has(card.status) || card.args !== undefined ? card
        : { ...card, argsText: card.argsText + (event.arguments_delta ?? ""), preview: event.arguments ?? card.preview }));
  }),

  tool_call_end: onModelEvent((state, runIndex, position, event) => {
    const call = event.call;
    const oldId = idByIndex(state, runIndex, position, event.index);
    let next = state;
    if (oldId !== null && oldId !== call.id && state.where[call.id] === undefined) {
      next = rekey(next, oldId, call.id);
    }
    return withCard(next, call.id, [runIndex, next.runs[runIndex].steps[position].index],
      () => newCard(call.id, { index: event.index }),
      (card) => completedCall({ ...card, index: card.index ?? event.index }, call));
  }),

  provider_tool: onModelEvent((state, runIndex, position, event) =>
    updateStep(state, runIndex, position, (step) => {
      const at = step.blocks.findIndex((b) => b.kind === "provider_tool" && b.part.id === event.part.id);
      const block = { kind: "provider_tool", part: event.part };
      return at >= 0 ? { ...step, blocks: replaceAt(step.blocks, at, block) } : { ...step, blocks: [...step.blocks, block] };
    })),

  usage: onModelEvent((state, runIndex, position, event) =>
    updateStep(state, runIndex, position, (step) => ({ ...step, usage: event.usage }))),

  finish: onModelEvent((state, runIndex, position, event) =>
    updateStep(state, runIndex, position, (step) => ({ ...step, finish: event.reason }))),

  error: onModelEvent((state, runIndex, position, event) =>
    updateStep(state, runIndex, position, (step) => ({
      ...step,
      blocks: [...step.blocks, { kind: "error", errorType: event.error_type ?? "error", message: event.message ?? "" }],
    }))),

  message_end: onModelEvent((state, runIndex, position, event) => {
    let next = updateStep(state, runIndex, position, (step) => ({ ...step, ended: true, message: event.message }));
    next = reconcile(next, runIndex, position, event.message, []);
    // A call that never completed and is not in the assembled message was cut off.
    return updateStep(next, runIndex, position, (step) => {
      let cards = step.cards;
      for (const [id, card] of Object.entries(step.cards)) {
        if (card.status === CardStatus.STREAMING) {
          if (cards === step.cards) cards = { ...cards };
          cards[id] = { ...card, status: CardStatus.INVALID, reason: "The call was cut off before it was complete." };
        }
      }
      return cards === step.cards ? step : { ...step, cards };
    });
  }),

  tool_started(state, event, at) {
    const call = event.call;
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    return withCard(next, call.id, [runIndex, event.step],
      () => completedCall(newCard(call.id), call),
      (card) => {
        if (card.status === CardStatus.INVALID || FINAL.has(card.status)) return card;
        const filled = card.args === undefined ? completedCall(card, call) : card;
        return { ...filled, status: CardStatus.EXECUTING, startedAt: at };
      });
  },

  tool_result(state, event, at) {
    const result = event.result;
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    return withCard(next, result.call_id, [runIndex, event.step],
      () => newCard(result.call_id, { name: result.name, status: CardStatus.PENDING }),
      (card) => (card.hasResult ? card : withResult(card, result, event.duration ?? null)));
  },

  approval_required(state, event, at) {
    const call = event.call;
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    return withCard(next, call.id, [runIndex, event.step],
      () => completedCall(newCard(call.id), call),
      (card) => {
        const filled = card.args === undefined ? completedCall(card, call) : card;
        return { ...filled, approvalId: event.approval_id, status: advance(filled, CardStatus.APPROVAL) };
      });
  },

  message_saved(state, event, at) {
    const row = event.row;
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    next = next.runs[runIndex].elsewhere ? countVersion(next, row) : { ...next, rows: addRow(next.rows, row) };
    if (row.kind === "user") {
      return updateRun(next, runIndex, (run) => claimRow(run.userRow === null ? { ...run, userRow: row } : run, row));
    }
    let r;
    let position;
    [next, r, position] = stepForRow(next, runIndex, row, event.step);
    const [assistant, results] = row.messages ?? [];
    const resultParts = (results?.parts ?? []).filter((p) => p.type === "tool_result");
    next = reconcile(next, r, position, assistant, resultParts);
    next = updateStep(next, r, position, (step) => ({ ...step, saved: true, rowId: row.id }));
    return updateRun(next, r, (run) => claimRow(run, row));
  },

  step_finished(state, event) {
    // Only marks a step this run has: the round of a paused run finishes in the run that resumed it.
    const runIndex = runIndexOf(state, event.run_id);
    if (runIndex < 0) return state;
    const position = stepPosition(state.runs[runIndex], event.step);
    if (position < 0) return state;
    return updateStep(state, runIndex, position, (step) => ({ ...step, finished: true }));
  },

  run_finished(state, event, at) {
    let [next, runIndex] = ensureRun(state, event.run_id, at);
    next = updateRun(next, runIndex, (run) => closeOpenCards({
      ...run,
      status: event.status,
      usage: event.usage ?? null,
      error: event.error ?? null,
      stepsCount: event.steps ?? null,
      duration: event.duration ?? null,
    }, event.status));
    return next;
  },

  // ---- the page's own actions

  /**
   * GET /api/chats/{id} answered (a ChatDetail, asked at `requested_at` on the `meta.at` clock). A paused
   * run is shown with its waiting calls.
   */
  client_chat(state, event, at) {
    const chat = event.chat;
    let next = { ...state, chat };
    const paused = chat.paused ?? null;
    if (paused === null) return next;
    let runIndex = runIndexOf(next, paused.run_id);
    if (runIndex < 0) {
      const step = stepFromMessages(paused.message, paused.results ?? [], 0);
      // Only the waiting round is known: the run's earlier rows stay drawn as stored rows.
      const run = { ...newRun({ id: paused.run_id, status: "paused", startedAt: at }), partial: true,
        steps: [{ ...step, saved: false }] };
      runIndex = next.runs.length;
      next = { ...next, runs: [...next.runs, run] };
      next = reconcile(next, runIndex, 0, paused.message, paused.results ?? []);
      // Calls of the paused round that were neither answered nor held are still to run.
    }
    for (const approval of paused.approvals ?? []) {
      next = HANDLERS.approval_required(next, { run_id: paused.run_id, step: null, approval_id: approval.approval_id,
        call: approval.call }, at);
      // The server still waited for this call after the page sent its decision: it did not arrive, so
      // ask again. A GET chat asked before the decision went out says nothing about it.
      const decision = findApproval(next, approval.approval_id)?.decision;
      if (decision?.sent && (event.requested_at ?? Number.POSITIVE_INFINITY) > decision.sentAt) {
        next = decideCard(next, approval.approval_id, null);
      }
    }
    return updateRun(next, runIndexOf(next, paused.run_id), (run) =>
      (run.status === "running" ? run : { ...run, status: "paused" }));
  },

  /** GET /api/chats/{id}/messages answered: the rows, and how their runs ended (`runs`). */
  client_history(state, event) {
    let rows = state.rows;
    for (const row of event.messages ?? []) rows = addRow(rows, row);
    let summaries = state.summaries;
    for (const summary of event.runs ?? []) {
      if (summary && typeof summary.run_id === "string" && !sameSummary(summaries[summary.run_id], summary)) {
        summaries = { ...summaries, [summary.run_id]: summary };
      }
    }
    return rows === state.rows && summaries === state.summaries ? state : { ...state, rows, summaries };
  },

  client_send(state, event) {
    return { ...state, outbox: { client_message_id: event.client_message_id, text: event.text } };
  },

  client_send_failed(state, event) {
    return addNotice({ ...state, outbox: null }, "error", event.message);
  },

  client_decide(state, event) {
    const decision = event.approved === null ? null : { approved: event.approved, reason: event.reason ?? null };
    return decideCard(state, event.approval_id, decision);
  },

  /** The decisions went to the server: the cards say so until the resumed run answers them. */
  client_decisions_sent(state, event, at) {
    let next = state;
    for (const approvalId of event.approval_ids) {
      const card = findApproval(next, approvalId);
      if (card !== null && card.decision !== null) next = decideCard(next, approvalId, { ...card.decision, sent: true, sentAt: at });
    }
    return next;
  },

  client_connection(state, event) {
    return state.connection === event.status ? state : { ...state, connection: event.status };
  },

  client_notice(state, event) {
    return addNotice(state, event.level ?? "error", event.message);
  },

  client_dismiss(state, event) {
    return { ...state, notices: state.notices.filter((n) => n.id !== event.id) };
  },
};

function rekey(state, oldId, newId) {
  const [r, s] = state.where[oldId];
  const where = { ...state.where, [newId]: [r, s] };
  delete where[oldId];
  const next = updateStep(state, r, s, (step) => {
    const cards = { ...step.cards, [newId]: { ...step.cards[oldId], id: newId } };
    delete cards[oldId];
    const blocks = step.blocks.map((b) => (b.kind === "tools" ? { ...b, ids: b.ids.map((i) => (i === oldId ? newId : i)) } : b));
    return { ...step, cards, blocks };
  });
  return { ...next, where };
}

function sameSummary(a, b) {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

function addNotice(state, level, message) {
  const id = state.noticeCount + 1;
  return { ...state, noticeCount: id, notices: [...state.notices, { id, level, message: String(message ?? "") }] };
}
