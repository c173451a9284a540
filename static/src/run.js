// Run and Stop, and the one place that knows whether a program runs: the
// console only shows, the socket only carries. Run saves the file first and
// refuses to start what is not saved; the console's keystrokes reach the
// program only while it runs. It keeps the end of the run's stderr, for the
// page to mark where an error happened. A course folder's file runs as a
// read-only copy in the user's own sandbox (server/files/run_copy.py).
import { $, toast } from "./dom.js";
import { STATUS_TEXT } from "./autosave.js";
import { isCourse, runsHere } from "./api.js";

const STDERR_KEPT = 64 * 1024; // of the end of a run's stderr: where its traceback is

export class RunControl extends EventTarget {
  /**
   * current(): the doc shown in the editor, or null. events: "starting"
   * (detail: the doc about to run); "ended" when the server says a run
   * ended (the program may have written files; detail: {stderr,
   * explanation, exit: its exit message or null}); "changed" (detail: the doc) when nothing ran because the
   * file had changed elsewhere; "refused" when a run could not start.
   * claims(msg): whether a message of the socket is another part's (an
   * exercise's check), not the run's.
   */
  constructor({ socket, output, saver, current, claims = () => false }) {
    super();
    this.socket = socket;
    this.output = output;
    this.saver = saver;
    this.current = current;
    this.state = "idle"; // idle | saving (the file, before asking) | running (asked for, queued or running)
    this.asked = null; // the id of the run's message: its answers (started, output, exit, a refusal) name it
    this.stderr = "";
    this.held = ""; // why Run waits for something else (a check), or ""
    this.runButton = $("#run");
    this.stopButton = $("#stop");
    this.runButton.addEventListener("click", () => this.run());
    this.stopButton.addEventListener("click", () => this.stop());
    $("#clear-console").addEventListener("click", () => this.clearConsole());
    output.addEventListener("input", (e) => {
      if (this.running) socket.ask(e.detail.type, e.detail.fields);
    });
    socket.addEventListener("message", (e) => { if (!claims(e.detail)) this.received(e.detail); });
    socket.addEventListener("closed", () => {
      if (!this.running) return;
      output.lost();
      this.setState("idle");
      this.dispatchEvent(new CustomEvent("ended", { detail: { stderr: "" } }));
    });
  }

  get running() {
    return this.state === "running";
  }

  setState(state) {
    this.state = state;
    this.render();
    this.dispatchEvent(new Event("state"));
  }

  /** Could the shown file be run (or debugged) now? */
  canRun() {
    const doc = this.current();
    return this.state === "idle" && !!doc && runsHere(doc.area) && /\.pyw?$/i.test(doc.path) && !this.held;
  }

  /** Run waits while `reason` (a sentence) holds; "" lets it run again. */
  hold(reason) {
    this.held = reason;
    this.render();
    this.dispatchEvent(new Event("state"));
  }

  /** The buttons say what can be done now (called when the shown doc changes too). */
  render() {
    const doc = this.current();
    const busy = this.state !== "idle";
    this.runButton.disabled = !this.canRun();
    this.runButton.title = this.held || (!doc ? "Open a file to run it" : !runsHere(doc.area)
      ? "Only your own files and the course folder's can be run: copy it to My files first"
      : isCourse(doc.area) ? "Run a read-only copy of this course file (Ctrl+Enter)" : "Run the current file (Ctrl+Enter)");
    this.stopButton.disabled = !this.running;
    document.body.classList.toggle("running", busy);
  }

  /** Run the shown file; `kind` "debug" (with `extra`: its breakpoints): under the debugger. */
  async run(kind = "run", extra = {}) {
    const doc = this.current();
    if (!doc || this.state !== "idle") return;
    if (this.held) {
      toast(this.held, "warn");
      return;
    }
    if (!runsHere(doc.area)) {
      toast("Only your own files and the course folder's can be run: copy this one to My files first.", "warn");
      return;
    }
    this.setState("saving");
    this.dispatchEvent(new CustomEvent("starting", { detail: doc }));
    let next = "idle";
    try {
      const saved = await this.saver.flush(doc);
      this.output.starting(doc.path);
      if (!saved) {
        const why = doc.status === "conflict" ? "resolve the conflict first" : doc.message || STATUS_TEXT[doc.status];
        this.notRun(`Not run: the file could not be saved (${why.replace(/[.\s]+$/, "")}).`,
          "Not run: the file is not saved.");
      } else if (!this.socket.open) {
        this.notRun("Not connected to the server: reconnecting… Press Run again in a moment.", "Not connected.",
          "\x1b[33m");
        this.socket.connectNow();
      } else {
        this.stderr = "";
        // The version on screen: the server runs that one or nothing (reason "changed").
        this.ran = doc;
        if (isCourse(doc.area)) {
          this.output.note(`${kind === "debug" ? "Debugging" : "Running"} a read-only copy of ${doc.path} from the `
            + "course folder, in your own sandbox: "
            + "the program cannot change the course folder, and files it writes beside itself are refused. "
            + "To change it, copy it to My files.");
        }
        this.asked = this.socket.ask(kind, { area: doc.area, path: doc.path, etag: doc.etag, ...this.output.size(), ...extra });
        next = "running";
      }
    } finally {
      this.setState(next);
    }
  }

  notRun(note, state, color = "\x1b[31m") {
    this.output.note(note, color);
    this.output.setState("error", state);
    this.dispatchEvent(new Event("refused"));
  }

  stop() {
    if (this.running) this.socket.ask("kill");
  }

  received(msg) {
    const ours = msg.re !== undefined && msg.re === this.asked; // (else a command's answer, or news for the page)
    // A keystroke or resize sent just as the program ended: nothing to say.
    // A debugger's command sent just as the program stopped being paused: the same.
    if (msg.type === "error" && !ours) {
      if (msg.error !== "not_running" && msg.error !== "not_paused") this.output.note(msg.message, "\x1b[31m");
      return; // (a refused command, a breakpoint, the file shown: the run, if any, goes on)
    }
    this.output.message(msg);
    if (msg.type === "output" && msg.stream === "stderr") this.stderr = (this.stderr + msg.data).slice(-STDERR_KEPT);
    if ((msg.type === "exit" || msg.type === "error") && ours && this.running) {
      this.setState("idle");
      const exit = msg.type === "exit";
      if (exit && msg.reason === "changed" && this.ran) {
        this.dispatchEvent(new CustomEvent("changed", { detail: this.ran }));
      }
      this.dispatchEvent(new CustomEvent("ended", {
        detail: {
          stderr: exit ? this.stderr : "", explanation: (exit && msg.explanation) || "", exit: exit ? msg : null,
        },
      }));
    }
  }

  clearConsole() {
    this.output.clearAll();
    if (!this.running) this.output.idle();
  }
}
