import assert from "node:assert/strict";
import { test } from "node:test";

import { CardStatus, stepFromRow } from "../../../src/toolwire/web/cards.js";
import { compareCursors, emptyChat, reduce } from "../../../src/toolwire/web/reducer.js";
import { activeRun, cardsOf, conversationItems, pendingApprovals } from "../../../src/toolwire/web/selectors.js";
import { allCards, fold, fresh, sequence, words } from "./helpers.mjs";

/** What the page shows, without timings: compare states reached in different ways. */
function view(state) {
  return conversationItems(state).map((item) => {
    if (item.kind === "row") return { row: item.row.id };
    if (item.kind === "outbox") return { outbox: item.outbox.text };
    const run = item.run;
    return {
      run: run.id,
      status: run.status,
      user: run.userRow?.id ?? null,
      usage: run.usage,
      steps: run.steps.map((step) => ({
        blocks: step.blocks.map((b) => (b.kind === "tools" ? `tools:${b.ids.join(",")}` : `${b.kind}:${b.text ?? b.message ?? ""}`)),
        cards: cardsOf(step).map((c) => [c.id, c.name, c.status, c.argsText, JSON.stringify(c.result)]),
      })),
    };
  });
}

function deepFreeze(value) {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

function cardOf(state, id) {
  const card = allCards(state).find((c) => c.id === id);
  assert.ok(card, `no card ${id}`);
  return card;
}

test("arguments grow with every delta, and become the parsed call at tool_call_end", () => {
  const seq = sequence("parallel_out_of_order");
  let state = fresh(seq);
  const seen = [];
  for (const frame of seq.frames) {
    state = reduce(state, frame.data, { id: frame.id });
    if (frame.data.type === "tool_call_delta" && frame.data.id === "call_paris") seen.push(cardOf(state, "call_paris").argsText);
    if (frame.data.type === "tool_call_end" && frame.data.call.id === "call_paris") break;
  }
  assert.ok(seen.length >= 3);
  for (let i = 1; i < seen.length; i += 1) assert.ok(seen[i].length > seen[i - 1].length && seen[i].startsWith(seen[i - 1]));
  const card = cardOf(state, "call_paris");
  assert.equal(card.status, CardStatus.PENDING);
  assert.deepEqual(card.args, { city: "Paris", unit: "c" });
  assert.equal(card.argsText, '{"city": "Paris", "unit": "c"}');
});

test("results arriving 2, 3, 1 each finish their own card, in that order", () => {
  const seq = sequence("parallel_out_of_order");
  let state = fresh(seq);
  const finished = [];
  for (const frame of seq.frames) {
    const before = new Map(allCards(state).map((c) => [c.id, c.status]));
    state = reduce(state, frame.data, { id: frame.id });
    for (const card of allCards(state)) {
      if (card.status === CardStatus.DONE && before.get(card.id) !== CardStatus.DONE) finished.push(card.id);
    }
    if (frame.data.type === "tool_result") {
      const changed = allCards(state).filter((c) => c.hasResult).map((c) => c.id);
      assert.ok(changed.includes(frame.data.result.call_id));
    }
  }
  assert.deepEqual(finished, seq.expect.result_order);
  const step = state.runs[0].steps[0];
  assert.deepEqual(cardsOf(step).map((c) => c.id), ["call_paris", "call_tokyo", "call_lima"], "cards keep call order");
  assert.deepEqual(cardsOf(step).map((c) => c.duration), [1.27, 0.41, 0.83]);
  assert.equal(step.blocks.filter((b) => b.kind === "tools").length, 1, "one aggregate per round");
  assert.deepEqual(step.blocks.map((b) => b.kind), ["thinking", "text", "tools"]);
});

test("a whole run: statuses, text, usage, and one card per call", () => {
  const seq = sequence("parallel_out_of_order");
  const state = fold(fresh(seq), seq.frames);
  const run = state.runs[0];
  assert.equal(run.status, "completed");
  assert.equal(run.stepsCount, 2);
  assert.equal(run.duration, 3.42);
  assert.equal(run.usage.input_tokens, 942);
  assert.equal(activeRun(state), null);
  assert.equal(allCards(state).length, 3);
  assert.ok(words(run.steps[1]).includes("**Tokyo** is the warmest."));
  assert.equal(run.userRow.id, "row-1");
  assert.deepEqual(view(state).map((i) => i.run ?? i.row), ["run-w1"], "rows of a followed run are drawn by the run");
  assert.equal(state.rows.length, 3);
  assert.equal(state.cursor, seq.frames.at(-1).id);
});

test("while the run streams it is the active run; the outbox empties when it starts", () => {
  const seq = sequence("parallel_out_of_order");
  let state = reduce(fresh(seq), { type: "client_send", client_message_id: "m1", text: "What's the weather?" });
  assert.deepEqual(view(state).at(-1), { outbox: "What's the weather?" });
  state = fold(state, seq.frames.slice(0, 5));
  assert.equal(state.outbox, null);
  assert.equal(activeRun(state).id, "run-w1");
});

test("a failing tool is an error card; an invalid call is never executing", () => {
  const seq = sequence("failing_and_invalid");
  let state = fresh(seq);
  const statuses = [];
  for (const frame of seq.frames) {
    state = reduce(state, frame.data, { id: frame.id });
    const card = allCards(state).find((c) => c.id === "call_stations");
    if (card) statuses.push(card.status);
  }
  assert.ok(!statuses.includes(CardStatus.EXECUTING));
  assert.ok(statuses.includes(CardStatus.STREAMING));
  const invalid = cardOf(state, "call_stations");
  assert.equal(invalid.status, CardStatus.INVALID);
  assert.match(invalid.reason, /not a JSON object/);
  assert.ok(invalid.hasResult, "the error answer is kept with the invalid call");
  const failed = cardOf(state, "call_convert");
  assert.equal(failed.status, CardStatus.ERROR);
  assert.match(failed.result.error, /unknown currency code/);
});

test("a call cut off by a broken stream becomes invalid at message_end", () => {
  const events = [
    { type: "run_started", run_id: "r", step: null, chat_id: "c", run_number: 1, resumed: false, user_message: null },
    { type: "tool_call_start", run_id: "r", step: 0, id: "k", name: "search", index: 0 },
    { type: "tool_call_delta", run_id: "r", step: 0, id: "k", index: 0, arguments_delta: '{"q": "ab', arguments: null },
    { type: "error", run_id: "r", step: 0, error_type: "stream_interrupted", message: "The connection closed mid-stream." },
    { type: "message_end", run_id: "r", step: 0, message: { role: "assistant", parts: [], metadata: { incomplete: true } } },
  ];
  let state = emptyChat("c");
  for (const e of events) state = reduce(state, e);
  assert.equal(cardOf(state, "k").status, CardStatus.INVALID);
  const step = state.runs[0].steps[0];
  assert.deepEqual(step.blocks.map((b) => b.kind), ["tools", "error"]);
});

test("approval: the run pauses with the call waiting; approving resumes it in place", () => {
  const seq = sequence("approval");
  let state = fold(fresh(seq), seq.frames);
  assert.equal(state.runs[0].status, "paused");
  assert.equal(activeRun(state), null);
  const waiting = pendingApprovals(state);
  assert.deepEqual(waiting.map((c) => [c.id, c.approvalId]), [["call_pay", "appr-1"]]);
  assert.equal(cardOf(state, "call_oslo").status, CardStatus.DONE);
  state = reduce(state, { type: "client_decide", approval_id: "appr-1", approved: true });
  state = fold(state, seq.approved, 100);
  const pay = cardOf(state, "call_pay");
  assert.equal(pay.status, CardStatus.DONE);
  assert.deepEqual(pay.result, { paid: true, reference: "PAY-991" });
  assert.equal(allCards(state).length, 2, "no second card for the resumed calls");
  assert.equal(state.runs[0].steps[0].cards.call_pay, pay, "the paused round's card is the one updated");
  const items = view(state);
  assert.deepEqual(items.map((i) => i.run ?? i.row), ["run-a1", "run-a2"]);
  assert.equal(items[1].steps.length, 1);
  assert.match(items[1].steps[0].blocks[0], /Paid \(reference PAY-991\)/);
  assert.deepEqual(pendingApprovals(state), []);
});

test("approval: denying shows the call as denied", () => {
  const seq = sequence("approval");
  let state = fold(fresh(seq), seq.frames);
  state = reduce(state, { type: "client_decide", approval_id: "appr-1", approved: false, reason: "Not this month." });
  assert.deepEqual(cardOf(state, "call_pay").decision, { approved: false, reason: "Not this month." });
  state = fold(state, seq.denied, 100);
  assert.equal(cardOf(state, "call_pay").status, CardStatus.DENIED);
});

test("approval after a reload: GET chat's paused round is shown and resumed in place", () => {
  const seq = sequence("approval");
  let state = reduce(emptyChat(seq.chat.id), { type: "client_history", messages: seq.history_paused });
  state = reduce(state, { type: "client_chat", chat: seq.chat_paused });
  assert.deepEqual(pendingApprovals(state).map((c) => c.id), ["call_pay"]);
  assert.equal(cardOf(state, "call_oslo").status, CardStatus.DONE);
  assert.deepEqual(view(state).map((i) => i.run ?? i.row), ["row-a1", "run-a1"]);
  // GET chat again (another reload while still paused) changes nothing.
  assert.deepEqual(view(reduce(state, { type: "client_chat", chat: seq.chat_paused })), view(state));
  state = fold(state, seq.approved, 100);
  assert.equal(cardOf(state, "call_pay").status, CardStatus.DONE);
  assert.equal(allCards(state).length, 2);
  assert.deepEqual(view(state).map((i) => i.run ?? i.row), ["row-a1", "run-a1", "run-a2"]);
});

test("a provider error is a line in the step and the run's error", () => {
  const seq = sequence("provider_error");
  const state = fold(fresh(seq), seq.frames);
  const run = state.runs[0];
  assert.equal(run.status, "failed");
  assert.match(run.error.message, /Send the message again/);
  const step = run.steps[0];
  assert.deepEqual(step.blocks.map((b) => b.kind), ["text", "error"]);
  assert.equal(step.blocks[1].errorType, "overloaded_error");
  assert.equal(words(step), "The report covers three areas");
});

test("reload mid-run: history plus the replayed run shows exactly what following it live showed", () => {
  const seq = sequence("resume_mid_run");
  const live = fold(reduce(fresh(seq), { type: "client_history", messages: seq.history }), seq.frames);

  let reloaded = reduce(emptyChat(seq.chat.id), { type: "client_chat", chat: seq.chat });
  reloaded = reduce(reloaded, { type: "client_history", messages: seq.history_at_reload });
  const partial = view(reloaded);
  assert.deepEqual(partial.map((i) => i.row), ["row-r1", "row-r2", "row-r3", "row-r4"], "before the replay the stored rows show");
  reloaded = fold(reloaded, seq.frames, 1000);
  assert.deepEqual(view(reloaded), view(live));
  assert.equal(allCards(reloaded).length, 2);
  assert.deepEqual(view(reloaded).map((i) => i.run ?? i.row), ["row-r1", "row-r2", "run-r2"]);
  assert.equal(words(reloaded.runs[0].steps[1]), "Rome is 22 °C; Cairo is 33 °C.");
});

test("reload mid-run, replay cut at the reload point, then continued: no gap and no duplicate", () => {
  const seq = sequence("resume_mid_run");
  let state = reduce(emptyChat(seq.chat.id), { type: "client_chat", chat: seq.chat });
  state = reduce(state, { type: "client_history", messages: seq.history_at_reload });
  state = fold(state, seq.frames.slice(0, seq.reload_after));
  const mid = view(state);
  assert.deepEqual(mid.map((i) => i.run ?? i.row), ["row-r1", "row-r2", "run-r2"]);
  assert.equal(mid[2].steps[0].cards.length, 2);
  state = fold(state, seq.frames.slice(seq.reload_after));
  assert.equal(allCards(state).length, 2);
  assert.equal(state.runs[0].status, "completed");
});

test("network loss: resuming after the last cursor, with frames sent twice, is the same as no loss", () => {
  const seq = sequence("resume_mid_run");
  const base = reduce(fresh(seq), { type: "client_history", messages: seq.history });
  const whole = fold(base, seq.frames);
  let state = fold(base, seq.frames.slice(0, seq.drop_after));
  assert.equal(state.cursor, seq.frames[seq.drop_after - 1].id);
  state = fold(state, seq.frames.slice(seq.drop_after - 3)); // the server repeats three frames
  assert.deepEqual(view(state), view(whole));
  assert.equal(words(state.runs[0].steps[1]), "Rome is 22 °C; Cairo is 33 °C.");
});

test("a stream that starts mid-run (no run_started) still builds its cards and text", () => {
  const seq = sequence("resume_mid_run");
  const tail = seq.frames.slice(seq.reload_after - 3);
  const state = fold(reduce(emptyChat(seq.chat.id), { type: "client_history", messages: seq.history_at_reload }), tail);
  // The committed round fills in the calls the stream did not show.
  assert.deepEqual(allCards(state).map((c) => [c.id, c.status]).sort(), [["call_cairo", "done"], ["call_rome", "done"]]);
  assert.equal(words(state.runs[0].steps.at(-1)), "Rome is 22 °C; Cairo is 33 °C.");
});

test("a result that arrives before its call finished streaming waits on the card, which never goes back", () => {
  const r = (type, fields) => ({ type, run_id: "r", step: 0, ...fields });
  const call = { type: "tool_call", id: "c1", name: "f", arguments: { a: 1 }, arguments_raw: '{"a": 1}', provider_data: null };
  let state = emptyChat("c");
  for (const e of [
    r("tool_result", { result: { type: "tool_result", call_id: "c1", name: "f", result: 42, is_error: false }, duration: 0.1, metadata: {} }),
    r("tool_call_start", { id: "c1", name: "f", index: 0 }),
    r("tool_call_delta", { id: "c1", index: 0, arguments_delta: '{"a"', arguments: null }),
    r("tool_call_end", { index: 0, call }),
    r("tool_started", { call }),
  ]) state = reduce(state, e);
  const card = cardOf(state, "c1");
  assert.equal(card.status, CardStatus.DONE);
  assert.equal(card.result, 42);
  assert.deepEqual(card.args, { a: 1 });
  assert.equal(allCards(state).length, 1);
});

test("the reducer never changes its input, and unchanged parts keep their identity", () => {
  for (const name of ["parallel_out_of_order", "failing_and_invalid", "approval", "provider_error", "resume_mid_run", "xss"]) {
    const seq = sequence(name);
    let state = deepFreeze(fresh(seq));
    for (const frame of seq.frames) state = deepFreeze(reduce(state, deepFreeze(frame.data), { id: frame.id }));
  }
  const seq = sequence("parallel_out_of_order");
  const before = fold(fresh(seq), seq.frames.slice(0, -3));
  const after = reduce(before, { type: "text_delta", run_id: "run-w1", step: 1, text: "!" }, { id: "1-999" });
  assert.equal(after.runs[0].steps[0], before.runs[0].steps[0], "the finished step is shared");
  assert.notEqual(after.runs[0].steps[1], before.runs[0].steps[1]);
  assert.equal(reduce(after, { type: "some_future_event", run_id: "run-w1", step: 1 }), after);
});

test("cursors compare as number pairs", () => {
  assert.equal(compareCursors("2-10", "2-9"), 1);
  assert.equal(compareCursors("10-1", "9-100"), 1);
  assert.equal(compareCursors("3-4", "3-4"), 0);
  assert.equal(compareCursors(null, "1-1"), -1);
});

test("stored rows become the same steps the live stream builds", () => {
  const seq = sequence("failing_and_invalid");
  const live = fold(fresh(seq), seq.frames);
  const row = live.rows.find((r) => r.kind === "tools_aggregate");
  const stored = stepFromRow(row);
  const liveStep = live.runs[0].steps[0];
  const project = (step) => cardsOf(step).map((c) => [c.id, c.status, c.argsText, JSON.stringify(c.result)]);
  assert.deepEqual(project(stored), project(liveStep));
});

test("a run that ends without answering a call does not leave it executing", () => {
  const call = { type: "tool_call", id: "c1", name: "slow", arguments: {}, arguments_raw: "{}", provider_data: null };
  let state = emptyChat("c");
  for (const e of [
    { type: "tool_call_start", run_id: "r", step: 0, id: "c1", name: "slow", index: 0 },
    { type: "tool_call_end", run_id: "r", step: 0, index: 0, call },
    { type: "tool_started", run_id: "r", step: 0, call },
    { type: "run_finished", run_id: "r", step: null, status: "cancelled", usage: null, error: null, steps: 1, duration: 1 },
  ]) state = reduce(state, e);
  assert.equal(cardOf(state, "c1").status, CardStatus.UNANSWERED);
});

test("decisions that did not reach the server are asked for again when GET chat still shows the pause", () => {
  const seq = sequence("approval");
  let state = fold(fresh(seq), seq.frames);
  state = reduce(state, { type: "client_decide", approval_id: "appr-1", approved: true });
  state = reduce(state, { type: "client_decisions_sent", approval_ids: ["appr-1"] }, { at: 500 });
  assert.deepEqual(cardOf(state, "call_pay").decision, { approved: true, reason: null, sent: true, sentAt: 500 });
  assert.deepEqual(pendingApprovals(state).map((c) => c.id), ["call_pay"]);
  // A GET chat asked before the decision went out (answered late) changes nothing ...
  state = reduce(state, { type: "client_chat", chat: seq.chat_paused, requested_at: 400 });
  assert.equal(cardOf(state, "call_pay").decision.sent, true);
  // ... one asked after it shows the server still waits.
  state = reduce(state, { type: "client_chat", chat: seq.chat_paused, requested_at: 600 });
  assert.equal(cardOf(state, "call_pay").decision, null);
  assert.equal(cardOf(state, "call_pay").status, CardStatus.APPROVAL);
});

test("stored rows of a finished run show how it ended, and a call the server recorded as denied is denied", () => {
  const seq = sequence("approval");
  const rows = [...seq.history_paused, ...seq.denied.filter((f) => f.data.type === "message_saved").map((f) => f.data.row)];
  const finished = seq.denied.at(-1).data;
  const runs = [
    { run_id: "run-a1", status: "resumed", usage: seq.frames.at(-1).data.usage, error: null, steps: 1, duration: 0.8, decisions: [] },
    { run_id: "run-a2", status: "completed", usage: finished.usage, error: null, steps: finished.steps, duration: finished.duration,
      decisions: [{ call_id: "call_pay", approved: false, reason: "Not this month." }] },
  ];
  // What a reload shows: rows only, no run followed, no decision taken on this page.
  const state = reduce(emptyChat(seq.chat.id), { type: "client_history", messages: rows, runs });
  const items = conversationItems(state);
  assert.deepEqual(items.map((i) => i.kind), ["row", "summary", "row", "row", "summary"]);
  assert.deepEqual(items.filter((i) => i.kind === "summary").map((i) => i.summary.run_id), ["run-a1", "run-a2"]);
  const round = items.find((i) => i.kind === "row" && i.row.kind === "tools_aggregate");
  assert.equal(round.summary, state.summaries["run-a2"]);
  const cards = cardsOf(stepFromRow(round.row, round.summary));
  assert.deepEqual(cards.map((c) => [c.id, c.status]), [["call_pay", CardStatus.DENIED], ["call_oslo", CardStatus.DONE]]);
  // Without the server's word, a denial is an error result like any other.
  assert.equal(cardsOf(stepFromRow(round.row)).find((c) => c.id === "call_pay").status, CardStatus.ERROR);
  // The same summaries again change nothing; a run the page follows is not summed up twice.
  assert.equal(reduce(state, { type: "client_history", messages: [], runs: structuredClone(runs) }), state);
  const following = fold(state, seq.denied);
  assert.deepEqual(conversationItems(following).map((i) => i.kind), ["row", "summary", "run"]);
});

test("a run continued after its server stopped: the restarted step's text is replaced, the run says so", () => {
  const chat = { id: "chat-r", title: "Resumed", created_at: "2025-06-01T10:00:00Z", updated_at: "2025-06-01T10:00:00Z",
    active_run: null, paused: null };
  const at = (type, step, more = {}) => ({ type, run_id: "run-r", step, ...more });
  const frames = [
    at("run_started", null, { chat_id: "chat-r", run_number: 1, resumed: false, resumed_from: null, user_message: null }),
    at("step_started", 0),
    at("text_delta", 0, { text: "Half an ans" }),
    at("run_resumed", null, { replica: "proc-b", reason: "lease_expired", continuation: 1,
      checkpoint: { step: 0, message_id: null }, restarted_step: 0 }),
    at("step_started", 0),
    at("text_delta", 0, { text: "The whole answer." }),
  ].map((data, i) => ({ id: `1-${i + 1}`, data }));
  let state = fold(reduce(emptyChat("chat-r"), { type: "client_chat", chat }), frames);
  const run = state.runs[0];
  assert.equal(run.restarts, 1);
  assert.equal(run.status, "running");
  assert.equal(run.steps.length, 1);
  assert.equal(words(run.steps[0]), "The whole answer.", "the cut text is replaced, not added to");
  // A resumed run whose step goes on (its calls answered) keeps what the step showed.
  state = reduce(state, at("run_resumed", null, { continuation: 2, restarted_step: null }), { id: "1-7", at: 9 });
  assert.equal(state.runs[0].restarts, 2);
  assert.equal(words(state.runs[0].steps[0]), "The whole answer.");
});

test("a continued run followed from its run_resumed (a page loaded after the restart) leaves its earlier rows drawn", () => {
  // The server's log lost the run's events before the restart: the page has the rows it stored (the question and
  // its first round), and the stream starts at run_resumed.
  const seq = sequence("parallel_out_of_order");
  const saved = seq.frames.filter((f) => f.data.type === "message_saved").map((f) => f.data.row);
  const question = seq.frames[0].data.user_message;
  const [round, answer] = saved;
  const loaded = reduce(fresh(seq), { type: "client_history", messages: [question, round] });
  const at = (type, step, more = {}) => ({ type, run_id: "run-w1", step, ...more });
  const rest = [
    at("run_resumed", null, { replica: "proc-b", reason: "lease_expired", continuation: 1,
      checkpoint: { step: 1, message_id: round.id }, restarted_step: 1 }),
    at("step_started", 1),
    at("text_delta", 1, { text: "Tokyo is the warmest." }),
  ].map((data, i) => ({ id: `1-${16777217 + i}`, data }));
  let state = fold(loaded, rest);
  assert.deepEqual(conversationItems(state).map((i) => i.row?.id ?? i.kind), [question.id, round.id, "run"]);
  assert.equal(state.runs[0].restarts, 1);
  assert.equal(words(state.runs[0].steps[0]), "Tokyo is the warmest.");
  // Its answer stored: drawn once, by the run.
  state = fold(state, [{ id: "1-16777220", data: at("message_saved", 1, { row: answer }) },
    { id: "1-16777221", data: at("run_finished", null, { status: "completed", usage: null, error: null, steps: 2 }) }]);
  assert.deepEqual(conversationItems(state).map((i) => i.row?.id ?? i.kind), [question.id, round.id, "run"]);
  assert.equal(state.runs[0].status, "completed");
});
