// The keyboard shortcuts, in a dialog (F1 or ?).
import { h } from "./dom.js";
import { openDialog } from "./dialog.js";

const SHORTCUTS = [
  ["Run the current file", "Ctrl+Enter · F5"],
  ["Stop the program", "Ctrl+Shift+Enter · Shift+F5"],
  ["Debug the current file (it pauses at its first line)", "Ctrl+F5"],
  ["Debugging, paused: step over (run this line, pause at the next)", "F10 · Ctrl+'"],
  ["Debugging, paused: step into the function this line calls", "F11 · Ctrl+;"],
  ["Debugging, paused: step out (finish this function)", "Shift+F11 · Ctrl+Shift+;"],
  ["Debugging, paused: continue to the next breakpoint", "F5 · Ctrl+\\"],
  ["Save now (it also saves by itself)", "Ctrl+S"],
  ["Find / replace", "Ctrl+F · Ctrl+H"],
  ["Comment or uncomment lines", "Ctrl+/"],
  ["Indent / unindent", "Tab · Shift+Tab"],
  ["Suggestions: show them / take the chosen one (Enter is always a new line)", "Ctrl+Space · Tab"],
  ["Go to the next underlined mistake", "F8"],
  ["Leave the editor (Tab then moves on)", "Esc"],
  ["Undo / redo", "Ctrl+Z · Ctrl+Y"],
  ["Go to the file tree / editor / console", "Alt+1 · Alt+2 · Alt+3"],
  ["Hide / show the file tree", "Ctrl+B"],
  ["Next / previous open file", "Alt+PageDown · Alt+PageUp"],
  ["On the tab of an open file: close it", "Delete"],
  ["Bigger / smaller code", "Ctrl+Alt+= · Ctrl+Alt+-"],
  ["In the console: copy the selected text", "Ctrl+C"],
  ["In the console, nothing selected: interrupt (KeyboardInterrupt)", "Ctrl+C"],
  ["In the console: end of input (EOFError)", "Ctrl+D"],
  ["In the file tree: open, rename, delete", "Enter · F2 · Delete"],
  ["This list", "F1 · ?"],
];

export function helpDialog() {
  return openDialog({
    title: "Keyboard shortcuts",
    body: h("table", { class: "shortcuts" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "What"), h("th", { scope: "col" }, "Keys"))),
      h("tbody", {}, SHORTCUTS.map(([what, keys]) =>
        h("tr", {}, h("td", {}, what), h("td", {}, keys.split(" · ").map((k, i) =>
          [i ? " or " : "", ...k.split("+").map((part, j) => [j ? "+" : "", h("kbd", {}, part)])])))))),
    className: "help-dialog",
    scrolls: true,
    buttons: [{ label: "Close", value: true, kind: "primary" }],
  });
}
