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
const readOnlySlot = new Compartment();
const languageSlot = new Compartment();
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

/** The extensions every editor shares; `extra` adds to them (the page's keys). */
export function commonExtensions({ path = "x.py", readOnly = false, extra = [] } = {}) {
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
    readOnlySlot.of([EditorState.readOnly.of(readOnly), EditorView.editable.of(!readOnly)]),
    languageSlot.of(languageFor(path)),
    ...extra,
  ];
}

export class Editor {
  /** onChange(state) is called after each edit of the shown document. */
  constructor(parent, { onChange, keys = [] }) {
    this.onChange = onChange;
    this.keys = keys;
    this.view = new EditorView({
      parent,
      state: EditorState.create({ doc: "", extensions: this.extensions("", true) }),
      dispatchTransactions: (trs, view) => {
        view.update(trs);
        if (trs.some((tr) => tr.docChanged)) this.onChange(view.state);
      },
    });
    settings.addEventListener("change", () => this.restyle());
  }

  extensions(path, readOnly) {
    return commonExtensions({
      path, readOnly,
      extra: [keymap.of(this.keys), EditorView.updateListener.of((u) => {
        if (this.current && (u.docChanged || u.selectionSet)) this.current.state = u.state;
      })],
    });
  }

  /** A new state for a file's text. */
  createState(text, path, readOnly) {
    return EditorState.create({ doc: text, extensions: this.extensions(path, readOnly) });
  }

  /** Show `doc` (which has .state); remembers the state of the one shown before. */
  show(doc) {
    if (this.current && this.current !== doc) this.current.state = this.view.state;
    this.current = doc;
    this.view.setState(doc.state);
    this.view.dispatch({ effects: labelSlot.reconfigure(label(doc.path)) }); // it may have been renamed
    this.restyle();
  }

  restyle() {
    this.view.dispatch({ effects: themeSlot.reconfigure(themeFor(settings.get("theme"))) });
    if (this.current) this.current.state = this.view.state;
    this.view.requestMeasure();
  }

  /** Replace the whole text of the shown document (keeps undo). */
  replaceText(text) {
    const view = this.view;
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    if (this.current) this.current.state = view.state;
  }

  setReadOnly(readOnly) {
    this.view.dispatch({
      effects: readOnlySlot.reconfigure([EditorState.readOnly.of(readOnly), EditorView.editable.of(!readOnly)]),
    });
    if (this.current) this.current.state = this.view.state;
  }

  focus() {
    this.view.focus();
  }
}

/** A small read-only viewer (history previews). */
export function viewer(parent, text, path) {
  return new EditorView({ parent, state: EditorState.create({ doc: text, extensions: commonExtensions({ path, readOnly: true }) }) });
}
