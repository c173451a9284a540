// The page's keyboard shortcuts (help.js lists them for people). They work
// from anywhere on the page, the editor and the console included, but not
// while a dialog is open. The debugger's keys are VS Code's (F10, F11,
// Shift+F11, F5 to continue, Shift+F5 to stop) and Thonny's Ctrl+F5 to
// start: Chromium gives function keys to the page before it uses them
// (reload, full screen), and preventDefault then cancels its use. A
// Chromebook has no F10 or F11: the steps also have Chrome DevTools' keys
// (Ctrl+' Ctrl+; Ctrl+Shift+; Ctrl+\), by their place on the keyboard.

const plain = (e) => !e.ctrlKey && !e.metaKey && !e.altKey && !e.shiftKey;
const onlyShift = (e) => e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey;
const modKey = (e, mod, code, shift = false) => mod && !e.altKey && e.shiftKey === shift && e.code === code;

/** While a program is being debugged, these keys are the debugger's (F5
 * continues instead of running); else they are left to the browser (F11:
 * full screen), or F5 to Run. */
const DEBUGGER_KEYS = {
  continue: (e, mod) => (plain(e) && e.key === "F5") || modKey(e, mod, "Backslash"),
  stepOver: (e, mod) => (plain(e) && e.key === "F10") || modKey(e, mod, "Quote"),
  stepInto: (e, mod) => (plain(e) && e.key === "F11") || modKey(e, mod, "Semicolon"),
  stepOut: (e, mod) => (onlyShift(e) && e.key === "F11") || modKey(e, mod, "Semicolon", true),
};

/** Shortcut name -> whether a keyboard event is it. */
const KEYS = {
  run: (e, mod) => (plain(e) && e.key === "F5") || (mod && !e.shiftKey && e.key === "Enter"),
  debug: (e, mod) => mod && !e.shiftKey && !e.altKey && e.key === "F5",
  stop: (e, mod) => (mod && e.shiftKey && e.key === "Enter") || (onlyShift(e) && e.key === "F5"),
  save: (e, mod) => mod && !e.altKey && e.key.toLowerCase() === "s",
  help: (e) => e.key === "F1" || (e.key === "?" && !typingTarget(e.target)),
  files: (e) => e.altKey && e.key === "1",
  toggleFiles: (e, mod) => mod && !e.shiftKey && !e.altKey && e.key.toLowerCase() === "b",
  editor: (e) => e.altKey && e.key === "2",
  console: (e) => e.altKey && e.key === "3",
  nextTab: (e) => e.altKey && e.key === "PageDown",
  previousTab: (e) => e.altKey && e.key === "PageUp",
  bigger: (e, mod) => mod && e.altKey && (e.key === "=" || e.key === "+"),
  smaller: (e, mod) => mod && e.altKey && e.key === "-",
};

let debugging = () => false; // whether a program is being debugged (installShortcuts)

function typingTarget(t) {
  return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}

/** The name of the shortcut `e` is, or null. */
function shortcutOf(e) {
  const mod = e.ctrlKey || e.metaKey;
  const table = debugging() ? { ...DEBUGGER_KEYS, ...KEYS } : KEYS; // the debugger's first
  return Object.keys(table).find((name) => table[name](e, mod)) || null;
}

/** Whether the page, not the widget with the focus, handles `e`. */
export function isShortcut(e) {
  return shortcutOf(e) !== null;
}

/** actions: shortcut name -> function; isDebugging(): whether the debugger's keys are on. */
export function installShortcuts(actions, isDebugging) {
  debugging = isDebugging;
  window.addEventListener("keydown", (e) => {
    if (document.querySelector("dialog[open]")) return;
    const name = shortcutOf(e);
    if (!name) return;
    e.preventDefault();
    e.stopPropagation();
    actions[name]();
  }, true); // before the editor and the console see it
}
