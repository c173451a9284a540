// The console: xterm.js shows a program's output live (stderr in red) and
// passes on what is typed as keystrokes; figures appear as images below it;
// the line above says whether a program waits its turn, runs, waits for
// input (input() says so; a prompt left unanswered suggests it) or how it
// ended. A traceback's lines in the student's files are
// links to them. Ctrl+C copies a selection (and interrupts only without
// one, as terminals do). It only shows: whether a program runs is the run
// control's (run.js) to say.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { h, clear, duration } from "./dom.js";
import { settings } from "./settings.js";
import { framesIn } from "./traceback.js";
import SCHEMA from "./run-messages.json" with { type: "json" };

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
// Output that ends without a new line (a prompt) and then nothing for this
// long: the program most likely waits for input.
const PROMPT_PAUSE_MS = 300;

/** Ctrl+C or Ctrl+Shift+C (Cmd+C on a Mac): copy, when something is selected. */
const isCopy = (e) => e.type === "keydown" && (e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === "c";

/** `text` broken into lines of at most `width` characters, between words where it can be. */
export function wrapWords(text, width) {
  const lines = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = "";
    }
    line = line ? `${line} ${word}` : word;
    while (line.length > width) {
      lines.push(line.slice(0, width));
      line = line.slice(width);
    }
  }
  lines.push(line);
  return lines.join("\r\n");
}

/** One line of a traceback broken between words to fit `width`; the
 * pieces keep the line's indentation (plus two spaces), so a cut path or
 * message still reads as one. */
export function wrapIndented(line, width) {
  const indent = line.match(/^\s*/)[0];
  if (line.length <= width) return line;
  if (indent.length + 12 > width) return wrapWords(line, width);
  const rest = wrapWords(line.slice(indent.length), width - indent.length - 2).split("\r\n");
  return rest.map((piece, i) => (i === 0 ? indent : `${indent}  `) + piece).join("\r\n");
}

export class Console extends EventTarget {
  /** events: "input" (detail: {type, fields}: a run-protocol message,
   * stdin, interrupt, eof or resize) for the run control to send while a program runs. */
  constructor({ terminalEl, plotsEl, stateEl, passKeys, username, openFrame }) {
    super();
    this.plotsEl = plotsEl;
    this.stateEl = stateEl;
    this.figures = 0;
    this.promptTimer = null;
    this.inputTold = false; // the wait shown was told by input(), not guessed
    this.errLine = ""; // the end of stderr that has no newline yet
    this.errTimer = null;
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
    this.term.attachCustomKeyEventHandler((e) => !passKeys(e) && !this.copied(e));
    this.term.onData((data) => this.typed(data));
    this.term.registerLinkProvider({ provideLinks: (y, done) => done(this.frameLinks(y, username, openFrame)) });
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

  input(type, fields = {}) {
    this.dispatchEvent(new CustomEvent("input", { detail: { type, fields } }));
  }

  resize() {
    try {
      this.fit.fit();
    } catch {
      return; // hidden
    }
    this.input("resize", this.size());
  }

  /** The terminal's size, within what the server takes (its table, run-messages.json: a narrow window has 10 columns). */
  size() {
    const { cols, rows } = SCHEMA.messages.resize;
    return { cols: Math.min(cols.max, Math.max(cols.min, this.term.cols)),
      rows: Math.min(rows.max, Math.max(rows.min, this.term.rows)) };
  }

  setState(state, text) {
    this.state = state;
    this.stateEl.dataset.state = state;
    this.stateEl.textContent = text;
  }

  /** Ctrl+C with a selection: copied, not sent (true when it was). */
  copied(e) {
    if (!isCopy(e) || !this.term.hasSelection()) return false;
    navigator.clipboard?.writeText(this.term.getSelection()).catch(() => {});
    return true;
  }

  /** Links on buffer line `y` (1-based) to the lines a traceback names. */
  frameLinks(y, username, openFrame) {
    const text = this.term.buffer.active.getLine(y - 1)?.translateToString(true) || "";
    const links = framesIn(text, username).map((f) => ({
      range: { start: { x: f.index + 1, y }, end: { x: f.index + f.length, y } },
      text: text.substr(f.index, f.length),
      activate: () => openFrame(f.path, f.line),
    }));
    return links.length ? links : undefined;
  }

  typed(data) {
    // Enter gives the line; Ctrl+C and Ctrl+D end the wait too.
    if (this.state === "input" && /[\r\x03\x04]/.test(data)) this.setState("running", "Running…");
    if (data === "\x03") this.input("interrupt");
    else if (data === "\x04") this.input("eof");
    else this.input("stdin", { data });
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
    this.term.write(`${color}${wrapWords(text, Math.max(10, this.term.cols - 1))}${RESET}\r\n`);
  }

  /** After output: a prompt left waiting, unanswered, means input is
   * wanted (a guess, for programs that read without input()). */
  watchForPrompt(data) {
    clearTimeout(this.promptTimer);
    // What is typed is echoed as output: a wait input() told of lasts until Enter.
    if (this.state === "input" && !this.inputTold) this.setState("running", "Running…");
    if (this.state !== "running" || /\n$/.test(data)) return;
    this.promptTimer = setTimeout(() => {
      if (this.state === "running") this.waitingForInput(false);
    }, PROMPT_PAUSE_MS);
  }

  /** The program waits for a line: say so. `told`: input() said so (the
   * server's "input" message), whatever its prompt, or with none. */
  waitingForInput(told) {
    clearTimeout(this.promptTimer);
    this.inputTold = told;
    this.setState("input", "Waiting for your input: type it in the console and press Enter");
    // The cursor goes to the console, unless the student is busy in the editor.
    if (!document.activeElement?.closest(".cm-editor")) this.term.focus();
  }

  message(msg) {
    switch (msg.type) {
      case "queued": {
        // The server is busy: the run waits its turn (a sandbox to start, or a place to run).
        const about = msg.estimate ? `, about ${duration(msg.estimate)}` : "";
        this.setState("queued", msg.position === 1
          ? `The server is busy. Your program is next${about}.`
          : `The server is busy. Your program is number ${msg.position} in line${about}.`);
        break;
      }
      case "started":
        this.setState("running", "Running…");
        break;
      case "output":
        if (msg.stream === "stderr") {
          this.errors(msg.data);
        } else {
          this.term.write(msg.data);
          this.watchForPrompt(msg.data);
        }
        break;
      case "image":
        this.figure(msg);
        break;
      case "input":
        if (this.state === "running" || this.state === "input") this.waitingForInput(true);
        break;
      case "exit":
        this.finished(msg);
        break;
      case "notice":
        this.note(msg.message, YELLOW);
        break;
      case "error":
        clearTimeout(this.promptTimer);
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

  /** stderr (a traceback, mostly): whole lines, wrapped between words at
   * the console's width; a line's unfinished end waits for the rest (or
   * for the run's end, or 200 ms). */
  errors(data) {
    clearTimeout(this.errTimer);
    const lines = (this.errLine + data).split(/\r?\n/);
    this.errLine = lines.pop();
    const width = Math.max(10, this.term.cols - 1);
    for (const line of lines) this.term.write(`${RED}${wrapIndented(line, width)}${RESET}\r\n`);
    if (this.errLine.length > 4096) this.flushErrors();
    else if (this.errLine) this.errTimer = setTimeout(() => this.flushErrors(), 200);
  }

  flushErrors() {
    clearTimeout(this.errTimer);
    if (this.errLine) this.term.write(`${RED}${this.errLine}${RESET}`);
    this.errLine = "";
  }

  finished(msg) {
    clearTimeout(this.promptTimer);
    this.flushErrors();
    if (msg.explanation) this.note(msg.explanation, YELLOW);
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
    clearTimeout(this.promptTimer);
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
