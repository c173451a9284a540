// An exercise's checks and what an attempt made of them, in words: ✓ or ✗,
// points earned of points, the message, the hint of a failed check, and
// what a visible check showed (how the output was compared, the input, the
// run with its prompts and typed lines greyed, a diff of the output, the
// line of an error, clickable). The student's panel and the teacher's view of
// an attempt both show them so.
import { h } from "./dom.js";

const COMPARE_WORDS = { output: "leaving out what input() shows before you type",
  exact: "exactly, what input() shows before you type included",
  normalized: "ignoring spaces and capitals, and what input() shows before you type",
  regex: "matching a pattern, leaving out what input() shows before you type" };

/** "2 points", "1 point". */
export const points = (n) => `${n} point${n === 1 ? "" : "s"}`;

/** A code check's rule in words. */
function ruleWords(rule) {
  const [name, arg] = rule.split(":");
  return { uses_loop: "The code uses a loop (for or while).", defines: `The code defines ${arg}.`,
    no_import: `The code does not import ${arg}.`, uses_call: `The code calls ${arg}().` }[name] || rule;
}

const block = (label, text, cls = "") => h("div", { class: "check-field" },
  h("span", { class: "check-field-label" }, label), h("pre", { class: `check-text ${cls}` }, text === "" ? "(nothing)" : text));

/** A unified diff, its added and removed lines coloured. */
function diffBlock(text) {
  return h("div", { class: "check-field" },
    h("span", { class: "check-field-label" }, "Difference (- expected, + your program's output)"),
    h("pre", { class: "check-text diff" }, text.split("\n").map((line) => h("span", {
      class: line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : "",
    }, line + "\n"))));
}

/** What the program printed, with what it was typed: prompts (when not compared) and typed lines greyed. */
function transcriptBlock(pieces) {
  const has = (kind) => pieces.some(([k]) => k === kind);
  const grey = [has("prompt") ? "what input() showed, not compared" : "", has("typed") ? "what was typed" : ""]
    .filter(Boolean).join("; ");
  return h("div", { class: "check-field" },
    h("span", { class: "check-field-label" }, `Your program's run${grey ? ` (in grey: ${grey})` : ""}`),
    h("pre", { class: "check-text transcript" }, pieces.length ? pieces.map(([kind, text]) =>
      h("span", { class: kind === "output" ? "" : `not-compared ${kind}` }, text)) : "(nothing)"));
}

/** What a visible check showed: {input, expected, actual, diff, compare, transcript} or {line, file, expected, actual}. */
export function shownDetails(shown, openLine) {
  if (!shown || typeof shown !== "object") return [];
  const out = [];
  if (typeof shown.line === "number") {
    const where = `line ${shown.line}${shown.file ? ` of ${shown.file}` : ""}`;
    out.push(openLine
      ? h("button", { type: "button", class: "btn small check-line", onclick: () => openLine(shown.file, shown.line) },
        `Go to ${where}`)
      : h("p", { class: "check-where" }, `At ${where}.`));
  }
  if (typeof shown.compare === "string") {
    out.push(h("p", { class: "check-compare" }, `Compared ${COMPARE_WORDS[shown.compare] || shown.compare}.`));
  }
  if (typeof shown.input === "string") out.push(block("Input", shown.input));
  const transcript = Array.isArray(shown.transcript) ? shown.transcript : null;
  if (transcript) out.push(transcriptBlock(transcript));
  if (typeof shown.diff === "string" && shown.diff) out.push(diffBlock(shown.diff));
  else {
    if (shown.expected !== undefined) out.push(block("Expected", String(shown.expected)));
    if (shown.actual !== undefined && !transcript) out.push(block("Your program gave", String(shown.actual)));
  }
  return out;
}

/** What a check the student may see does (its face: GET /api/exercises/<class>/<slug>). */
function whatItChecks(face) {
  if (face.hidden) return null;
  const parts = [];
  if (face.kind === "output") {
    parts.push(h("p", {}, `Runs your program with this input and compares what it prints, ${COMPARE_WORDS[face.compare] || face.compare}.`),
      block("Input", face.input), block(face.compare === "regex" ? "Pattern" : "Expected output", face.expected));
  } else if (face.kind === "function") {
    parts.push(h("p", {}, `Runs the test ${face.test} on your functions.`));
  } else if (face.kind === "code") {
    parts.push(h("p", {}, ruleWords(face.rule)));
  }
  if (face.hint) parts.push(h("p", { class: "check-hint" }, `Hint: ${face.hint}`));
  return h("details", { class: "check-about" }, h("summary", {}, "What this check does"), parts);
}

/**
 * One check as a list item: `face` (what the check is; may be null) and
 * `result` (what the last attempt made of it; may be null). openLine(file,
 * line): go to a line a result names (null: not clickable).
 */
export function checkItem(face, result, openLine = null) {
  const state = !result ? "none" : result.passed ? "passed" : "failed";
  const mark = { none: "•", passed: "✓", failed: "✗" }[state];
  const label = result?.label || face?.label || result?.id;
  const max = result?.points ?? face?.points ?? 0;
  return h("li", { class: "check-item", dataset: { check: result?.id || face?.id, state } },
    h("div", { class: "check-head" },
      h("span", { class: "check-mark", "aria-hidden": "true" }, mark),
      h("span", { class: "check-label" }, label,
        h("span", { class: "sr-only" }, { none: "", passed: ": passed", failed: ": not passed" }[state])),
      h("span", { class: "check-points" }, result ? `${result.earned}/${max}` : points(max))),
    result?.message ? h("p", { class: "check-message" }, result.message) : null,
    result && !result.passed && result.hint ? h("p", { class: "check-hint" }, `Hint: ${result.hint}`) : null,
    result ? shownDetails(result.shown, openLine) : null,
    face ? whatItChecks(face) : null);
}

/** The checks of an exercise with the results of an attempt, in order; results of checks no longer there last. */
export function checkList(faces, results, openLine) {
  const byId = new Map((results || []).map((r) => [r.id, r]));
  const items = faces.map((f) => checkItem(f, byId.get(f.id) || null, openLine));
  const known = new Set(faces.map((f) => f.id));
  for (const r of results || []) if (!known.has(r.id)) items.push(checkItem(null, r, openLine));
  return h("ul", { class: "check-list" }, items);
}
