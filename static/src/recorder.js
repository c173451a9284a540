// Recording for replay (server/replay/): what the editor changes in one's
// own files and exam folder, sent on the run socket about twice a second as
// `edits` — CodeMirror's changes in their JSON form, with the page's time of
// each and what made it (typed, pasted, dropped, undone, or a version saved
// elsewhere). A file's first edits on a socket start from its text before
// them (`base`); later ones say the length they start from, which the server
// checks. While the socket is away the edits wait here (at most MAX_HELD
// per file: past that the replay has a gap, and starts again from the text).
import { Transaction } from "@codemirror/state";
import { isExam } from "./api.js";

const SEND_MS = 500;
const MAX_HELD = 2000; // edits of one file waiting for the socket
const MAX_MESSAGE = 100_000; // characters of a message (the server takes 128 KiB): a larger file is not recorded
const MAX_EDITS = 500; // in one message (server/replay/service.py)

/** What made a change: "" typed or deleted, "p" pasted, "d" dropped, "u" undone or redone, "x" from elsewhere. */
function flagOf(tr) {
  if (tr.isUserEvent("input.paste")) return "p";
  if (tr.isUserEvent("input.drop")) return "d";
  if (tr.isUserEvent("undo") || tr.isUserEvent("redo")) return "u";
  return tr.annotation(Transaction.userEvent) === undefined ? "x" : "";
}

export class Recorder {
  constructor(socket) {
    this.socket = socket;
    // doc -> {start: its text before the first held edit, held: [{edit, after: the text after it}],
    //         based: where the server has its stream ({area, path}), or null: send `base`}
    this.files = new Map();
    this.asked = new Map(); // message id -> doc
    socket.addEventListener("state", () => {
      if (socket.state !== "open") return;
      for (const file of this.files.values()) file.based = null; // a new socket is a new stream
      this.asked.clear();
    });
    setInterval(() => this.send(), SEND_MS);
  }

  /** Whether `doc`'s edits are recorded: one's own files and exam folder, while they take typing. */
  records(doc) {
    return !doc.readOnly && (doc.area === "home" || isExam(doc.area));
  }

  /** `doc` changed by the transactions `trs` (the editor's, or a version from elsewhere). */
  changed(doc, trs) {
    if (!this.records(doc)) return;
    let file = this.files.get(doc);
    for (const tr of trs) {
      if (!tr.docChanged) continue;
      if (!file) {
        file = { start: tr.startState.doc, held: [], based: null };
        this.files.set(doc, file);
      }
      if (file.held.length >= MAX_HELD) { // the socket is away too long: a gap, then from the text again
        file.held = [];
        file.based = null;
      }
      if (!file.held.length) file.start = tr.startState.doc;
      file.held.push({ edit: [Math.round(performance.now()), tr.changes.toJSON(), flagOf(tr)], after: tr.newDoc });
    }
  }

  /** The file is closed: what it holds goes now. */
  forget(doc) {
    this.send(doc);
    this.files.delete(doc);
  }

  /** Whether a message of the socket answers ours (a refusal: that file starts again from its text). */
  claims(msg) {
    const doc = msg.re !== undefined && this.asked.get(msg.re);
    if (!doc) return false;
    this.asked.delete(msg.re);
    const file = this.files.get(doc);
    if (file) file.based = null;
    return true;
  }

  send(only = null) {
    if (!this.socket.open) return;
    for (const [doc, file] of this.files) {
      if ((only && doc !== only) || !file.held.length) continue;
      const where = file.based && file.based.area === doc.area && file.based.path === doc.path;
      const sent = file.held.slice(0, MAX_EDITS);
      const edits = sent.map((h) => h.edit);
      const base = where ? undefined : file.start.toString();
      if ((base?.length || 0) + JSON.stringify(edits).length > MAX_MESSAGE) { // too large to record
        file.held = [];
        file.based = null;
        continue;
      }
      const id = this.socket.ask("edits", { area: doc.area, path: doc.path, base, length: file.start.length,
        sent: Math.round(performance.now()), edits });
      if (!id) return;
      this.asked.set(id, doc);
      while (this.asked.size > 100) this.asked.delete(this.asked.keys().next().value); // (answers come only to refuse)
      file.based = { area: doc.area, path: doc.path };
      file.held = file.held.slice(sent.length);
      file.start = sent[sent.length - 1].after;
    }
  }
}
