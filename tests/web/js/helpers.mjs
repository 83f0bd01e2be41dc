// Shared by the Node unit tests: the recorded sequences and a fold over their frames.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { emptyChat, reduce } from "../../../src/toolwire/web/reducer.js";

const SEQUENCES = new URL("../sequences/", import.meta.url);

export function sequence(name) {
  return JSON.parse(readFileSync(fileURLToPath(new URL(`${name}.json`, SEQUENCES)), "utf8"));
}

/** Fold SSE frames ({id, data}) into a state, one millisecond apart. */
export function fold(state, frames, start = 0) {
  let current = state;
  frames.forEach((frame, i) => {
    current = reduce(current, frame.data, { id: frame.id, at: start + i });
  });
  return current;
}

export function fresh(seq) {
  return reduce(emptyChat(seq.chat.id), { type: "client_chat", chat: seq.chat });
}

/** Every card of every run, flat. */
export function allCards(state) {
  return state.runs.flatMap((run) => run.steps.flatMap((step) => Object.values(step.cards)));
}

/** The text the conversation shows (rows drawn as rows, runs as runs), to compare two states. */
export function words(step) {
  return step.blocks.filter((b) => b.kind === "text").map((b) => b.text).join("");
}
