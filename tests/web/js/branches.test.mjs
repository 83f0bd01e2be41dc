import assert from "node:assert/strict";
import { test } from "node:test";

import { continuesBranch, cutBranch, extendsShown, isBranch, lastTurnAction, showBranch, turnOf, versionOf, withSibling }
  from "../../../src/toolwire/web/branches.js";
import { emptyChat, reduceAll } from "../../../src/toolwire/web/reducer.js";
import { conversationItems } from "../../../src/toolwire/web/selectors.js";

function row(id, sequence, parent, kind = "assistant", extra = {}) {
  return { id, sequence_number: sequence, parent_id: parent, kind, run_id: kind === "user" ? null : `run_${id}`,
    sibling_ids: [id], messages: [], ...extra };
}

const question = row("q", 1, null, "user");
const answer = row("a", 2, "q");
const edited = row("q2", 3, null, "user", { sibling_ids: ["q", "q2"] });

test("versionOf gives the position among siblings, and nothing for a row without versions", () => {
  assert.equal(versionOf(question), null);
  assert.deepEqual(versionOf(edited), { index: 2, count: 2, previous: "q", next: null });
  assert.deepEqual(versionOf({ ...question, sibling_ids: ["q", "q2", "q3"] }), { index: 1, count: 3, previous: null, next: "q2" });
});

test("showBranch replaces the rows shown: no row of the other branch stays", () => {
  const state = { ...emptyChat("c"), rows: [question, answer], runs: [{ id: "r", status: "done", rowIds: ["a"] }] };
  const next = showBranch(state, { leaf_id: "q2", messages: [edited], runs: [{ run_id: "run_x", status: "done" }] });
  assert.deepEqual(next.rows.map((r) => r.id), ["q2"]);
  assert.deepEqual(next.runs, []);
  assert.equal(next.summaries.run_x.status, "done");
});

test("showBranch keeps a run still going", () => {
  const runs = [{ id: "r", status: "running", rowIds: [] }];
  assert.deepEqual(showBranch({ ...emptyChat("c"), runs }, { messages: [] }).runs, runs);
});

test("cutBranch keeps the rows up to the parent of the new branch", () => {
  const state = { ...emptyChat("c"), rows: [question, answer] };
  assert.deepEqual(cutBranch(state, "q").rows.map((r) => r.id), ["q"]);
  assert.deepEqual(cutBranch(state, null).rows, []);
});

test("continuesBranch tells rows of the shown branch from rows of another one", () => {
  assert.equal(continuesBranch([question], { leaf_id: "a", messages: [answer] }), true);
  assert.equal(continuesBranch([question, answer], { leaf_id: "a", messages: [] }), true);
  // Switched elsewhere: the new rows hang under another parent, or the leaf is another row.
  assert.equal(continuesBranch([question, answer], { leaf_id: "q2", messages: [edited] }), false);
  assert.equal(continuesBranch([question, answer], { leaf_id: "q", messages: [] }), false);
  // A server without branches says neither parents nor a leaf.
  assert.equal(continuesBranch([question], { messages: [{ id: "x", sequence_number: 2 }] }), true);
});

test("turnOf finds the user message of a turn", () => {
  const tools = row("t", 3, "a", "tools_aggregate");
  assert.equal(turnOf([question, answer, tools], "t"), question);
  assert.equal(turnOf([question, answer], "q"), question);
  assert.equal(turnOf([question], "missing"), null);
});

test("lastTurnAction: regenerate after an answer, retry after a failed run, nothing while a run goes", () => {
  const state = { ...emptyChat("c"), rows: [question, answer] };
  assert.deepEqual(lastTurnAction(state), { action: "regenerate", rowId: "a" });
  const failed = { ...emptyChat("c"), rows: [{ ...question, run_id: "run_f" }], summaries: { run_f: { status: "failed" } } };
  assert.deepEqual(lastTurnAction(failed), { action: "retry", rowId: "q" });
  const followed = { ...emptyChat("c"), rows: [question], runs: [{ id: "run_g", status: "failed", rowIds: ["q"] }] };
  assert.deepEqual(lastTurnAction(followed), { action: "retry", rowId: "q" });
  assert.equal(lastTurnAction({ ...state, runs: [{ id: "r", status: "running", rowIds: [] }] }), null);
  assert.equal(lastTurnAction({ ...state, outbox: { client_message_id: "m", text: "hi" } }), null);
  assert.equal(lastTurnAction(emptyChat("c")), null);
});

test("a failed run answered again by a retry is not summed up between the question and the new answer", () => {
  const asked = { ...question, run_id: "run_f" };
  const retried = { ...answer, run_id: "run_r" };
  const summaries = { run_f: { run_id: "run_f", status: "failed", error: { message: "Overloaded." } }, run_r: { run_id: "run_r", status: "completed" } };
  const kinds = (rows) => conversationItems({ ...emptyChat("c"), rows, summaries }).map((i) => (i.kind === "summary" ? i.summary.run_id : i.kind));
  assert.deepEqual(kinds([asked, retried]), ["row", "row", "run_r"]);
  // Not retried yet: the failure is said after the question.
  assert.deepEqual(kinds([asked]), ["row", "run_f"]);
});

test("isBranch tells one branch from rows of two", () => {
  assert.equal(isBranch([question, answer]), true);
  assert.equal(isBranch([]), true);
  assert.equal(isBranch([question, answer, edited]), false);
  assert.equal(isBranch([{ id: "x", sequence_number: 1 }, { id: "y", sequence_number: 2 }]), true); // no parents said
});

test("extendsShown tells a run going on from the shown branch from one on another branch", () => {
  const rows = [question, answer]; // q (a user row stored by run_q... here run_id null), a by run_a
  // A new message under the last row shown (this tab, or another tab on the same branch).
  assert.equal(extendsShown(rows, "run_n", "n", { id: "n", parent_id: "a" }), true);
  // The page opened while the run goes: its rows after the row it extends are its own.
  assert.equal(extendsShown(rows, "run_a", "q"), true);
  // A regenerate of the last answer elsewhere: it extends q, but a (another run's) is shown after q.
  assert.equal(extendsShown(rows, "run_r", "q"), false);
  // An edit elsewhere (a new first message), and a run extending a row this page does not show.
  assert.equal(extendsShown(rows, "run_e", "e", { id: "e", parent_id: null }), false);
  assert.equal(extendsShown(rows, "run_x", "elsewhere"), false);
  // A new first message on an empty branch (the page's own edit of the first message), and a server without leaves.
  assert.equal(extendsShown([], "run_e", "e", { id: "e", parent_id: null }), true);
  assert.equal(extendsShown(rows, "run_old", null), true);
});

test("withSibling counts a row of another branch among the versions of the shown row beside it", () => {
  const rows = [question, answer];
  const again = row("a2", 5, "q");
  assert.deepEqual(withSibling(rows, again).map((r) => r.sibling_ids), [["q"], ["a", "a2"]]);
  assert.equal(withSibling(withSibling(rows, again), again)[1].sibling_ids.length, 2);
  assert.equal(withSibling(rows, row("deeper", 6, "a2")), rows); // under a row not shown: nothing to count
});

test("a run on another branch is followed without drawing its rows, and drawn live once its branch is shown", () => {
  // The answer shown was drawn by this page's own run, now finished.
  const own = { id: "run_a", status: "completed", rowIds: ["q", "a"], steps: [], elsewhere: false, asRows: false };
  const shown = { ...emptyChat("c"), rows: [question, answer], runs: [own] };
  assert.deepEqual(conversationItems(shown).map((item) => item.kind), ["run"]);
  const again = row("a2", 4, "q", "tools_aggregate", { run_id: "run_r", messages: [{ role: "assistant", parts: [] },
    { role: "tool", parts: [] }] });
  let state = reduceAll(shown, [
    { type: "run_started", run_id: "run_r", run_number: 3, leaf_id: "q" }, // a regenerate in another tab
    { type: "step_started", run_id: "run_r", step: 0 },
    { type: "text_delta", run_id: "run_r", step: 0, text: "Another" },
    { type: "message_saved", run_id: "run_r", step: 0, row: again },
    { type: "step_started", run_id: "run_r", step: 1 },
    { type: "text_delta", run_id: "run_r", step: 1, text: "still going" },
  ]);
  assert.deepEqual(state.rows.map((r) => r.id), ["q", "a"]);
  assert.deepEqual(state.rows[1].sibling_ids, ["a", "a2"]); // "‹ 1 / 2 ›" on the answer shown
  assert.equal(state.runs[1].elsewhere, true);
  // The rows are drawn from the store from then on, with their switchers; the other branch's run is not drawn.
  assert.equal(state.runs[0].asRows, true);
  assert.deepEqual(conversationItems(state).map((item) => item.kind), ["row", "row"]);
  // Switched to the run's branch (PUT leaf answers its stored rows): the run is drawn, live, in place of its rows.
  state = showBranch(state, { leaf_id: "a2", messages: [{ ...question, sibling_ids: ["q"] }, { ...again, sibling_ids: ["a", "a2"] }] });
  assert.equal(state.runs[1].elsewhere, false);
  assert.deepEqual(conversationItems(state).map((item) => item.kind), ["row", "run"]);
  // And back: followed, not drawn.
  state = showBranch(state, { leaf_id: "a", messages: [question, { ...answer, sibling_ids: ["a", "a2"] }] });
  assert.equal(state.runs[1].elsewhere, true);
  assert.deepEqual(conversationItems(state).map((item) => item.kind), ["row", "row"]);
});
