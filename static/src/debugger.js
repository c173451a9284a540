// The debugger's controls and panel (docs/run-protocol.md, "The
// debugger"): Debug starts the current file paused at its first line (a
// file of the home, or a course folder's, which runs as a read-only copy
// of it and the files beside it); step over, into, out and continue while
// it is paused (Stop is the run's; the keys are shortcuts.js's); the line
// it is paused at is shown in the editor, in whichever of the run's files
// it is; the call stack (click a frame to see its variables) and the
// variables, unfoldable, those changed by the last step marked; watch
// expressions, kept in the browser and worked out at each pause.
// Everything shown here came from the student's program: text only,
// built with h().
import { $, h, clear } from "./dom.js";
import { isCourse, runsHere } from "./api.js";
import { runFolder } from "./debug-marks.js";

const MAX_WATCHES = 10;
const SLOW_MS = 2000; // a command unanswered this long: the panel says what the program is doing
const COMMANDS = { "#step-over": "step", "#step-into": "step_in", "#step-out": "step_out", "#continue": "continue" };

export class DebugPanel {
  constructor({ socket, runControl, output, workspace, editor, breakpoints, username }) {
    Object.assign(this, { socket, runControl, output, workspace, editor, breakpoints });
    this.watchKey = `pyc.${username}.watches`;
    this.watches = this.keptWatches();
    $("#watch-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const input = $("#watch-input");
      const expr = input.value.trim();
      if (expr && expr.length <= 200 && !this.watches.includes(expr) && this.watches.length < MAX_WATCHES) {
        this.setWatches([...this.watches, expr]);
      }
      input.value = "";
    });
    this.active = false; // a debug run is under way
    this.paused = false; // it waits for a command
    this.marked = null; // the doc showing the paused line
    this.run = null; // {area, path}: the file being debugged
    this.bar = $("#debug-bar");
    this.panel = $("#debug-panel");
    $("#debug").addEventListener("click", () => this.start());
    for (const [selector, kind] of Object.entries(COMMANDS)) {
      $(selector).addEventListener("click", () => this.command(kind));
    }
    socket.addEventListener("message", (e) => { if (e.detail.type === "paused" && this.active) this.show(e.detail); });
    runControl.addEventListener("ended", (e) => this.end(e.detail.exit));
    runControl.addEventListener("refused", () => this.end());
    runControl.addEventListener("state", () => this.render());
    breakpoints.addEventListener("change", () => {
      if (this.active) this.socket.ask("breakpoints", { breakpoints: this.runBreakpoints() });
    });
    this.render();
  }

  async start() {
    const doc = this.runControl.current();
    if (this.runControl.state !== "idle" || !doc) return;
    this.run = { area: doc.area, path: doc.path };
    this.active = true;
    this.paused = false;
    this.showPanel("The program starts, paused at its first line…");
    await this.runControl.run("debug", { breakpoints: this.runBreakpoints(), watches: this.watches });
    if (!this.runControl.running) this.end();
  }

  /** The breakpoints of the run's files, by their paths in the run's folder. */
  runBreakpoints() {
    return this.breakpoints.forRun(this.run.area, this.run.path);
  }

  /** Where a file the program is paused in is (a path of the run's
   * folder): the home's own, or the course file's folder's. */
  fileOf(file) {
    const { area, path } = this.run;
    return { area, path: runFolder(area, path) + file };
  }

  /** `kind`: step, step_in, step_out, continue, frame (with `fields`); only while paused. */
  command(kind, fields = {}) {
    if (!this.paused) return;
    this.paused = false;
    if (kind !== "frame") this.output.setState("running", "Running…");
    this.socket.ask(kind, fields);
    this.render();
    this.sayIfSlow(kind);
  }

  /** The step buttons are off until the answer comes: if it is slow, say why, and what can be done. */
  sayIfSlow(kind) {
    clearTimeout(this.slowTimer);
    this.slowTimer = setTimeout(() => {
      if (!this.active || this.paused) return;
      $("#debug-note").textContent = kind === "frame" || kind === "watches"
        ? "Still working out your watches and the values to show… A watch that never finishes ends the run in a " +
          "few seconds; press Stop to end it now."
        : "The program is running to its next line… (a long loop, or a wait for input, takes a while); press " +
          "Stop to end it.";
    }, SLOW_MS);
  }

  keptWatches() {
    try {
      const kept = JSON.parse(localStorage.getItem(this.watchKey) || "[]");
      return Array.isArray(kept) ? kept.filter((w) => typeof w === "string" && w && w.length <= 200).slice(0, MAX_WATCHES) : [];
    } catch {
      return [];
    }
  }

  setWatches(watches) {
    this.watches = watches;
    try {
      localStorage.setItem(this.watchKey, JSON.stringify(watches));
    } catch {
      // kept for this page only
    }
    if (this.active) {
      this.socket.ask("watches", { watches });
      if (this.paused) this.sayIfSlow("watches");
      this.paused = false; // (paused:) the pause comes again, with them worked out
      this.render();
    }
    this.showWatches([]);
  }

  /** The watches, with their values from the last pause (`values`: [VAR], by expression). */
  showWatches(values) {
    const byName = new Map(values.map((v) => [v.name, v]));
    clear($("#debug-watches"), this.watches.map((expr, i) => h("div", { class: "watch" },
      byName.has(expr) ? node(byName.get(expr)) : h("div", { class: "var" }, h("span", { class: "var-name" }, expr)),
      h("button", { type: "button", class: "btn ghost small", title: `Stop watching ${expr}`,
        "aria-label": `Stop watching ${expr}`, onclick: () => this.setWatches(this.watches.filter((_, j) => j !== i)) },
      "×"))));
  }

  render() {
    const doc = this.runControl.current();
    const button = $("#debug");
    button.disabled = !this.runControl.canRun();
    button.title = this.runControl.held || (!doc ? "Open a file to debug it" : !runsHere(doc.area)
      ? "Only your own files and the course folder's can be debugged: copy it to My files first"
      : isCourse(doc.area) ? "Debug a read-only copy of this course file, step by step from its first line (Ctrl+F5)"
        : "Debug: run the current file step by step, paused at its first line (Ctrl+F5)");
    this.bar.hidden = !this.active;
    for (const selector of Object.keys(COMMANDS)) $(selector).disabled = !this.paused;
  }

  /** The run ended (`exit`: its exit message, if it came). */
  end(exit = null) {
    if (!this.active) return;
    this.active = this.paused = false;
    clearTimeout(this.slowTimer);
    this.unmark();
    clear($("#debug-stack"));
    clear($("#debug-vars"));
    clear($("#debug-globals"));
    // Why, when it is not the program's own end (a watch that never finished, a limit): the exit's words.
    const why = exit && exit.reason !== "ok" && exit.message ? ` (${exit.message})` : "";
    $("#debug-note").textContent = `The program has ended${why}. Press Debug to go through it again.`;
    this.render();
  }

  showPanel(note) {
    if (this.panel.hidden) this.showWatches([]);
    this.panel.hidden = false;
    $("#debug-note").textContent = note;
    this.render();
  }

  unmark() {
    if (this.marked) this.editor.markPaused(this.marked, null);
    this.marked = null;
  }

  async show(msg) {
    this.paused = true;
    clearTimeout(this.slowTimer);
    const frame = msg.stack[msg.frame] || { file: msg.file, line: msg.line };
    this.output.setState("paused", `Paused at line ${msg.line} of ${msg.file}`);
    this.showPanel(`Paused at line ${msg.line} of ${msg.file}: step, or continue to the next breakpoint.`);
    this.stack(msg);
    this.variables($("#debug-vars"), msg.variables);
    $("#debug-globals-title").hidden = !msg.globals;
    if (msg.globals) this.variables($("#debug-globals"), msg.globals);
    else clear($("#debug-globals"));
    this.showWatches(msg.watches || []);
    if (!frame.file) return;
    const { area, path } = this.fileOf(frame.file);
    const doc = await this.workspace.open(area, path, { quiet: true });
    if (!doc || !this.paused) return;
    this.unmark();
    this.marked = doc;
    this.editor.markPaused(doc, frame.line);
    if (this.workspace.tabs.current === doc) this.editor.goTo(frame.line);
  }

  stack(msg) {
    clear($("#debug-stack"), msg.stack.map((f, i) => h("li", {},
      h("button", { type: "button", class: i === msg.frame ? "frame selected" : "frame",
        "aria-current": i === msg.frame ? "true" : null,
        onclick: () => this.command("frame", { frame: i }) },
      `${f.function === "<module>" ? "(main program)" : f.function}  ${f.file || "?"}:${f.line}`))).reverse());
  }

  variables(el, values) {
    clear(el, values.length ? values.map((v) => node(v)) : h("p", { class: "muted" }, "No variables yet."));
  }
}

/** One variable: its name, value and type; what is inside it, unfoldable. */
function node(v) {
  const line = [h("span", { class: "var-name" }, v.name), " = ", h("span", { class: "var-value" }, v.value),
    h("span", { class: "var-type" }, v.type),
    v.changed ? h("span", { class: "var-changed", title: "Changed by the last step" }, "changed") : null];
  const row = { class: v.changed ? "var changed" : "var", dataset: { name: v.name } };
  if (!v.items || !v.items.length) return h("div", row, line);
  return h("details", row, h("summary", {}, line),
    h("div", { class: "var-items" }, v.items.map(node),
      v.more ? h("p", { class: "muted" }, `… and ${v.more} more`) : null));
}
