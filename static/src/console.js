// The console: xterm.js shows a program's output live (stderr in red) and
// passes on what is typed as keystrokes; figures appear as images below it;
// the line above says whether a program waits, runs or how it ended. It only
// shows: whether a program runs is the run control's (run.js) to say.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { h, clear } from "./dom.js";
import { settings } from "./settings.js";

const THEMES = {
  light: { background: "#fbfbfd", foreground: "#1d2430", cursor: "#2458c6", selectionBackground: "#c7d7fb",
    red: "#c4271d", brightRed: "#d93a2f", green: "#1b7a33", yellow: "#8a6100", brightBlack: "#6b7280" },
  dark: { background: "#14171c", foreground: "#e6e9ef", cursor: "#8ab4ff", selectionBackground: "#33415c",
    red: "#ff6b6b", brightRed: "#ff8787", green: "#6bd58a", yellow: "#f2c14e", brightBlack: "#8a93a3" },
};

const RED = "\x1b[31m";
const DIM = "\x1b[90m";
const GREEN = "\x1b[32m";
const YELLOW = "\x1b[33m";
const RESET = "\x1b[0m";
const HIDE_CURSOR = "\x1b[?25l";
const SHOW_CURSOR = "\x1b[?25h";

export class Console extends EventTarget {
  /** events: "input" (detail: a run-protocol message: stdin, interrupt, eof,
   * resize) for the run control to send while a program runs. */
  constructor({ terminalEl, plotsEl, stateEl, passKeys }) {
    super();
    this.plotsEl = plotsEl;
    this.stateEl = stateEl;
    this.figures = 0;
    this.term = new Terminal({
      fontFamily: "'DejaVu Sans Mono', 'Cascadia Mono', Consolas, 'Liberation Mono', monospace",
      fontSize: Math.max(12, settings.get("fontSize") - 1),
      cursorBlink: true,
      convertEol: false,
      scrollback: 5000,
      screenReaderMode: settings.get("screenReader"),
      theme: THEMES[settings.get("theme")] || THEMES.light,
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(terminalEl);
    this.term.textarea?.setAttribute("aria-label", "Console: type here when the program asks for input");
    // The page's shortcuts (Run, Save, ...) work from the console too.
    this.term.attachCustomKeyEventHandler((e) => !passKeys(e));
    this.term.onData((data) => this.typed(data));
    new ResizeObserver(() => this.resize()).observe(terminalEl);
    settings.addEventListener("change", (e) => {
      const { name, value } = e.detail;
      if (name === "theme") this.term.options.theme = THEMES[value] || THEMES.light;
      if (name === "fontSize") this.term.options.fontSize = Math.max(12, value - 1);
      if (name === "screenReader") this.term.options.screenReaderMode = value;
      this.resize();
    });
    this.idle();
    this.term.write(HIDE_CURSOR);
  }

  input(msg) {
    this.dispatchEvent(new CustomEvent("input", { detail: msg }));
  }

  resize() {
    try {
      this.fit.fit();
    } catch {
      return; // hidden
    }
    this.input({ type: "resize", cols: this.term.cols, rows: this.term.rows });
  }

  size() {
    return { cols: Math.max(10, this.term.cols), rows: Math.max(2, this.term.rows) };
  }

  setState(state, text) {
    this.state = state;
    this.stateEl.dataset.state = state;
    this.stateEl.textContent = text;
  }

  typed(data) {
    if (data === "\x03") this.input({ type: "interrupt" });
    else if (data === "\x04") this.input({ type: "eof" });
    else this.input({ type: "stdin", data });
  }

  idle() {
    this.setState("idle", "Press Run to start your program.");
  }

  /** A new run: clear the screen and the figures. */
  starting(path) {
    this.term.reset();
    this.term.write(SHOW_CURSOR);
    this.figures = 0;
    clear(this.plotsEl);
    this.plotsEl.hidden = true;
    this.setState("starting", `Starting ${path}…`);
    this.term.focus();
  }

  note(text, color = DIM) {
    this.term.write(`${color}${text}${RESET}\r\n`);
  }

  message(msg) {
    switch (msg.type) {
      case "queued":
        this.setState("queued", msg.position === 1
          ? "Waiting for a free place: you are next."
          : `Waiting for a free place: number ${msg.position} in line.`);
        break;
      case "started":
        this.setState("running", "Running…");
        break;
      case "output":
        if (msg.stream === "stderr") {
          this.term.write(RED + msg.data.replace(/\r?\n/g, "\r\n") + RESET);
        } else {
          this.term.write(msg.data);
        }
        break;
      case "image":
        this.figure(msg);
        break;
      case "exit":
        this.finished(msg);
        break;
      case "notice":
        this.note(msg.message, YELLOW);
        break;
      case "error":
        this.note(msg.message, RED);
        this.setState("error", msg.message);
        break;
    }
  }

  figure(msg) {
    this.figures++;
    const n = this.figures;
    const src = `data:${msg.mime};base64,${msg.data}`;
    this.plotsEl.hidden = false;
    this.plotsEl.append(h("figure", { class: "plot" },
      h("img", { src, alt: `Figure ${n} drawn by the program` }),
      h("figcaption", {}, `Figure ${n} `, h("a", { href: src, download: `figure-${n}.png` }, "Download"))));
    this.note(`[Figure ${n} is shown below the console]`);
    this.plotsEl.lastElementChild.scrollIntoView({ block: "nearest" });
  }

  finished(msg) {
    const ok = msg.reason === "ok";
    const seconds = typeof msg.duration === "number" ? ` · ${msg.duration.toFixed(1)} s` : "";
    const text = capital(msg.message || msg.reason);
    this.term.write("\r\n");
    const color = ok ? GREEN : msg.reason === "killed" || msg.reason === "interrupted" ? YELLOW : RED;
    this.note(`── ${text}${seconds} ──`, color);
    this.term.write(HIDE_CURSOR);
    this.setState(ok ? "done" : "stopped", `${text}${seconds}`);
  }

  /** The socket closed under a run. */
  lost() {
    this.term.write("\r\n");
    this.note("── The connection to the server was lost; the program was stopped. ──", YELLOW);
    this.term.write(HIDE_CURSOR);
    this.setState("stopped", "The connection was lost; the program was stopped.");
  }

  focus() {
    this.term.focus();
  }

  /** Clear the screen and the figures (the state line stays). */
  clearAll() {
    this.term.reset();
    clear(this.plotsEl);
    this.plotsEl.hidden = true;
  }
}

function capital(text) {
  return text ? text[0].toUpperCase() + text.slice(1) : text;
}
