// The IDE's panes: the file tree, the editor and the console side by side,
// the two outer ones resizable with the splitters between them (pointer or
// arrow keys) and the file tree hidden and shown with a button (Ctrl+B).
// Sizes are remembered in this browser (settings.js), apart for the
// teacher's page, whose left pane holds the live class.
import { $ } from "./dom.js";
import { settings } from "./settings.js";

const STEP = 24; // px per arrow key
const MIN = { files: 140, console: 260, editor: 320 };

export class Layout {
  constructor() {
    this.root = document.documentElement;
    this.workspace = $(".workspace");
    this.toggle = $("#files-toggle");
    this.toggle.addEventListener("click", () => this.toggleFiles());
    const teacher = document.body.dataset.view === "teacher";
    this.keys = teacher ? { files: "teacherFilesWidth", console: "teacherConsoleWidth" }
      : { files: "filesWidth", console: "consoleWidth" };
    this.splitter($("#split-files"), "files", (rect, x) => x - rect.left);
    this.splitter($("#split-console"), "console", (rect, x) => rect.right - x);
    new ResizeObserver(() => this.apply()).observe(this.workspace);
    this.apply();
  }

  /** The widths, kept where the editor still has room. */
  widths() {
    const total = this.workspace.clientWidth || window.innerWidth;
    const hidden = settings.get("filesHidden");
    const files = hidden ? 0 : clamp(settings.get(this.keys.files), MIN.files, total / 3);
    const room = total - files - MIN.editor;
    return { files, console: clamp(settings.get(this.keys.console), MIN.console, Math.max(MIN.console, room)), hidden };
  }

  apply(override = {}) {
    const w = { ...this.widths(), ...override };
    this.root.style.setProperty("--files-w", `${Math.round(w.files)}px`);
    this.root.style.setProperty("--console-w", `${Math.round(w.console)}px`);
    document.body.classList.toggle("files-hidden", w.hidden);
    this.toggle.setAttribute("aria-expanded", String(!w.hidden));
    this.toggle.title = w.hidden ? "Show the files (Ctrl+B)" : "Hide the files (Ctrl+B)";
    for (const [id, value] of [["#split-files", w.files], ["#split-console", w.console]]) {
      $(id).setAttribute("aria-valuenow", String(Math.round(value)));
    }
  }

  /** The side bar at least `px` wide (an exercise's instructions need room), if there is room. */
  widen(px) {
    if (this.widths().files >= px) return;
    settings.set(this.keys.files, this.bounded("files", px));
    this.apply();
  }

  toggleFiles() {
    settings.set("filesHidden", !settings.get("filesHidden"));
    this.apply();
  }

  /** A splitter that sets the pane `key` ("files" or "console") to width(workspace rect, pointer x). */
  splitter(el, key, width) {
    const setting = this.keys[key];
    el.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      el.setPointerCapture(e.pointerId);
      document.body.classList.add("resizing");
      const move = (ev) => this.apply({ [key]: this.bounded(key, width(this.workspace.getBoundingClientRect(), ev.clientX)) });
      const up = (ev) => {
        el.removeEventListener("pointermove", move);
        el.removeEventListener("pointerup", up);
        document.body.classList.remove("resizing");
        settings.set(setting, this.bounded(key, width(this.workspace.getBoundingClientRect(), ev.clientX)));
        this.apply();
      };
      el.addEventListener("pointermove", move);
      el.addEventListener("pointerup", up);
    });
    el.addEventListener("keydown", (e) => {
      const sign = { ArrowLeft: -1, ArrowRight: 1 }[e.key];
      if (!sign) return;
      e.preventDefault();
      const grow = key === "files" ? sign : -sign; // the console grows to the left
      settings.set(setting, this.bounded(key, this.widths()[key] + grow * STEP));
      this.apply();
    });
  }

  bounded(key, value) {
    const total = this.workspace.clientWidth;
    const other = key === "files" ? this.widths().console : this.widths().files;
    const max = key === "files" ? total / 3 : total - other - MIN.editor;
    return Math.round(clamp(value, MIN[key], Math.max(MIN[key], max)));
  }
}

function clamp(value, lo, hi) {
  return Math.min(Math.max(Number(value) || lo, lo), hi);
}
