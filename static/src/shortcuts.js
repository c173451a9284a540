// The page's keyboard shortcuts (help.js lists them for people). They work
// from anywhere on the page, the editor and the console included, but not
// while a dialog is open.

/** Shortcut name -> whether a keyboard event is it. */
const KEYS = {
  run: (e, mod) => e.key === "F5" || (mod && !e.shiftKey && e.key === "Enter"),
  stop: (e, mod) => mod && e.shiftKey && e.key === "Enter",
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

function typingTarget(t) {
  return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}

/** The name of the shortcut `e` is, or null. */
function shortcutOf(e) {
  const mod = e.ctrlKey || e.metaKey;
  return Object.keys(KEYS).find((name) => KEYS[name](e, mod)) || null;
}

/** Whether the page, not the widget with the focus, handles `e`. */
export function isShortcut(e) {
  return shortcutOf(e) !== null;
}

/** actions: shortcut name -> function. */
export function installShortcuts(actions) {
  window.addEventListener("keydown", (e) => {
    if (document.querySelector("dialog[open]")) return;
    const name = shortcutOf(e);
    if (!name) return;
    e.preventDefault();
    e.stopPropagation();
    actions[name]();
  }, true); // before the editor and the console see it
}
