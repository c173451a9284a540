// What the debugger shows in the editor: the breakpoints, set and cleared
// by clicking the gutter beside a line (they move with the edits around
// them, and are kept per file in this browser), and the line the program
// is paused at.
import { StateEffect, StateField, RangeSet } from "@codemirror/state";
import { Decoration, EditorView, GutterMarker, gutter } from "@codemirror/view";
import { h } from "./dom.js";

/** The breakpoints of every file of one user's home, in localStorage: {path: [line, ...]}. */
export class Breakpoints extends EventTarget {
  constructor(username) {
    super();
    this.key = `pyc.${username}.breakpoints`;
    try {
      const kept = JSON.parse(localStorage.getItem(this.key) || "{}");
      this.files = kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {};
    } catch {
      this.files = {};
    }
  }

  of(path) {
    const lines = this.files[path];
    return Array.isArray(lines) ? lines.filter((n) => Number.isInteger(n) && n > 0) : [];
  }

  set(path, lines) {
    if (lines.length) this.files[path] = lines;
    else delete this.files[path];
    try {
      localStorage.setItem(this.key, JSON.stringify(this.files));
    } catch {
      // full or forbidden: kept for this page only
    }
    this.dispatchEvent(new Event("change"));
  }

  /** All of them, as the server takes them (at most 100 files). */
  all() {
    const out = {};
    for (const path of Object.keys(this.files).slice(0, 100)) {
      const lines = this.of(path).slice(0, 200);
      if (lines.length) out[path] = lines;
    }
    return out;
  }
}

const toggle = StateEffect.define({ map: (pos, mapping) => mapping.mapPos(pos) });

class Dot extends GutterMarker {
  toDOM() {
    return h("span", { class: "cm-breakpoint", title: "Breakpoint: Debug stops here. Click to remove it." }, "●");
  }
}
const dot = new Dot();

class Spacer extends GutterMarker {
  toDOM() {
    return h("span", { class: "cm-breakpoint-spacer", "aria-hidden": "true" }, "●");
  }
}

function lineStarts(doc, lines) {
  return lines.filter((n) => n <= doc.lines).map((n) => doc.line(n).from).sort((a, b) => a - b);
}

/** The breakpoint gutter of a file `path` of the home, kept in `store`. */
export function breakpointGutter(store, path, doc) {
  const field = StateField.define({
    create: () => RangeSet.of(lineStarts(doc, store.of(path)).map((pos) => dot.range(pos))),
    update(set, tr) {
      set = set.map(tr.changes);
      for (const e of tr.effects) {
        if (!e.is(toggle)) continue;
        let had = false;
        set = set.update({ filter: (from) => (from === e.value ? ((had = true), false) : true) });
        if (!had) set = set.update({ add: [dot.range(e.value)] });
      }
      return set;
    },
  });
  const keep = EditorView.updateListener.of((update) => {
    if (update.startState.field(field) === update.state.field(field)) return;
    const lines = new Set();
    const cursor = update.state.field(field).iter();
    for (; cursor.value; cursor.next()) lines.add(update.state.doc.lineAt(cursor.from).number);
    store.set(path, [...lines].sort((a, b) => a - b));
  });
  return [field, keep, gutter({
    class: "cm-breakpoint-gutter",
    markers: (view) => view.state.field(field),
    initialSpacer: () => new Spacer(),
    domEventHandlers: {
      mousedown(view, line) {
        view.dispatch({ effects: toggle.of(line.from) });
        return true;
      },
    },
  })];
}

/** value: the line (from 1) the program is paused at, or null. */
export const setPausedLine = StateEffect.define();

export const pausedLine = StateField.define({
  create: () => Decoration.none,
  update(marks, tr) {
    for (const e of tr.effects) {
      if (!e.is(setPausedLine)) continue;
      const line = e.value;
      if (!line || line > tr.state.doc.lines) return Decoration.none;
      return Decoration.set([Decoration.line({ class: "cm-paused-line" }).range(tr.state.doc.line(line).from)]);
    }
    return marks.map(tr.changes);
  },
  provide: (field) => EditorView.decorations.from(field),
});
