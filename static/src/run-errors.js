// After a run: the lines its traceback names in the student's own files,
// marked in those files (now, or when one is opened), the innermost with
// the error's message; and the way to them from the console's links.
import { errorMessage, framesIn } from "./traceback.js";

export class RunErrors {
  constructor({ workspace, editor, username }) {
    this.workspace = workspace;
    this.editor = editor;
    this.username = username;
    this.marks = new Map(); // path in the home -> [{line, message}]
    this.marked = new Set(); // docs showing marks
    workspace.addEventListener("shown", (e) => this.apply(e.detail));
  }

  clear() {
    for (const doc of this.marked) this.editor.markErrors(doc, []);
    this.marked.clear();
    this.marks.clear();
  }

  /** A run ended with `stderr` (and the server's plain `explanation` of
   * it): mark what its traceback names. */
  show(stderr, explanation = "") {
    this.clear();
    const frames = framesIn(stderr, this.username);
    const message = errorMessage(stderr);
    frames.forEach((f, i) => {
      const innermost = i === frames.length - 1;
      const list = this.marks.get(f.path) || [];
      list.push({ line: f.line, message: innermost ? message || "The error happened here" : "",
        explanation: innermost ? explanation : "" });
      this.marks.set(f.path, list);
    });
    for (const path of this.marks.keys()) this.apply(this.workspace.tabs.find(`home:${path}`));
  }

  apply(doc) {
    if (!doc || doc.area !== "home" || this.marked.has(doc) || !this.marks.has(doc.path)) return;
    this.editor.markErrors(doc, this.marks.get(doc.path));
    this.marked.add(doc);
  }

  /** Open a file a traceback names, at its line. */
  async open(path, line) {
    const doc = await this.workspace.open("home", path);
    if (doc) this.editor.goTo(line);
  }
}
