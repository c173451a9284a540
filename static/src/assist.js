// Editing help in the editor, from the server's /api/assist/* (jedi and
// pyflakes, server/assist/): completions, the signature of the call being
// typed, and mistakes underlined while typing.
//
// Completion never takes a key the student types for something else: Enter
// is always a new line, Tab accepts only while the list is open (else it
// indents), Ctrl+Space opens or accepts. It is offered when useful: after a
// dot, or after two letters of a name, not in strings or comments. The
// server is asked once per word (the list is then filtered here), after a
// pause in typing, and a request the student has typed past is cancelled.
import { autocompletion, acceptCompletion, closeCompletion, completionStatus, moveCompletionSelection,
  startCompletion } from "@codemirror/autocomplete";
import { linter, lintGutter } from "@codemirror/lint";
import { globalCompletion, localCompletionSource } from "@codemirror/lang-python";
import { syntaxTree } from "@codemirror/language";
import { Prec, StateEffect, StateField } from "@codemirror/state";
import { EditorView, keymap, showTooltip, ViewPlugin } from "@codemirror/view";
import { post } from "./api.js";
import { h } from "./dom.js";

const TYPING_PAUSE_MS = 150; // before a completion is asked for
const SIGNATURE_PAUSE_MS = 250;
const CHECK_PAUSE_MS = 600; // diagnostics, after typing stops
const WORD = /[\p{L}\p{N}_]+$/u;
const NAME = /^[\p{L}\p{N}_]*$/u;
const NUMBER_BEFORE = /(^|[^\p{L}\p{N}_])\d+$/u;
const QUIET = /String|Comment/; // syntax nodes where nothing is offered unasked
const TYPES = { module: "namespace", class: "class", function: "function", instance: "variable",
  statement: "variable", param: "variable", keyword: "keyword", property: "property" };

// -- positions: the server counts columns in characters (code points) ---------

function codePoints(text) {
  let n = 0;
  for (const _ of text) n++; // eslint-disable-line no-unused-vars
  return n;
}

/** {line, column} of a position, as the server counts them. */
export function place(doc, pos) {
  const line = doc.lineAt(pos);
  return { line: line.number, column: codePoints(line.text.slice(0, pos - line.from)) };
}

/** The position of a line (1-based) and a column in code points. */
export function positionOf(doc, line, column) {
  const at = doc.line(Math.min(Math.max(line, 1), doc.lines));
  let offset = 0;
  let n = 0;
  for (const ch of at.text) {
    if (n >= column) break;
    offset += ch.length;
    n++;
  }
  return at.from + offset;
}

// -- asking the server ----------------------------------------------------------

/** where(): {area, path} of the file shown, or null. */
let off = () => false; // (helpOff)

/** Editing help stays quiet while `isOff()` says so (an exam that does not allow it). */
export function helpOff(isOff) {
  off = isOff;
}

async function ask(op, where, state, pos, extra, signal) {
  const file = where();
  if (!file || off()) return null;
  const body = { area: file.area, path: file.path, source: state.doc.toString(), ...extra };
  if (pos !== null) Object.assign(body, place(state.doc, pos));
  return post(`/api/assist/${op}`, body, { signal });
}

// -- completions ----------------------------------------------------------------

function quiet(state, pos) {
  for (let node = syntaxTree(state).resolveInner(pos, -1); node; node = node.parent) {
    if (QUIET.test(node.name)) return true;
  }
  return false;
}

function describer(where, state, pos, name) {
  return async () => {
    let answer;
    try {
      answer = await ask("describe", where, state, pos, { name });
    } catch {
      return null;
    }
    if (!answer || (!answer.signature && !answer.doc)) return null;
    return h("div", { class: "assist-info" },
      answer.signature ? h("code", { class: "assist-signature" }, answer.signature) : null,
      answer.doc ? h("div", { class: "assist-doc" }, answer.doc) : null);
  };
}

function completionSource(where) {
  return async (context) => {
    const word = context.matchBefore(WORD);
    const start = word ? word.from : context.pos;
    const afterDot = context.state.sliceDoc(start - 1, start) === "."
      && !NUMBER_BEFORE.test(context.state.sliceDoc(context.state.doc.lineAt(start).from, start - 1)); // 3.14
    if (!context.explicit && (!(afterDot || (word && word.to - word.from >= 2)) || quiet(context.state, start))) {
      return null;
    }
    const controller = new AbortController();
    context.addEventListener("abort", () => controller.abort(), { onDocChange: true });
    let answer;
    try {
      answer = await ask("complete", where, context.state, context.pos, {}, controller.signal);
    } catch (e) {
      if (e.name === "AbortError" || e.code === "superseded") return null;
      answer = null; // no help from the server now: the names in this file still are
    }
    if (!answer) return localCompletionSource(context) || globalCompletion(context);
    const typed = context.state.sliceDoc(start, context.pos);
    const prefix = [...typed].slice(-answer.prefix).join("");
    const from = context.pos - prefix.length;
    return {
      from,
      // The server ranks what a beginner most likely means first
      // (server/assist/child/ranking.py): the boost keeps its order.
      options: answer.completions.map((c, i) => ({
        label: c.name,
        type: TYPES[c.type],
        boost: Math.max(-99, 99 - i),
        info: describer(where, context.state, context.pos, c.name),
      })),
      // Typing on within the word filters this list; going back past what
      // the server was asked for asks again.
      validFor: (text) => NAME.test(text) && text.toLowerCase().startsWith(prefix.toLowerCase()),
    };
  };
}

/** Tab and Ctrl+Space accept while the list is open (or coming): nothing else does. */
function acceptOrKeep(view) {
  const status = completionStatus(view.state);
  if (status === "active") return acceptCompletion(view) || true;
  return status === "pending";
}

const completionKeys = [
  { key: "Ctrl-Space", run: (view) => acceptOrKeep(view) || startCompletion(view) },
  { key: "Tab", run: acceptOrKeep },
  { key: "Escape", run: closeCompletion },
  { key: "ArrowDown", run: moveCompletionSelection(true) },
  { key: "ArrowUp", run: moveCompletionSelection(false) },
  { key: "PageDown", run: moveCompletionSelection(true, "page") },
  { key: "PageUp", run: moveCompletionSelection(false, "page") },
];

// -- the signature of the call being typed ------------------------------------------

const setSignature = StateEffect.define();

const signatureField = StateField.define({
  create: () => null,
  update(value, tr) {
    for (const e of tr.effects) if (e.is(setSignature)) return e.value;
    if (value && tr.docChanged) return { ...value, pos: tr.changes.mapPos(value.pos) };
    return value;
  },
  provide: (field) => showTooltip.from(field, (value) => value && {
    pos: value.pos,
    above: true,
    create: () => ({ dom: signatureDom(value.signature) }),
  }),
});

function signatureDom(sig) {
  const label = [...sig.label]; // spans count code points
  const active = sig.params[sig.index];
  const parts = active
    ? [label.slice(0, active[0]).join(""), h("strong", {}, label.slice(active[0], active[1]).join("")),
      label.slice(active[1]).join("")]
    : [sig.label];
  const doc = sig.doc ? sig.doc.split(/\n\s*\n/)[0] : "";
  return h("div", { class: "assist-signature-help", role: "tooltip" },
    h("code", {}, parts), doc ? h("div", { class: "assist-doc" }, doc) : null);
}

/** Whether the cursor is between a call's parentheses. */
function inCall(state, pos) {
  for (let node = syntaxTree(state).resolveInner(pos, -1); node; node = node.parent) {
    if (node.name === "ArgList") return pos > node.from;
    if (QUIET.test(node.name) || node.name === "Body") return false;
  }
  return false;
}

function signaturePlugin(where) {
  return ViewPlugin.fromClass(class {
    constructor(view) {
      this.view = view;
      this.controller = null;
      this.timer = null;
    }

    update(update) {
      if (!update.docChanged && !update.selectionSet) return;
      clearTimeout(this.timer);
      this.controller?.abort();
      const { state } = update.view;
      const pos = state.selection.main.head;
      if (!state.selection.main.empty || !inCall(state, pos)) {
        if (state.field(signatureField)) queueMicrotask(() => this.show(null));
        return;
      }
      this.timer = setTimeout(() => this.ask(state, pos), SIGNATURE_PAUSE_MS);
    }

    async ask(state, pos) {
      const controller = this.controller = new AbortController();
      let answer = null;
      try {
        answer = await ask("signatures", where, state, pos, {}, controller.signal);
      } catch {
        // no signature shown: typing goes on as before
      }
      if (controller.signal.aborted || this.view.state.doc !== state.doc) return;
      const [signature] = answer?.signatures || [];
      this.show(signature ? { pos, signature } : null);
    }

    show(value) {
      if (this.view.state.field(signatureField, false) !== value) this.view.dispatch({ effects: setSignature.of(value) });
    }

    destroy() {
      clearTimeout(this.timer);
      this.controller?.abort();
    }
  });
}

const closeSignature = (view) => {
  if (!view.state.field(signatureField)) return false;
  view.dispatch({ effects: setSignature.of(null) });
  return true;
};

// -- mistakes, underlined while typing ----------------------------------------------

function checker(where) {
  let controller = null;
  return async (view) => {
    controller?.abort();
    controller = new AbortController();
    const { state } = view;
    let answer;
    try {
      answer = await ask("check", where, state, null, {}, controller.signal);
    } catch {
      return []; // no underlines rather than stale ones
    }
    return (answer?.diagnostics || []).map((d) => ({
      from: positionOf(state.doc, d.line, d.column),
      to: positionOf(state.doc, d.line, d.end_column),
      severity: d.severity,
      message: d.message,
      source: "Python",
    }));
  };
}

/** The editing help for a Python file the student may change. */
export function assistExtensions(where) {
  return [
    // No interaction delay: Tab at the end of a word is never meant to indent it.
    autocompletion({ override: [completionSource(where)], defaultKeymap: false, activateOnTypingDelay: TYPING_PAUSE_MS,
      interactionDelay: 0 }),
    Prec.high(keymap.of([...completionKeys, { key: "Escape", run: closeSignature }])), // before Tab's indent
    signatureField,
    signaturePlugin(where),
    linter(checker(where), { delay: CHECK_PAUSE_MS }),
    lintGutter(),
    EditorView.baseTheme({
      ".assist-signature-help": { padding: "3px 8px", maxWidth: "40rem", fontSize: "90%" },
      ".assist-signature-help code, .assist-signature": { fontFamily: "var(--mono)", whiteSpace: "pre-wrap" },
      ".assist-doc": { whiteSpace: "pre-wrap", marginTop: "4px", maxHeight: "12rem", overflow: "auto" },
      ".assist-info": { maxWidth: "32rem" },
    }),
  ];
}
