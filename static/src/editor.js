// The code editor: one CodeMirror view; each open file keeps its own
// EditorState (text, undo history, selection), swapped in on tab switch.
// A Python file the student may change also gets editing help (assist.js)
// and the marks of the last run's error (error-marks.js).
import { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, dropCursor, highlightSpecialChars, rectangularSelection } from "@codemirror/view";
import { EditorState, Compartment, EditorSelection } from "@codemirror/state";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { searchKeymap, highlightSelectionMatches, search } from "@codemirror/search";
import { bracketMatching, indentOnInput, foldGutter, foldKeymap, syntaxHighlighting,
  defaultHighlightStyle, indentUnit } from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { settings } from "./settings.js";
import { runsHere } from "./api.js";
import { assistExtensions } from "./assist.js";
import { errorMarks, setErrorMarks } from "./error-marks.js";
import { breakpointGutter, pausedLine, setPausedLine } from "./debug-marks.js";

const themeSlot = new Compartment();
const labelSlot = new Compartment();
const wrapSlot = new Compartment();

const label = (path) => EditorView.contentAttributes.of({ "aria-label": `Code editor: ${path}` });

const lightTheme = [syntaxHighlighting(defaultHighlightStyle, { fallback: true })];

function themeFor(name) {
  return name === "dark" ? oneDark : lightTheme;
}

const baseTheme = EditorView.theme({
  "&": { height: "100%", fontSize: "var(--code-size)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.5" },
  ".cm-content": { paddingBottom: "40vh" },
});

const isPython = (path) => /\.pyw?$/i.test(path);

function languageFor(path) {
  return isPython(path) ? python() : [];
}

const wrapping = () => (settings.get("wrap") ? EditorView.lineWrapping : []);

/** The extensions every editor shares (no completion: see Editor.createState). */
export function commonExtensions({ path = "x.py", readOnly = false } = {}) {
  return [
    lineNumbers(),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    foldGutter(),
    drawSelection(),
    dropCursor(),
    EditorState.allowMultipleSelections.of(true),
    indentOnInput(),
    indentUnit.of("    "),
    EditorState.tabSize.of(4),
    bracketMatching(),
    closeBrackets(),
    rectangularSelection(),
    highlightActiveLine(),
    highlightSelectionMatches(),
    search({ top: true }),
    keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap,
      indentWithTab]),
    labelSlot.of(label(path)),
    baseTheme,
    themeSlot.of(themeFor(settings.get("theme"))),
    wrapSlot.of(wrapping()),
    EditorState.readOnly.of(readOnly),
    EditorView.editable.of(!readOnly),
    // Tab reaches the text, to scroll and read it, even read-only (not contenteditable then) (WCAG 2.1.1).
    EditorView.contentAttributes.of({ tabindex: "0" }),
    languageFor(path),
  ];
}

export class Editor {
  /** onChange() is called after each edit of the shown document;
   * `breakpoints` (debug-marks.js) keeps the breakpoints of the Python files that can be debugged. */
  constructor(parent, { onChange, breakpoints = null }) {
    this.current = null;
    this.breakpoints = breakpoints;
    const where = () => this.current && { area: this.current.area, path: this.current.path };
    this.assist = assistExtensions(where);
    this.view = new EditorView({
      parent,
      state: EditorState.create({ doc: "", extensions: commonExtensions({ path: "", readOnly: true }) }),
      dispatchTransactions: (trs, view) => {
        view.update(trs);
        if (!trs.some((tr) => tr.docChanged)) return;
        this.current?.edited(trs);
        onChange();
      },
    });
    settings.addEventListener("change", () => this.restyle());
  }

  /** A new state for a file's text (of `area`: the Python files that run can be debugged, read-only ones too). */
  createState(text, path, readOnly, area = "home") {
    const helped = !readOnly && isPython(path) ? this.assist : [];
    const debuggable = runsHere(area) && isPython(path) && this.breakpoints;
    const doc = EditorState.create({ doc: text }).doc;
    const debug = debuggable ? [breakpointGutter(this.breakpoints, area, path, doc), pausedLine] : [];
    return EditorState.create({ doc: text, extensions: [commonExtensions({ path, readOnly }), helped, errorMarks, debug] });
  }

  /** Show `doc` (a Doc); the one shown before keeps its state. */
  show(doc) {
    if (this.current && this.current !== doc) this.current.detach();
    this.current = doc;
    doc.attach(this.view);
    this.view.dispatch({ effects: labelSlot.reconfigure(label(doc.path)) }); // it may have been renamed
    this.restyle();
  }

  restyle() {
    this.view.dispatch({ effects: [themeSlot.reconfigure(themeFor(settings.get("theme"))),
      wrapSlot.reconfigure(wrapping())] });
    this.view.requestMeasure();
  }

  focus() {
    this.view.focus();
  }

  /** Type `text` at the cursor of the shown file, as if typed there (it is saved as any typing);
   * false if no file that takes typing is shown. */
  typeIn(text) {
    if (!this.current || this.current.readOnly) return false;
    this.view.dispatch(this.view.state.replaceSelection(text), { userEvent: "input.type", scrollIntoView: true });
    return true;
  }

  /** The line (from 1) the cursor is on. */
  cursorLine() {
    const { state } = this.view;
    return state.doc.lineAt(state.selection.main.head).number;
  }

  /** Put the cursor at the start of `line` of the shown file, in view. */
  goTo(line) {
    const { doc } = this.view.state;
    const at = doc.line(Math.min(Math.max(line, 1), doc.lines));
    this.view.dispatch({ selection: EditorSelection.cursor(at.from + /^\s*/.exec(at.text)[0].length),
      effects: EditorView.scrollIntoView(at.from, { y: "center" }) });
    this.view.focus();
  }

  /** Show the line `doc` is paused at in the debugger (null: none). */
  markPaused(doc, line) {
    doc.dispatch({ effects: setPausedLine.of(line) });
  }

  /** Mark a run's error lines in `doc` ([{line, message}]; [] clears). */
  markErrors(doc, marks) {
    doc.dispatch({ effects: setErrorMarks.of(marks) });
  }
}
