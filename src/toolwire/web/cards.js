// Tool-call cards and the steps that hold them: the shapes the reducer builds from the live stream and
// from stored rows alike, so the renderer draws stored and live rounds the same way.
//
// A card's status only moves forward (RANK); a final one (a result, a denial, an invalid call, a run that
// ended without answering it) never changes again. Pure functions over plain objects, like reducer.js.

export const CardStatus = Object.freeze({
  STREAMING: "streaming", // arguments arriving
  PENDING: "pending", // complete, not started yet
  APPROVAL: "awaiting_approval",
  EXECUTING: "executing",
  DONE: "done",
  ERROR: "error",
  DENIED: "denied",
  INVALID: "invalid", // cut off or not a JSON object: never runs
  UNANSWERED: "unanswered", // the run ended without a result for it
});

const RANK = {
  streaming: 0,
  pending: 1,
  awaiting_approval: 2,
  executing: 3,
  done: 4,
  error: 4,
  denied: 4,
  invalid: 5,
  unanswered: 4,
};

export const FINAL = new Set(["done", "error", "denied", "invalid", "unanswered"]);

export function newStep(index) {
  return { index, blocks: [], cards: {}, usage: null, finish: null, ended: false, finished: false, saved: false };
}

export function newCard(id, fields = {}) {
  return {
    id,
    name: fields.name ?? "",
    index: fields.index ?? null,
    argsText: fields.argsText ?? "",
    args: fields.args, // the parsed object once complete (undefined before)
    preview: fields.preview ?? null, // the server's best-effort parse while streaming
    status: fields.status ?? CardStatus.STREAMING,
    reason: fields.reason ?? null, // why an invalid call is invalid
    result: fields.result, // the tool's JSON result (undefined until it arrives)
    hasResult: fields.hasResult ?? false,
    duration: fields.duration ?? null,
    startedAt: fields.startedAt ?? null,
    approvalId: fields.approvalId ?? null,
    decision: fields.decision ?? null, // {approved, reason} taken on this page
    storedDecision: fields.storedDecision ?? null, // true / false: approved / denied, as the server recorded it
    storedReason: fields.storedReason ?? null, // the reason given with a recorded denial
  };
}

export function replaceAt(list, index, value) {
  const copy = list.slice();
  copy[index] = value;
  return copy;
}

/** Add a card to a step's one tool aggregate (created where the step's first call appeared). */
export function addCardToStep(step, card) {
  const cards = { ...step.cards, [card.id]: card };
  const at = step.blocks.findIndex((b) => b.kind === "tools");
  if (at < 0) return { ...step, cards, blocks: [...step.blocks, { kind: "tools", ids: [card.id] }] };
  const block = step.blocks[at];
  if (block.ids.includes(card.id)) return { ...step, cards };
  const ids = [...block.ids, card.id];
  ids.sort((a, b) => orderOf(cards[a]) - orderOf(cards[b]));
  return { ...step, cards, blocks: replaceAt(step.blocks, at, { ...block, ids }) };
}

function orderOf(card) {
  return card.index ?? Number.MAX_SAFE_INTEGER;
}

export function advance(card, status) {
  if (FINAL.has(card.status)) return card.status;
  return RANK[status] >= RANK[card.status] ? status : card.status;
}

function resultStatus(card, result) {
  if (card.status === CardStatus.INVALID) return CardStatus.INVALID;
  if (card.decision !== null && !card.decision.approved) return CardStatus.DENIED;
  if (card.decision === null && card.storedDecision === false) return CardStatus.DENIED;
  return result.is_error ? CardStatus.ERROR : CardStatus.DONE;
}

export function withResult(card, result, duration) {
  return {
    ...card,
    name: card.name || result.name || "",
    result: result.result,
    files: result.files ?? card.files ?? [],
    hasResult: true,
    isError: Boolean(result.is_error),
    duration: duration ?? card.duration,
    status: resultStatus(card, result),
  };
}

export function completedCall(card, call) {
  if (call.type === "invalid_tool_call") {
    return {
      ...card,
      name: call.name,
      argsText: call.arguments_raw ?? card.argsText,
      status: CardStatus.INVALID,
      reason: call.reason ?? "The call's arguments were cut off or are not a JSON object.",
    };
  }
  return {
    ...card,
    name: call.name,
    argsText: call.arguments_raw ?? card.argsText,
    args: call.arguments,
    status: advance(card, CardStatus.PENDING),
  };
}

/** The calls of an assistant message, runnable or not. */
export function callsOf(message) {
  return (message?.parts ?? []).filter((p) => p.type === "tool_call" || p.type === "invalid_tool_call");
}

/**
 * A step (the same shape the live stream builds) from a stored assistant message and its results:
 * the aggregate renderer draws stored and live rounds alike. `decisions` are the approval decisions
 * the server recorded for these calls (a RunSummary's), so a denied call shows as denied.
 */
export function stepFromMessages(assistant, results = [], index = 0, decisions = [], durations = {}) {
  let step = newStep(index);
  step = { ...step, ended: true, finished: true, saved: true, message: assistant };
  const byCall = {};
  for (const r of results) byCall[r.call_id] = r;
  const decided = {};
  const reasons = {};
  for (const d of decisions ?? []) {
    decided[d.call_id] = Boolean(d.approved);
    reasons[d.call_id] = d.reason ?? null;
  }
  let callIndex = 0;
  for (const part of assistant?.parts ?? []) {
    switch (part.type) {
      case "text":
        if (part.text) step = { ...step, blocks: [...step.blocks, { kind: "text", text: part.text }] };
        break;
      case "thinking":
        if (part.text || part.redacted) {
          step = { ...step, blocks: [...step.blocks, { kind: "thinking", text: part.text, redacted: part.redacted }] };
        }
        break;
      case "tool_call":
      case "invalid_tool_call": {
        let card = completedCall(newCard(part.id, { index: callIndex, storedDecision: decided[part.id] ?? null,
          storedReason: reasons[part.id] ?? null }), part);
        callIndex += 1;
        const result = byCall[part.id];
        if (result !== undefined) card = withResult(card, result, durations[part.id] ?? null);
        step = addCardToStep(step, card);
        break;
      }
      case "provider_tool":
        step = { ...step, blocks: [...step.blocks, { kind: "provider_tool", part }] };
        break;
      case "file":
        step = { ...step, blocks: [...step.blocks, { kind: "file", part }] };
        break;
      default:
        break; // parts this page does not know yet are left out
    }
  }
  return step;
}

/**
 * A stored row as a step: an assistant row, or a tools aggregate (the call message, then its results).
 * `summary` is the row's RunSummary, when known (its decisions mark denied calls).
 */
export function stepFromRow(row, summary = null) {
  const [assistant, results] = row.messages ?? [];
  const resultParts = (results?.parts ?? []).filter((p) => p.type === "tool_result");
  // The seconds each call took, kept by the agent in the results message's metadata (agent/_round.py).
  const durations = results?.metadata?.toolwire?.durations ?? {};
  return stepFromMessages(assistant, resultParts, 0, summary?.decisions ?? [], durations);
}

export function storedCallIds(step) {
  const block = step.blocks.find((b) => b.kind === "tools");
  return block === undefined ? [] : block.ids;
}

export function resultOf(card) {
  return { call_id: card.id, name: card.name, result: card.result, is_error: card.isError };
}

export function pick(object, ...keys) {
  const out = {};
  for (const key of keys) out[key] = object[key];
  return out;
}

/** Cards still waiting when their run ended without answering them. */
export function closeOpenCards(run, status) {
  if (status === "paused" || status === "running") return run;
  let changed = false;
  const steps = run.steps.map((step) => {
    let cards = step.cards;
    for (const [id, card] of Object.entries(step.cards)) {
      if (!FINAL.has(card.status) && card.status !== CardStatus.APPROVAL) {
        if (cards === step.cards) cards = { ...cards };
        cards[id] = card.status === CardStatus.STREAMING
          ? { ...card, status: CardStatus.INVALID, reason: "The call was cut off before it was complete." }
          : { ...card, status: CardStatus.UNANSWERED };
      }
    }
    if (cards === step.cards) return step;
    changed = true;
    return { ...step, cards };
  });
  return changed ? { ...run, steps } : run;
}
