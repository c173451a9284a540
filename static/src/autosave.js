// Saving: about 1 s after typing stops, on tab switch, before Run and on
// Ctrl+S. Every save names the version it was edited from (If-Match), so a
// change made elsewhere is never overwritten: it becomes a Conflict the
// student resolves. Until a text is saved it is also kept in localStorage,
// so closing the tab, a crash or a server restart loses nothing.
import { request, areaUrl, ApiError, connection, backoff } from "./api.js";

export const DELAY_MS = 1000;

/**
 * An open file. Its text, undo history and selection are a CodeMirror
 * EditorState; while the editor shows the file, the state is the editor
 * view's (attach/detach), so edits there are the doc's without copying.
 * Only this class and the Saver change a doc.
 */
export class Doc {
  #state;
  #view = null;

  constructor({ area, path, etag, text, readOnly, state }) {
    this.area = area;
    this.path = path;
    this.etag = etag;
    this.savedText = text;
    this.readOnly = readOnly;
    this.#state = state;
    this.status = "saved";
    this.message = "";
    this.timer = null;
    this.retryTimer = null;
    this.attempt = 0;
    this.inflight = null;
    this.again = false;
    this.conflict = null; // {current, mine} while in conflict
    this.onEdit = null; // (transactions) after each change of its text, shown or not (recorder.js)
  }

  get key() {
    return `${this.area}:${this.path}`;
  }

  get name() {
    return this.path.split("/").pop();
  }

  get state() {
    return this.#view ? this.#view.state : this.#state;
  }

  /** The editor shows this doc in `view` from now on. */
  attach(view) {
    if (this.#view === view) return; // its state is the view's already
    view.setState(this.#state);
    this.#view = view;
  }

  /** The editor shows another doc: keep the state as the view leaves it. */
  detach() {
    if (!this.#view) return;
    this.#state = this.#view.state;
    this.#view = null;
  }

  text() {
    return this.state.doc.toString();
  }

  /** A new state for it (the same text, read-only now), shown at once if it is shown. */
  renew(state) {
    if (this.#view) this.#view.setState(state);
    else this.#state = state;
  }

  get dirty() {
    return this.text() !== this.savedText;
  }

  /** Apply a transaction spec, shown or not. */
  dispatch(spec) {
    if (this.#view) {
      this.#view.dispatch(spec); // (the editor calls edited)
      return;
    }
    const tr = this.#state.update(spec);
    this.#state = tr.state;
    if (tr.docChanged) this.edited([tr]);
  }

  /** Its text changed by `trs`. */
  edited(trs) {
    if (this.onEdit) this.onEdit(trs);
  }

  /** Replace the whole text (undo brings the old one back), as one change
   * of the part that differs: the cursor and the scroll stay where they
   * were when the change is elsewhere. */
  replaceText(text) {
    const old = this.state.doc.toString();
    let start = 0;
    const most = Math.min(old.length, text.length);
    while (start < most && old.charCodeAt(start) === text.charCodeAt(start)) start++;
    let end = 0;
    while (end < most - start && old.charCodeAt(old.length - 1 - end) === text.charCodeAt(text.length - 1 - end)) end++;
    if (start === old.length && start === text.length) return;
    this.dispatch({ changes: { from: start, to: old.length - end, insert: text.slice(start, text.length - end) } });
  }

  /** Show a version saved elsewhere (a newer one, or one restored from the history). */
  showVersion({ etag, content }) {
    this.etag = etag;
    this.savedText = content;
    this.replaceText(content);
  }
}

/** What the status shows, in words, for each state. */
export const STATUS_TEXT = {
  saved: "Saved",
  dirty: "Unsaved changes",
  saving: "Saving…",
  offline: "Offline — retrying",
  conflict: "Conflict",
  error: "Not saved",
};

export class Saver extends EventTarget {
  /** events: "status" (detail: doc) after a doc's status changes; "conflict"
   * (detail: doc, with .conflict set) when the student must choose a version. */
  constructor(username) {
    super();
    this.prefix = `pyc.unsaved.${username}.`;
    this.docs = new Set();
    connection.addEventListener("change", () => {
      if (connection.online) this.retryAll();
    });
  }

  add(doc) {
    this.docs.add(doc);
  }

  remove(doc) {
    clearTimeout(doc.timer);
    clearTimeout(doc.retryTimer);
    this.docs.delete(doc);
  }

  setStatus(doc, status, message = "") {
    doc.status = status;
    doc.message = message;
    this.dispatchEvent(new CustomEvent("status", { detail: doc }));
  }

  /** After every edit: keep a copy, save when typing stops. */
  changed(doc) {
    if (doc.readOnly) return;
    if (!doc.dirty && !doc.inflight) {
      clearTimeout(doc.timer);
      this.forget(doc);
      if (doc.status !== "conflict") this.setStatus(doc, "saved");
      return;
    }
    this.keep(doc);
    if (doc.status === "conflict") return; // saved only once the student has chosen
    if (doc.status === "saved") this.setStatus(doc, "dirty");
    clearTimeout(doc.timer);
    doc.timer = setTimeout(() => this.save(doc), DELAY_MS);
  }

  /** Save now; resolves true when the text as it is now is saved. */
  async flush(doc) {
    if (!doc || doc.readOnly) return true;
    clearTimeout(doc.timer);
    if (doc.status === "conflict") return false;
    if (!doc.dirty && !doc.inflight && doc.etag) {
      this.forget(doc);
      if (doc.status !== "saved") this.setStatus(doc, "saved");
      return true;
    }
    await this.save(doc);
    while (doc.inflight) await doc.inflight;
    return !doc.dirty && doc.status === "saved";
  }

  /** Something not yet saved (the page warns before closing). */
  unsaved() {
    return [...this.docs].filter((d) => !d.readOnly && (d.dirty || d.inflight || d.status === "conflict"));
  }

  retryAll() {
    for (const doc of this.docs) {
      if (doc.status === "offline" || (doc.status === "error" && doc.dirty)) {
        clearTimeout(doc.retryTimer);
        this.save(doc);
      }
    }
  }

  save(doc) {
    clearTimeout(doc.timer);
    if (doc.inflight) {
      doc.again = true;
      return doc.inflight;
    }
    doc.inflight = this._saveLoop(doc).finally(() => {
      doc.inflight = null;
    });
    return doc.inflight;
  }

  async _saveLoop(doc) {
    for (;;) {
      doc.again = false;
      const text = doc.text();
      if (doc.status === "conflict") return;
      if (text === doc.savedText && doc.etag) {
        this.forget(doc);
        this.setStatus(doc, "saved");
        return;
      }
      this.setStatus(doc, "saving");
      const headers = { "Content-Type": "text/plain; charset=utf-8" };
      if (doc.etag) headers["If-Match"] = `"${doc.etag}"`;
      try {
        const meta = await request("PUT", areaUrl("files", doc.area, doc.path), { body: text, headers });
        doc.etag = meta.etag;
        doc.savedText = text;
        doc.attempt = 0;
        if (doc.text() === text) {
          this.forget(doc);
          this.setStatus(doc, "saved");
          if (!doc.again) return;
        }
        // typed during the save: go round again
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) {
          const current = e.body.current || null;
          if (current && current.content === text) {
            // Our own save already went through (its answer was lost).
            doc.etag = current.etag;
            doc.savedText = text;
            continue;
          }
          if (!current) {
            // Deleted elsewhere: saving creates it again, nothing is lost.
            doc.etag = null;
            continue;
          }
          this.keep(doc);
          this.conflictFound(doc, current, text);
          return;
        }
        if (e.temporary) {
          this.keep(doc);
          this.setStatus(doc, "offline", e.message);
          this.retryLater(doc, e.retryAfter);
          return;
        }
        this.keep(doc);
        doc.refusal = e.code || ""; // (what a page may explain in its own words: an exam's end)
        this.setStatus(doc, "error", e.message);
        return;
      }
    }
  }

  retryLater(doc, seconds) {
    clearTimeout(doc.retryTimer);
    const delay = seconds ? seconds * 1000 : backoff(doc.attempt++);
    doc.retryTimer = setTimeout(() => this.save(doc), delay);
  }

  /** `current` (the saved version) is not what `mine` was edited from. */
  conflictFound(doc, current, mine) {
    doc.conflict = { current, mine };
    this.setStatus(doc, "conflict", "This file was changed somewhere else.");
    this.dispatchEvent(new CustomEvent("conflict", { detail: doc }));
  }

  /**
   * A doc just opened: put back the unsaved text this browser kept from an
   * earlier visit. Saved at once if the file has not changed since; a
   * conflict otherwise. Returns "saving", "conflict" or null (nothing kept).
   */
  recover(doc) {
    const kept = this.kept(doc.key);
    if (!kept || doc.readOnly) return null;
    if (kept.text === doc.savedText) {
      this.forget(doc);
      return null;
    }
    doc.replaceText(kept.text);
    if (kept.etag === doc.etag) {
      this.changed(doc);
      this.save(doc);
      return "saving";
    }
    // Edited from an older version that has changed since: the student chooses.
    this.conflictFound(doc, { etag: doc.etag, content: doc.savedText }, kept.text);
    return "conflict";
  }

  /** The student chose: the doc's text now (theirs, mine or a mix) is
   * saved over the version the conflict showed. Resolves like flush(). */
  async resolve(doc) {
    const current = doc.conflict.current;
    doc.conflict = null;
    doc.etag = current.etag;
    doc.savedText = current.content === undefined ? null : current.content;
    this.setStatus(doc, doc.dirty ? "dirty" : "saved");
    return this.flush(doc);
  }

  // -- the copy in localStorage ------------------------------------------

  keep(doc) {
    try {
      localStorage.setItem(this.prefix + doc.key, JSON.stringify({
        text: doc.text(), etag: doc.etag, at: Date.now(),
      }));
    } catch {
      // storage full or disabled: the server copy is all there is
    }
  }

  forget(doc) {
    localStorage.removeItem(this.prefix + doc.key);
  }

  /** The copy of a file's unsaved text, if any: {text, etag, at}. */
  kept(key) {
    try {
      return JSON.parse(localStorage.getItem(this.prefix + key) || "null");
    } catch {
      return null;
    }
  }

  /** Keys ("home:a.py") of every file with unsaved text in this browser. */
  keptKeys() {
    const keys = [];
    for (let i = 0; i < localStorage.length; i++) {
      const k = localStorage.key(i);
      if (k && k.startsWith(this.prefix)) keys.push(k.slice(this.prefix.length));
    }
    return keys;
  }

  rename(doc, newPath) {
    const kept = this.kept(doc.key);
    this.forget(doc);
    doc.path = newPath;
    if (kept) this.keep(doc);
  }
}
