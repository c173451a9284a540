// What the debugger shows in the editor: the breakpoints, set and cleared
// by clicking the gutter beside a line (they move with the edits around
// them, and are kept per file in this browser), and the line the program
// is paused at.
import { StateEffect, StateField, RangeSet } from "@codemirror/state";
import { Decoration, EditorView, GutterMarker, gutter } from "@codemirror/view";
import { h } from "./dom.js";

/** The folder a run of `path` of `area` runs in, as the start of that area's
 * paths: the home ("") for a file of the home; for a course file, its folder
 * (its read-only copy holds the files beside it, by name). */
export const runFolder = (area, path) => (area === "home" ? "" : path.slice(0, path.lastIndexOf("/") + 1));

const FILES = 100; // at most, in one run's breakpoints (the server's bound)
const LINES = 1000; // in all

/** The breakpoints of the files of one user's home and course folders, in
 * localStorage ({path: [line, ...]} per area; the home's under the key it
 * always had). A "change" event when some change. */
export class Breakpoints extends EventTarget {
  constructor(username) {
    super();
    this.prefix = `pyc.${username}.breakpoints`;
    this.areas = new Map(); // area -> {path: [line, ...]}, read when first needed
  }

  key(area) {
    return area === "home" ? this.prefix : `${this.prefix}.${area}`;
  }

  filesOf(area) {
    if (!this.areas.has(area)) {
      let kept;
      try {
        kept = JSON.parse(localStorage.getItem(this.key(area)) || "{}");
      } catch {
        kept = null;
      }
      this.areas.set(area, kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {});
    }
    return this.areas.get(area);
  }

  of(area, path) {
    const lines = this.filesOf(area)[path];
    return Array.isArray(lines) ? lines.filter((n) => Number.isInteger(n) && n > 0) : [];
  }

  set(area, path, lines) {
    const files = this.filesOf(area);
    if (lines.length) files[path] = lines;
    else delete files[path];
    try {
      localStorage.setItem(this.key(area), JSON.stringify(files));
    } catch {
      // full or forbidden: kept for this page only
    }
    this.dispatchEvent(new Event("change"));
  }

  /** The breakpoints of a run of `path` of `area`, as the server takes
   * them: paths of the run's folder. That is the home for a file of the
   * home; for a course file, its read-only copy's folder, which holds the
   * files beside it (by name). */
  forRun(area, path) {
    const folder = runFolder(area, path);
    const inRun = (file) => area === "home" || (file.startsWith(folder) && !file.slice(folder.length).includes("/"));
    const out = {};
    let count = 0;
    for (const file of Object.keys(this.filesOf(area)).filter(inRun)) {
      const lines = this.of(area, file).slice(0, LINES - count);
      if (!lines.length) continue;
      out[file.slice(folder.length)] = lines;
      count += lines.length;
      if (Object.keys(out).length >= FILES || count >= LINES) break;
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

/** The breakpoint gutter of a file `path` of `area`, kept in `store`. */
export function breakpointGutter(store, area, path, doc) {
  const field = StateField.define({
    create: () => RangeSet.of(lineStarts(doc, store.of(area, path)).map((pos) => dot.range(pos))),
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
    store.set(area, path, [...lines].sort((a, b) => a - b));
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
