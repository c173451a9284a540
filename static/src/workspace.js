// The open files: opening one (from a tree or the roster), showing it in the
// editor, closing it, following what the trees rename and delete, showing a
// version saved elsewhere, and copies (into My files, or "mine" beside a
// conflicted file). What a doc contains changes only through Doc and the Saver.
import { h, $, clear, toast } from "./dom.js";
import { get, areaUrl, isCourse, isExam } from "./api.js";
import { Doc, STATUS_TEXT } from "./autosave.js";
import { openDialog, alertDialog } from "./dialog.js";
import { icon } from "./icons.js";
import { createFree, copyToHome } from "./copies.js";

const REFRESH_EVERY_MS = 5000; // at most this often when the page gets the focus back

/** The student whose folder `area` is, as a teacher opens it (user/<name>, exams/<id>/<name>), else null. */
const studentOf = (area) => /^(?:user|exams\/\d+)\/([^/]+)$/.exec(area)?.[1] || null;

export class Workspace extends EventTarget {
  /**
   * trees(): the file trees on the page now; staff: may edit course/.
   * events: "shown" (detail: the doc shown, or null), "tabs" (which files
   * are open, or which one is shown, changed).
   */
  constructor({ tabs, editor, saver, trees, staff, recorder = null }) {
    super();
    this.tabs = tabs;
    this.editor = editor;
    this.saver = saver;
    this.trees = trees;
    this.staff = staff;
    this.recorder = recorder; // (recorder.js: what is typed in one's own files, for replay)
    this.lastRefresh = 0;
    this.locked = new Set(); // exam folders whose exam is over for this student
    tabs.addEventListener("select", (e) => this.select(e.detail));
    tabs.addEventListener("close", (e) => this.close(e.detail));
  }

  get current() {
    return this.tabs.current;
  }

  tree(area) {
    return this.trees().find((t) => t.area === area) || null;
  }

  readOnly(area) {
    if (isExam(area)) return this.locked.has(area);
    return !(area === "home" || ((isCourse(area) || area.startsWith("checks/")) && this.staff));
  }

  /** The exam folder `area` stops changing (its exam is over): what is
   * open of it is saved, then shown read-only. */
  async lock(area) {
    this.locked.add(area);
    const docs = this.tabs.docs.filter((doc) => doc.area === area);
    await Promise.all(docs.map((doc) => this.saver.flush(doc)));
    for (const doc of docs) {
      doc.readOnly = true;
      doc.renew(this.editor.createState(doc.text(), doc.path, true, doc.area));
      if (doc === this.tabs.current) this.banner(doc);
    }
  }

  tabsChanged() {
    this.dispatchEvent(new Event("tabs"));
  }

  /** Open a file in a tab (or find its tab); resolves to its doc, or null. */
  async open(area, path, { activate = true, quiet = false } = {}) {
    const key = `${area}:${path}`;
    let doc = this.tabs.find(key);
    if (!doc) {
      let data;
      try {
        data = await get(areaUrl("files", area, path));
      } catch (e) {
        if (!quiet) alertDialog(`Cannot open ${path}`, e.message);
        return null;
      }
      if (data.content === null || data.content === undefined) {
        if (!quiet) alertDialog(`Cannot show ${path}`, "This file is not text, or too large to edit here. Use Download from its menu.");
        return null;
      }
      doc = this.tabs.find(key); // opened meanwhile
      if (!doc) {
        const readOnly = this.readOnly(area);
        doc = new Doc({ area, path, etag: data.etag, text: data.content, readOnly,
          state: this.editor.createState(data.content, path, readOnly, area) });
        if (this.recorder) doc.onEdit = (trs) => this.recorder.changed(doc, trs);
        this.tabs.add(doc);
        this.saver.add(doc);
        if (this.saver.recover(doc) === "saving") toast(`Recovered your unsaved changes to ${doc.path}; saving them now.`);
      }
    }
    if (activate) await this.select(doc);
    this.tabsChanged();
    return doc;
  }

  async select(doc) {
    const previous = this.tabs.current;
    if (previous && previous !== doc) this.saver.flush(previous); // saves on tab switch
    this.tabs.activate(doc);
    this.show(doc);
    this.tabsChanged();
  }

  /** Show `doc` in the editor (null: no file). */
  show(doc) {
    const has = !!doc;
    $("#empty").hidden = has;
    $("#editor").hidden = !has;
    for (const tree of this.trees()) tree.setActive(doc && doc.area === tree.area ? doc.path : null);
    if (has) {
      this.editor.show(doc);
      this.banner(doc);
    } else {
      $("#doc-banner").hidden = true;
    }
    document.title = `${doc ? doc.name + " — " : ""}PyClassroom`;
    this.dispatchEvent(new CustomEvent("shown", { detail: doc }));
  }

  /** Above a read-only file: whose it is, and what can be done. */
  banner(doc) {
    const el = $("#doc-banner");
    if (!doc.readOnly) {
      el.hidden = true;
      return;
    }
    if (isExam(doc.area)) {
      clear(el, icon("lock"), h("span", {}, "Read-only: the exam is over, and this file was handed in as it is."));
      el.hidden = false;
      return;
    }
    const owner = studentOf(doc.area);
    const student = doc.area.startsWith("user/");
    const whose = isCourse(doc.area) ? "the course folder" : student ? `${owner}'s files` : `${owner}'s exam folder`;
    clear(el, icon("lock"), h("span", {}, `Read-only: this file is in ${whose}`
      + (owner ? "; it follows their saves." : "; Run and Debug run a read-only copy of it.")),
      (isCourse(doc.area) && !this.staff) || student ? h("button", { class: "btn small", type: "button",
        onclick: () => this.copyToHome(doc.area, doc.path) }, student ? "Copy to my files to run it" : "Copy to my files") : null,
      owner ? h("button", { class: "btn small", type: "button",
        onclick: () => import("./replay.js").then((m) => m.replayDialog(doc.area, doc.path, owner)) }, "Replay how it was written") : null,
      h("button", { class: "btn small ghost", type: "button", onclick: () => this.refresh(doc, true) }, "Reload"));
    el.hidden = false;
  }

  /** Close a tab; an unsaved file is saved first, or closed only if the student says so. */
  async close(doc, { force = false } = {}) {
    if (!force && !doc.readOnly && (doc.dirty || doc.status !== "saved")) {
      const saved = await this.saver.flush(doc);
      if (!saved) {
        const choice = await openDialog({
          title: `${doc.name} is not saved`,
          body: h("p", {}, `${STATUS_TEXT[doc.status]}${doc.message ? ": " + doc.message : ""}. `
            + "If you close it, your changes stay in this browser and come back when you open the file again."),
          buttons: [{ label: "Keep it open", value: false }, { label: "Close anyway", value: true, kind: "danger" }],
        });
        if (!choice) return;
      }
    }
    this.saver.remove(doc);
    this.recorder?.forget(doc);
    const next = this.tabs.remove(doc);
    if (this.tabs.current === null) {
      if (next) this.select(next);
      else this.show(null);
    }
    this.tabsChanged();
  }

  /** Show the version saved elsewhere, unless the student has edits of their own. */
  async refresh(doc, announce) {
    if (doc.dirty || doc.inflight) return;
    try {
      const data = await get(areaUrl("files", doc.area, doc.path));
      if (data.etag === doc.etag || doc.dirty || data.content === null) return;
      doc.showVersion(data);
      if (announce) toast(`${doc.path} was changed elsewhere: showing the new version.`);
    } catch {
      // shown by the status of the next save
    }
  }

  /**
   * The server says files changed elsewhere (files/changes.py): another tab
   * or computer, the teacher, a program. The tree reloads; an open file
   * with no unsaved edits shows the new version at once, one with edits
   * gets the conflict view.
   */
  async changedElsewhere({ area, changes, reload }) {
    this.reloadSoon(area);
    const inArea = () => [...this.tabs.docs].filter((d) => d.area === area);
    if (reload) {
      for (const doc of inArea()) this.catchUp(doc, "");
      return;
    }
    for (const c of changes) {
      if (c.kind === "program") {
        for (const doc of inArea()) this.catchUp(doc, "program");
      } else if (c.kind === "save") {
        const doc = this.tabs.find(`${area}:${c.path}`);
        if (doc) this.catchUp(doc, c.by, c.etag, c.kept);
      } else if (c.kind === "move") {
        this.movedElsewhere(area, c.path, c.to);
      } else if (c.kind === "delete") {
        this.deletedElsewhere(area, c.path);
      }
    }
  }

  /** Show `doc`'s version on the server if it is another (`etag`, when
   * told); `kept` (a string): the teacher's push replaced the student's own
   * text, which is now an earlier version in the file's history. */
  async catchUp(doc, by, etag, kept) {
    if (doc.inflight) await doc.inflight.catch(() => {}); // our own save's news may come before its answer
    if (etag && etag === doc.etag) return;
    let data;
    try {
      data = await get(areaUrl("files", doc.area, doc.path));
    } catch {
      return; // gone or unreachable: a delete or the next save says so
    }
    if (data.etag === doc.etag || data.content === null || data.content === undefined) return;
    if (doc.status === "conflict") {
      doc.conflict.current = data; // the choice is made against the newest
      return;
    }
    if (doc.dirty || doc.inflight) {
      this.saver.conflictFound(doc, data, doc.text());
      return;
    }
    doc.showVersion(data);
    if (typeof kept === "string") {
      toast(`Your teacher replaced ${doc.name} with their version. Yours is not lost: it is kept in the file's `
        + "History (the History button at the top), where you can open or restore it.", "warn", 12000);
      return;
    }
    toast(by === "teacher" ? `Your teacher updated ${doc.name}.`
      : by === "program" ? `Your program wrote ${doc.name}.`
        : by === "you" ? `${doc.name} was saved from another tab or computer: showing that version.`
          : `${doc.name} was changed elsewhere: showing the new version.`);
  }

  movedElsewhere(area, from, to) {
    if (this.moved(area, from, to)) toast(`${from} was moved to ${to} elsewhere; its tab follows.`);
  }

  /** The tabs of `from` (a file, or what a folder holds) follow it to `to`; whether any did. */
  moved(area, from, to) {
    let any = false;
    for (const doc of this.tabs.docs) {
      if (doc.area !== area) continue;
      if (doc.path === from) this.saver.rename(doc, to);
      else if (doc.path.startsWith(from + "/")) this.saver.rename(doc, to + doc.path.slice(from.length));
      else continue;
      any = true;
    }
    if (any) {
      this.tabs.render();
      this.show(this.current);
      this.tabsChanged();
    }
    return any;
  }

  deletedElsewhere(area, path) {
    for (const doc of [...this.tabs.docs]) {
      if (doc.area !== area || !(doc.path === path || doc.path.startsWith(path + "/"))) continue;
      if (doc.dirty || doc.inflight || doc.status === "conflict") {
        doc.etag = null; // the next save makes it again: the student's text is not lost
        this.saver.changed(doc);
        toast(`${doc.name} was deleted elsewhere. Your text is still here and will be saved again.`, "warn");
      } else {
        this.saver.forget(doc);
        this.close(doc, { force: true });
        toast(`${doc.name} was deleted elsewhere (it is in the Trash).`);
      }
    }
  }

  /** Reload a tree once a burst of changes is over. */
  reloadSoon(area) {
    this.reloads = this.reloads || new Map();
    clearTimeout(this.reloads.get(area));
    this.reloads.set(area, setTimeout(() => this.tree(area)?.load(), 150));
  }

  /** Coming back to the page: show what changed elsewhere meanwhile. */
  refreshAll() {
    if (Date.now() - this.lastRefresh < REFRESH_EVERY_MS) return;
    this.lastRefresh = Date.now();
    for (const tree of this.trees()) tree.load();
    if (this.current) this.refresh(this.current, true);
  }

  /** Copy a file into My files and open it: at the same path, or for a
   * student's file under a folder named after them. */
  async copyToHome(area, path) {
    const name = await copyToHome(area, path);
    if (!name) return;
    await this.tree("home")?.load();
    await this.open("home", name, { activate: true });
    toast(`Copied to My files: ${name}`);
  }

  /** Save `text` as a new file `path` in `area`, named path<suffix>, or
   * path<suffix>-2 ... when taken, and open it; resolves to its path, or null. */
  async saveCopy(area, path, text, suffix, { activate = false } = {}) {
    const name = await createFree(area, path, text, suffix);
    if (!name) return null;
    await this.tree(area)?.load();
    await this.open(area, name, { activate, quiet: !activate });
    return name;
  }

  /** Tabs follow what `tree` renames, moves, deletes and replaces. */
  follow(tree) {
    tree.addEventListener("open", (e) => this.open(e.detail.area, e.detail.path));
    tree.addEventListener("moved", (e) => this.moved(e.detail.area, e.detail.from, e.detail.to));
    tree.addEventListener("deleted", (e) => {
      const { area, path } = e.detail;
      for (const doc of [...this.tabs.docs]) {
        if (doc.area === area && (doc.path === path || doc.path.startsWith(path + "/"))) {
          this.saver.forget(doc);
          this.close(doc, { force: true });
        }
      }
    });
    tree.addEventListener("replaced", (e) => {
      for (const p of e.detail.paths) {
        const doc = this.tabs.find(`${e.detail.area}:${p}`);
        if (doc) this.refresh(doc, true);
      }
    });
  }
}
