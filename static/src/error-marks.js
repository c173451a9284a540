// The lines a run's traceback named, marked in the editor: the innermost
// one with the error's message at its end. A mark stays until the next run
// or until its line is edited; it follows the edits around it.
import { StateEffect, StateField } from "@codemirror/state";
import { Decoration, EditorView, WidgetType } from "@codemirror/view";
import { h } from "./dom.js";

/** value: [{line, message, explanation?}] (message "" for an outer frame); [] clears. */
export const setErrorMarks = StateEffect.define();

/** Under the line, whole and wrapped (at the line's end it was cut at the
 * editor's edge): the error, and the plain sentence about it. */
class Message extends WidgetType {
  constructor(text, explanation) {
    super();
    this.text = text;
    this.explanation = explanation || "";
  }

  eq(other) {
    return other.text === this.text && other.explanation === this.explanation;
  }

  toDOM(view) {
    // As wide as the visible editor, not as the longest line; sticky, so
    // it stays in view when the code is scrolled sideways.
    const width = view.scrollDOM.clientWidth - view.contentDOM.offsetLeft - 24;
    return h("div", { class: "cm-run-error-note", style: `max-width: ${Math.max(160, width)}px` },
      h("span", { class: "cm-run-error-message" }, this.text),
      this.explanation ? h("span", { class: "cm-run-error-explanation" }, this.explanation) : null);
  }
}

function build(doc, marks) {
  const ranges = [];
  for (const { line, message, explanation } of marks) {
    if (line < 1 || line > doc.lines) continue;
    const at = doc.line(line);
    ranges.push(Decoration.line({ class: message ? "cm-run-error-line" : "cm-run-frame-line" }).range(at.from));
    if (message) ranges.push(Decoration.widget({ widget: new Message(message, explanation), block: true, side: 1 }).range(at.to));
  }
  return Decoration.set(ranges, true);
}

export const errorMarks = StateField.define({
  create: () => Decoration.none,
  update(marks, tr) {
    for (const e of tr.effects) if (e.is(setErrorMarks)) return build(tr.state.doc, e.value);
    if (!tr.docChanged || marks.size === 0) return marks;
    const edited = [];
    tr.changes.iterChangedRanges((fromA, toA, fromB, toB) => edited.push([fromB, toB]));
    const { doc } = tr.state;
    return marks.map(tr.changes).update({
      filter: (from) => {
        const line = doc.lineAt(from);
        return !edited.some(([a, b]) => a <= line.to && b >= line.from);
      },
    });
  },
  provide: (field) => EditorView.decorations.from(field),
});
