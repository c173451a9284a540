// A student's detail, for a teacher: their name, the file they have open in
// their IDE (read-only, following their saves) and the console of their
// current or last run (its text and figures as they saw them, live). It
// follows the student over the class's live socket (class-socket.js:
// `follow`, then "console" messages) and knows nothing of the page around
// it: new StudentDetail(el, {socket}).show(username). Everything shown is
// the student's (names, file names, output): text nodes only. In an exam's
// mode ({socket, exam: its id}) the file is one of their exam folder's (the
// one they saved last, or the one the teacher picks), read-only.
import { EditorView } from "@codemirror/view";
import { EditorState } from "@codemirror/state";
import { h, clear } from "./dom.js";
import { get, areaUrl } from "./api.js";
import { commonExtensions } from "./editor.js";

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
// Terminal escape sequences: CSI (colours, cursor moves), OSC (ended by BEL
// or ST, or cut off), and ESC's other two-character ones.
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]?|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?/g;
const CONTROLS = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;

/** A terminal's text as plain text: escapes gone, and a line redrawn
 * after a carriage return (a progress bar) shown as it was last drawn. */
export function plainText(text) {
  return text.replace(ESCAPES, "").replace(/\r\n/g, "\n").split("\n")
    .map((line) => line.slice(line.lastIndexOf("\r") + 1)).join("\n").replace(CONTROLS, "");
}

/** What a console's run is doing, in words. */
function runWords(c) {
  if (c.running) return c.waiting ? "Running: waiting for them to type something" : "Running";
  if (c.exit) return `Last run: ${c.exit.message || c.exit.reason}`;
  return "No run to show yet";
}

export class StudentDetail extends EventTarget {
  /**
   * el: where to show it; socket: the class's ClassSocket; exam: an exam's id (its mode), or null.
   * events: "copy" {area, path}: the teacher asks for a copy of the open file in their own files.
   */
  constructor(el, { socket, exam = null }) {
    super();
    this.el = el;
    this.socket = socket;
    this.exam = exam;
    this.chosen = null; // in an exam's mode, the file the teacher picked (null: the last saved)
    this.username = null;
    this.path = undefined; // the file shown (null: none open)
    this.stuck = true; // the console is scrolled to its end: it stays there as output comes
    this.stop = new AbortController();
    this.name = h("h3", { class: "detail-name" });
    this.fileName = h("span", { class: "detail-file-name" });
    this.copyButton = h("button", { type: "button", class: "btn detail-copy", hidden: true,
      onclick: () => this.dispatchEvent(new CustomEvent("copy", { detail: { area: this.area, path: this.path } })) },
    "Copy to my files");
    this.copyButton.title = "A copy of this file in your own files, to run it there";
    this.replayButton = h("button", { type: "button", class: "btn detail-copy", hidden: true,
      onclick: () => import("./replay.js").then((m) => m.replayDialog(this.area, this.path, this.username)) },
    "Replay");
    this.replayButton.title = "How this file was written, change by change, pastes highlighted";
    this.picker = h("select", { class: "detail-pick", "aria-label": "Their file in the exam", hidden: true,
      onchange: () => { this.chosen = this.picker.value; this.listFiles(false); } });
    this.note = h("p", { class: "detail-note", role: "status" });
    this.code = h("div", { class: "detail-code", "aria-label": "Their open file (read-only)" });
    this.runState = h("p", { class: "detail-run-state", role: "status" });
    this.output = h("pre", { class: "detail-output", tabindex: "0", "aria-label": "Their console",
      onscroll: () => { this.stuck = this.output.scrollTop + this.output.clientHeight >= this.output.scrollHeight - 4; },
    });
    this.plots = h("div", { class: "detail-plots" });
    this.view = new EditorView({ parent: this.code, state: this.stateFor("", "") });
    clear(el, h("section", { class: "student-detail", "aria-label": "The chosen student" },
      this.name,
      h("div", { class: "detail-file" },
        h("div", { class: "detail-file-head" }, this.fileName, this.picker, this.replayButton, this.copyButton), this.note, this.code),
      h("div", { class: "detail-console" }, this.runState, this.output, this.plots)));
    el.hidden = true;
    const signal = this.stop.signal;
    socket.addEventListener("console", (e) => this.showConsole(e.detail), { signal });
    socket.addEventListener("students", (e) => this.changed(e.detail.saved), { signal });
    socket.addEventListener("refused", (e) => {
      if (this.username) this.note.textContent = e.detail.message;
    }, { signal });
  }

  get area() {
    return this.exam ? `exams/${this.exam}/${this.username}` : `user/${this.username}`;
  }

  /** Show the student `username` (null: nobody), and follow them. */
  show(username) {
    this.username = username;
    this.socket.follow(username);
    this.el.hidden = !username;
    this.path = undefined;
    this.chosen = null;
    this.showConsole({ username, output: [], figures: [], running: false, exit: null });
    this.runState.textContent = "Loading their console…";
    if (username) this.changed([]);
  }

  /** The teacher leaves the class: nothing more is followed. */
  close() {
    this.stop.abort();
    this.socket.follow(null);
  }

  stateFor(text, path) {
    return EditorState.create({ doc: text, extensions: commonExtensions({ path, readOnly: true }) });
  }

  /** The class changed: the student's open file may be another one, or saved anew. */
  changed(saved) {
    const s = this.username && this.socket.students.get(this.username);
    if (!s) return;
    this.name.textContent = s.display_name === s.username ? s.username : `${s.display_name} (${s.username})`;
    if (this.exam) {
      if (this.path === undefined || saved.includes(this.username)) this.listFiles(saved.includes(this.username));
      return;
    }
    const path = s.viewing ?? null;
    if (path !== this.path) {
      this.path = path;
      this.loadFile(true);
    } else if (saved.includes(this.username)) {
      this.loadFile(false);
    }
  }

  /** Exam mode: their exam folder's files in the picker, and the chosen one
   * (else the one saved last) shown; `saved`: they saved since. */
  async listFiles(saved) {
    const { username } = this;
    let entries;
    try {
      entries = (await get(`${areaUrl("files", this.area)}?tree=1`)).entries.filter((e) => e.kind === "file");
    } catch (e) {
      if (username === this.username) this.note.textContent = e.message;
      return;
    }
    if (username !== this.username) return;
    const latest = entries.reduce((a, b) => (!a || b.modified > a.modified ? b : a), null);
    const paths = entries.map((e) => e.path).sort();
    const path = paths.includes(this.chosen) ? this.chosen : latest?.path ?? null;
    clear(this.picker, paths.map((p) => h("option", { value: p, selected: p === path }, p)));
    this.picker.hidden = paths.length < 2;
    if (path !== this.path) {
      this.path = path;
      this.loadFile(true);
    } else if (saved) {
      this.loadFile(false);
    }
  }

  async loadFile(opened) {
    const { username, path } = this;
    this.fileName.textContent = path || (this.exam ? "No file in their exam folder yet" : "No file open in their IDE");
    this.fileName.hidden = !this.picker.hidden && !!path; // the picker names it
    this.copyButton.hidden = !path;
    this.replayButton.hidden = !path;
    this.note.textContent = "";
    if (!path) {
      this.view.setState(this.stateFor("", ""));
      return;
    }
    let data;
    try {
      data = await get(areaUrl("files", this.area, path));
    } catch (e) {
      if (username === this.username && path === this.path) this.note.textContent = e.message;
      return;
    }
    if (username !== this.username || path !== this.path) return; // another file meanwhile
    if (typeof data.content !== "string") {
      this.note.textContent = "This file is not text: it cannot be shown.";
      this.view.setState(this.stateFor("", ""));
    } else if (opened) {
      this.view.setState(this.stateFor(data.content, path));
    } else { // a new save of the same file: the teacher stays where they were reading
      this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: data.content } });
    }
  }

  showConsole(c) {
    if (c.username !== this.username) return;
    const output = Array.isArray(c.output) ? c.output : [];
    const segments = output.filter((s) => Array.isArray(s) && typeof s[1] === "string");
    const stuck = this.stuck;
    clear(this.output,
      c.cut ? h("span", { class: "detail-cut" }, "… (earlier output not shown)\n") : null,
      segments.map(([stream, text]) => h("span", { class: stream === "stderr" ? "stderr" : null }, plainText(text))));
    if (stuck) this.output.scrollTop = this.output.scrollHeight;
    this.output.hidden = !segments.length;
    const words = runWords(c);
    if (this.runState.textContent !== words) this.runState.textContent = words; // read out only when it changes
    this.runState.dataset.state = c.running ? "running" : c.exit?.reason || "none";
    if (Array.isArray(c.figures)) { // absent: the same figures as before
      clear(this.plots, c.figures.filter((f) => typeof f === "string" && BASE64.test(f)).map((data, i) =>
        h("img", { src: `data:image/png;base64,${data}`, alt: `Figure ${i + 1} drawn by their program` })));
    }
  }
}
