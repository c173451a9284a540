// The code editor: one CodeMirror view; each open file keeps its own
// EditorState (text, undo history, selection), swapped in on tab switch.
import { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, dropCursor, highlightSpecialChars, rectangularSelection } from "@codemirror/view";
import { EditorState, Compartment } from "@codemirror/state";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { searchKeymap, highlightSelectionMatches, search } from "@codemirror/search";
import { bracketMatching, indentOnInput, foldGutter, foldKeymap, syntaxHighlighting,
  defaultHighlightStyle, indentUnit } from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap, autocompletion, completionKeymap } from "@codemirror/autocomplete";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { settings } from "./settings.js";

const themeSlot = new Compartment();
const labelSlot = new Compartment();

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

function languageFor(path) {
  return /\.pyw?$/i.test(path) ? python() : [];
}

/** The extensions every editor shares. */
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
    autocompletion({ activateOnTyping: true }),
    rectangularSelection(),
    highlightActiveLine(),
    highlightSelectionMatches(),
    search({ top: true }),
    keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap,
      ...completionKeymap, indentWithTab]),
    labelSlot.of(label(path)),
    baseTheme,
    themeSlot.of(themeFor(settings.get("theme"))),
    EditorState.readOnly.of(readOnly),
    EditorView.editable.of(!readOnly),
    languageFor(path),
  ];
}

export class Editor {
  /** onChange() is called after each edit of the shown document. */
  constructor(parent, { onChange }) {
    this.current = null;
    this.view = new EditorView({
      parent,
      state: EditorState.create({ doc: "", extensions: commonExtensions({ path: "", readOnly: true }) }),
      dispatchTransactions: (trs, view) => {
        view.update(trs);
        if (trs.some((tr) => tr.docChanged)) onChange();
      },
    });
    settings.addEventListener("change", () => this.restyle());
  }

  /** A new state for a file's text. */
  createState(text, path, readOnly) {
    return EditorState.create({ doc: text, extensions: commonExtensions({ path, readOnly }) });
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
    this.view.dispatch({ effects: themeSlot.reconfigure(themeFor(settings.get("theme"))) });
    this.view.requestMeasure();
  }

  focus() {
    this.view.focus();
  }
}

/** A small read-only viewer (history previews). */
export function viewer(parent, text, path) {
  return new EditorView({ parent, state: EditorState.create({ doc: text, extensions: commonExtensions({ path, readOnly: true }) }) });
}
