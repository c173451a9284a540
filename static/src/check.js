// The Check button's work: save the exercise's file (as Run does), ask
// the server to check that version on the run socket, and follow the
// answers (a place in line, running, the attempt's results, or an error
// in a sentence). Run and Check wait for each other: the server checks
// only while no program of the student runs. The check's answers (a
// refusal too) name its message's id (`re`): claims() takes those.
import { duration } from "./dom.js";
import { STATUS_TEXT } from "./autosave.js";

export class CheckControl extends EventTarget {
  /**
   * events: "status" (detail: {key, state, text}: state is saving,
   * queued, running, done or error), "done" (detail: {key, attempt}).
   * key: "<class id>/<slug>", the exercise the answer is for.
   */
  constructor({ socket, saver, workspace }) {
    super();
    this.socket = socket;
    this.saver = saver;
    this.workspace = workspace;
    this.runControl = null; // set by the page: Run and Check wait for each other
    this.pending = null; // {key, doc, id: the check message's} while a check is asked for and not answered
    this.saving = false;
    socket.addEventListener("closed", () => {
      if (this.pending) this.finish("error", "The connection to the server was lost during the check: press Check again.");
    });
  }

  get busy() {
    return this.saving || this.pending !== null;
  }

  /** A message of the socket that answers a check (a run's are the RunControl's). */
  claims(msg) {
    return msg.type === "check" || (this.pending !== null && msg.re === this.pending.id);
  }

  status(key, state, text) {
    this.dispatchEvent(new CustomEvent("status", { detail: { key, state, text } }));
  }

  /** Check `path` (the exercise's file in My files, or in the exam folder `area`) for the exercise `slug` of class `classId`. */
  async check(classId, slug, path, area = "home") {
    const key = `${classId}/${slug}`;
    if (this.busy) return;
    if (this.runControl && this.runControl.state !== "idle") {
      this.status(key, "error", "Stop your program, then press Check.");
      return;
    }
    this.saving = true;
    this.runControl?.hold("Wait for the check to finish, then press Run.");
    this.status(key, "saving", "Saving your file…");
    let problem = "";
    try {
      problem = await this.send(classId, slug, path, key, area);
    } catch (e) { // (not left "Saving…" for good)
      problem = `The check could not be sent (${e.message}): press Check again.`;
    } finally {
      this.saving = false;
      if (!this.pending) this.runControl?.hold("");
    }
    // Said once nothing is waiting any more, so that Check can be pressed again.
    if (problem) this.status(key, "error", problem);
  }

  /** Save the file and send the check; a sentence saying why not, or "". */
  async send(classId, slug, path, key, area) {
    const doc = await this.workspace.open(area, path, { activate: false, quiet: true });
    if (!doc) return `Your file ${path} is missing: press Start to get it again.`;
    const saved = await this.saver.flush(doc);
    if (!saved) {
      const why = doc.status === "conflict" ? "resolve the conflict first" : doc.message || STATUS_TEXT[doc.status];
      return `Not checked: your file could not be saved (${why.replace(/[.\s]+$/, "")}).`;
    }
    if (!this.socket.open) {
      this.socket.connectNow();
      return "Not connected to the server: reconnecting… Press Check again in a moment.";
    }
    this.pending = { key, doc, id: this.socket.ask("check", { class: classId, exercise: slug, etag: doc.etag, area }) };
    this.status(key, "queued", "Sent: waiting for the checker…");
    return "";
  }

  finish(state, text) {
    const { key } = this.pending;
    this.pending = null;
    this.runControl?.hold("");
    this.status(key, state, text);
  }

  received(msg) {
    if (!this.pending || msg.re !== this.pending.id) return; // an earlier check's, given up (the socket closed)
    const { key, doc } = this.pending;
    if (msg.type === "error") {
      if (msg.error === "changed") this.workspace.refresh(doc, true);
      this.finish("error", msg.message || "The check could not be done: press Check again.");
      // A press that could not be checked is kept all the same: the exercise shows it, as the teacher does.
      if (msg.attempt) this.dispatchEvent(new CustomEvent("done", { detail: { key, attempt: msg.attempt } }));
    } else if (msg.state === "queued") {
      this.status(key, "queued", `You are number ${msg.position} in line, about ${duration(msg.estimate || 1)}.`);
    } else if (msg.state === "running") {
      this.status(key, "running", "Checking your program…");
    } else if (msg.state === "done" && msg.attempt) {
      const a = msg.attempt;
      const passed = a.results.filter((r) => r.passed).length;
      this.finish("done", a.not_gradable ? "Your program could not be checked."
        : `${passed} of ${a.results.length} checks passed: ${a.score} of ${a.max_score} points.`);
      this.dispatchEvent(new CustomEvent("done", { detail: { key, attempt: a } }));
    }
  }
}
