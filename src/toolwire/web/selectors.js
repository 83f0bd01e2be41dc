// Read-only views of the chat state for the renderer and the page: what the conversation shows, in
// which order, and what the person can do now (stop a run, decide waiting calls). Pure, like the reducer.

import { CardStatus } from "./cards.js";

/**
 * What the conversation shows, in order: stored rows (those not drawn by a run this page follows),
 * each stored run's ending after its last row (its RunSummary: usage, errors), the runs of the shown branch, then the
 * message being sent. Each item: {key, kind: "row" | "summary" | "run" | "outbox", ...}; a row item
 * carries its run's summary too (its decisions mark denied calls).
 */
export function conversationItems(state) {
  const shownByRuns = new Set();
  // A run on another branch is followed but not drawn (its rows only count as versions); one drawn from its rows
  // (`asRows`) is not drawn either.
  const drawn = state.runs.filter((run) => !run.elsewhere && !run.asRows);
  const runIds = new Set(drawn.filter((r) => !r.partial).map((r) => r.id));
  const anyRunIds = new Set(drawn.map((r) => r.id));
  for (const run of drawn) for (const id of run.rowIds) shownByRuns.add(id);
  const seqOf = new Map(state.rows.map((r) => [r.id, r.sequence_number]));
  const items = [];
  const lastOfRun = new Map();
  for (const row of state.rows) {
    if (shownByRuns.has(row.id) || (row.run_id !== null && runIds.has(row.run_id))) continue;
    const summary = row.run_id === null ? null : state.summaries[row.run_id] ?? null;
    items.push({ key: `row:${row.id}`, kind: "row", row, summary, order: row.sequence_number, tie: 0 });
    if (summary !== null && !anyRunIds.has(row.run_id)) lastOfRun.set(row.run_id, row.sequence_number);
  }
  const answeredAgain = retriedRuns(state);
  for (const [runId, order] of lastOfRun) {
    if (answeredAgain.has(runId)) continue; // a failed run retried: the answer below replaces its error
    items.push({ key: `summary:${runId}`, kind: "summary", summary: state.summaries[runId], order, tie: 0.5 });
  }
  state.runs.forEach((run, i) => {
    if (run.elsewhere || run.asRows) return;
    let order = Number.POSITIVE_INFINITY;
    for (const id of run.rowIds) {
      const seq = seqOf.get(id);
      if (seq !== undefined && seq < order) order = seq;
    }
    items.push({ key: `run:${run.id}`, kind: "run", run, order, tie: i });
  });
  items.sort((a, b) => (a.order === b.order ? a.tie - b.tie : a.order < b.order ? -1 : 1));
  if (state.outbox !== null) items.push({ key: `outbox:${state.outbox.client_message_id}`, kind: "outbox", outbox: state.outbox });
  return items;
}

/** Failed runs that stored only their user message, which another run then answered (a retry, branches.js). */
function retriedRuns(state) {
  const retried = new Set();
  const rows = state.rows;
  for (let i = 0; i + 1 < rows.length; i += 1) {
    const row = rows[i];
    if (row.kind === "user" && row.run_id !== null && rows[i + 1].run_id !== row.run_id
        && state.summaries[row.run_id]?.status === "failed") retried.add(row.run_id);
  }
  return retried;
}

/** The run that is streaming now (the stop button cancels it), or null. */
export function activeRun(state) {
  for (let i = state.runs.length - 1; i >= 0; i -= 1) if (state.runs[i].status === "running") return state.runs[i];
  return null;
}

/** The cards of the latest paused run that wait for a decision. */
export function pendingApprovals(state) {
  for (let i = state.runs.length - 1; i >= 0; i -= 1) {
    const run = state.runs[i];
    if (run.status === "running") return [];
    if (run.status !== "paused") continue;
    const cards = [];
    for (const step of run.steps) {
      for (const card of Object.values(step.cards)) if (card.status === CardStatus.APPROVAL) cards.push(card);
    }
    return cards;
  }
  return [];
}

/** Every card of a step, in call order. */
export function cardsOf(step) {
  const block = step.blocks.find((b) => b.kind === "tools");
  return block === undefined ? [] : block.ids.map((id) => step.cards[id]);
}

/** The largest sequence number of the stored rows (for `GET /messages?after=`), or null. */
export function lastSequence(state) {
  return state.rows.length === 0 ? null : state.rows[state.rows.length - 1].sequence_number;
}
