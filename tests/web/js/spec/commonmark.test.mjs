// The CommonMark spec's examples against the page's renderer (see commonmark.mjs). Every example must show
// as the spec says, or as the spec says once the page's link and image rules are applied to its HTML, or be
// listed in deviations.json with the exact safe output and a reason whose check holds (raw HTML shown as
// text; a GitHub autolink literal the spec leaves as text).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { DEVIATIONS, REASONS, examples, render, specVersion, verdict } from "./commonmark.mjs";

const listed = JSON.parse(readFileSync(DEVIATIONS, "utf8"));

test("the deviations were recorded against the pinned spec", () => {
  assert.equal(listed.spec, specVersion);
  assert.ok(examples.length >= 650, `${examples.length} examples`);
});

test("every CommonMark example passes, or is a listed deviation of the safety rules", (t) => {
  const counts = { spec: 0, safety: 0, listed: 0 };
  const problems = [];
  for (const example of examples) {
    const shown = render(example.markdown);
    const how = verdict(example, shown);
    const entry = listed.examples[example.number];
    if (how !== "different") {
      counts[how] += 1;
      if (entry !== undefined) problems.push(`example ${example.number} passes now: remove it from deviations.json`);
      continue;
    }
    counts.listed += 1;
    if (entry === undefined) {
      problems.push(`example ${example.number} (${example.section}) differs and is not listed:\n  markdown ${JSON.stringify(example.markdown)}\n  spec     ${JSON.stringify(example.html)}\n  shown    ${JSON.stringify(shown)}`);
    } else if (entry.safe !== shown) {
      problems.push(`example ${example.number}: shown ${JSON.stringify(shown)}, listed ${JSON.stringify(entry.safe)}`);
    } else if (!(entry.reason in REASONS) || !REASONS[entry.reason](example, shown)) {
      problems.push(`example ${example.number}: the reason "${entry.reason}" does not hold`);
    }
  }
  const missing = Object.keys(listed.examples).filter((n) => !examples.some((e) => e.number === Number(n)));
  problems.push(...missing.map((n) => `deviations.json lists example ${n}, which the spec does not have`));
  t.diagnostic(`commonmark-spec ${specVersion}: ${examples.length} examples; ${counts.spec} as the spec, `
    + `${counts.safety} as the spec with the link and image rules, ${counts.listed} listed deviations`);
  assert.deepEqual(problems, []);
});
