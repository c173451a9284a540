// The student's Exercises panel (a tab of the side bar): their exercises
// with the due date and their progress; one opened shows its instructions
// (Markdown, shown safely: markdown.js), the due date in words, the checks
// with the results of the last attempt, Start (the starter files into My
// files) and Check (check.js). The last result stays when the exercise is
// opened again: the server keeps it (progress), and this page keeps the
// fuller one it was just sent.
import { h, clear, dueWords, toast } from "./dom.js";
import { get, post } from "./api.js";
import { markdown } from "./markdown.js";
import { checkList, points } from "./results.js";

const ROOM = 340; // px: the side bar widens to this when an exercise is open

const url = (classId, slug) => `/api/exercises/${classId}/${encodeURIComponent(slug)}`;

/** "Best 5/7 · latest 3/7 · 4 attempts", or "" before the first. */
function progressWords(p) {
  if (!p) return "Not checked yet.";
  const attempts = `${p.attempts} attempt${p.attempts === 1 ? "" : "s"}`;
  const best = p.best === null || p.best === undefined ? "no counted score yet" : `best ${p.best}/${p.best_max}`;
  return `${best[0].toUpperCase()}${best.slice(1)} · latest ${p.latest}/${p.latest_max} · ${attempts}`;
}

export class ExercisesPanel {
  /** el: the panel; checker: a CheckControl; openLine(path, line): show a line of a file of My files. */
  /** examArea(exercise): the exam folder that holds its file while an exam with it runs, else null. */
  constructor({ el, checker, workspace, layout, openLine, home, examArea = () => null }) {
    this.el = el;
    this.examArea = examArea;
    this.checker = checker;
    this.workspace = workspace;
    this.layout = layout;
    this.openLine = openLine;
    this.home = home;
    this.list = [];
    this.shown = null; // the exercise open: the server's view of it
    this.attempts = new Map(); // "<class>/<slug>" -> the last attempt this page was sent
    this.statusOf = new Map(); // "<class>/<slug>" -> the check's last {state, text}
    this.loaded = false;
    checker.addEventListener("status", (e) => {
      this.statusOf.set(e.detail.key, e.detail);
      if (this.shown) this.showStatus(); // Check waits while any check does
    });
    checker.addEventListener("done", (e) => {
      this.attempts.set(e.detail.key, e.detail.attempt);
      if (this.shown && e.detail.key === this.key(this.shown)) this.open(this.shown.class.id, this.shown.slug, false);
      this.load();
    });
  }

  key(ex) {
    return `${ex.class.id}/${ex.slug}`;
  }

  async load() {
    try {
      this.list = (await get("/api/exercises")).exercises;
      this.error = "";
    } catch (e) {
      this.error = e.message;
    }
    this.loaded = true;
    if (!this.shown) this.renderList();
  }

  renderList() {
    this.shown = null;
    // A reload (the tab shown, a check done) rebuilds the list: the keyboard
    // stays on the same exercise, or on Refresh, rather than dropping to the page.
    const was = this.el.contains(document.activeElement) ? document.activeElement : null;
    const refocus = was && (was.classList.contains("ex-item")
      ? `.ex-item[data-slug="${CSS.escape(was.dataset.slug)}"][data-class="${CSS.escape(was.dataset.class)}"]`
      : was.classList.contains("ex-refresh") ? ".ex-refresh" : null);
    this.drawList();
    if (refocus) this.el.querySelector(refocus)?.focus();
  }

  drawList() {
    // A list the same as the one shown stays as it is: replacing its buttons
    // under a student's click (a reload as they press) would lose the click.
    const drawn = JSON.stringify([this.error, this.loaded, this.list, this.list.map((e) => dueWords(e.due))]);
    if (drawn === this.drawn) return;
    this.drawn = drawn;
    const classes = new Set(this.list.map((e) => e.class.id));
    clear(this.el,
      h("div", { class: "ex-head" }, h("h2", { class: "ex-heading" }, "Exercises"),
        h("button", { type: "button", class: "btn small ghost ex-refresh", onclick: () => this.load(), title: "Look for new exercises" }, "Refresh")),
      this.error ? h("p", { class: "tree-note error" }, this.error)
        : !this.list.length ? h("p", { class: "tree-note" }, this.loaded ? "No exercises yet: your teacher gives them to your class." : "Loading…")
          : h("ul", { class: "ex-list" }, this.list.map((e) => h("li", {},
            h("button", { type: "button", class: "ex-item", dataset: { slug: e.slug, class: String(e.class.id) },
              onclick: () => this.open(e.class.id, e.slug) },
            h("span", { class: "ex-title" }, e.title),
            classes.size > 1 ? h("span", { class: "ex-meta" }, e.class.name) : null,
            h("span", { class: `ex-meta ${e.due_passed ? "late" : ""}` }, e.due ? dueWords(e.due) : "No due date"),
            h("span", { class: "ex-meta" }, e.progress
              ? `${e.progress.best ?? 0}/${e.max_score} points · ${e.progress.attempts} attempt${e.progress.attempts === 1 ? "" : "s"}`
              : `${points(e.max_score)} · not checked yet`))))));
  }

  /** Open an exercise (focus: move the keyboard to it, as a click does). */
  async open(classId, slug, focus = true) {
    let ex;
    try {
      ex = await get(url(classId, slug));
    } catch (e) {
      toast(e.message, "warn");
      return;
    }
    this.shown = ex;
    this.layout?.widen(ROOM);
    this.render(focus);
    // A Check may come soon: the server starts its sandbox now, so the result does not wait for one.
    this.checker.socket.ask("prepare_check");
  }

  /** The student's file of the open exercise, in My files. */
  get path() {
    return `${this.shown.slug}/${this.shown.file}`;
  }

  /** Where the open exercise's file is: the exam's folder during an exam that has it, else My files. */
  get area() {
    return this.examArea(this.shown) || "home";
  }

  started() {
    return this.area !== "home" || this.home.entries.some((e) => e.path === this.path); // (an exam gives it)
  }

  render(focus) {
    this.drawn = null; // (the list goes: drawn again when it comes back)
    const ex = this.shown;
    const attempt = this.attempts.get(this.key(ex));
    const progress = ex.progress;
    const results = attempt?.results || progress?.results || null;
    const note = attempt ? attempt.note : progress?.note;
    this.statusEl = h("p", { class: "ex-status", role: "status", "aria-live": "polite" });
    this.startBtn = h("button", { type: "button", class: "btn primary", onclick: () => this.start() }, "Start");
    this.checkBtn = h("button", { type: "button", class: "btn primary", onclick: () => this.check() }, "Check");
    this.openBtn = h("button", { type: "button", class: "btn", onclick: () => this.workspace.open(this.area, this.path) }, "Open my file");
    const keep = !focus && this.el.contains(document.activeElement);
    const back = h("button", { type: "button", class: "btn small ghost ex-back", onclick: () => { this.renderList(); this.load(); } },
      "← All exercises");
    clear(this.el,
      h("div", { class: "ex-view", dataset: { slug: ex.slug } },
        h("div", { class: "ex-top" }, back,
          h("h2", { class: "ex-title-big", tabindex: "-1" }, ex.title),
          h("p", { class: `ex-due ${ex.due_passed ? "late" : ""}` }, !ex.due ? "No due date."
            : ex.due_passed ? "The due date has passed: checks no longer count." : `${dueWords(ex.due)[0].toUpperCase()}${dueWords(ex.due).slice(1)}.`),
          h("p", { class: "ex-file" }, this.area === "home" ? "Your file: " : "Your file, in the exam's folder: ",
            h("code", {}, this.path)),
          h("div", { class: "ex-buttons" }, this.startBtn, this.checkBtn, this.openBtn),
          this.statusEl,
          h("p", { class: "ex-progress" }, attempt
            ? `Last check: ${attempt.score}/${attempt.max_score} · ${attempt.attempts} attempt${attempt.attempts === 1 ? "" : "s"}`
              + (progress?.best !== null && progress?.best !== undefined ? ` · best ${progress.best}/${progress.best_max}` : "")
            : progressWords(progress)),
          note ? h("p", { class: "ex-note" }, note) : null),
        h("section", { class: "ex-instructions", "aria-label": "Instructions" }, markdown(ex.instructions)),
        h("section", { class: "ex-checks", "aria-label": "Checks" },
          h("h3", {}, `Checks (${points(ex.max_score)})`),
          checkList(ex.checks, results, (file, line) => (this.area === "home" ? this.openLine(this.fileOf(file), line)
            : this.workspace.open(this.area, this.fileOf(file)))))));
    this.showButtons();
    this.showStatus();
    if (focus) this.el.querySelector(".ex-title-big").focus();
    else if (keep) this.checkBtn.focus();
  }

  /** A file a result names, as a path of My files. */
  fileOf(file) {
    if (!file) return this.path;
    return file.startsWith(`${this.shown.slug}/`) ? file : `${this.shown.slug}/${file}`;
  }

  showButtons() {
    if (!this.shown || !this.startBtn) return;
    const started = this.started();
    this.startBtn.hidden = started;
    this.checkBtn.hidden = !started;
    this.openBtn.hidden = !started;
  }

  showStatus() {
    const s = this.statusOf.get(this.key(this.shown));
    this.statusEl.textContent = s?.text || "";
    this.statusEl.dataset.state = s?.state || "";
    this.checkBtn.disabled = this.checker.busy;
  }

  async start() {
    const ex = this.shown;
    this.startBtn.disabled = true;
    try {
      const r = await post(`${url(ex.class.id, ex.slug)}/start`);
      await this.home.load();
      await this.workspace.open("home", r.path);
      if (r.kept.length) toast(`You already had ${r.kept.join(", ")}: kept as it is.`);
    } catch (e) {
      this.statusOf.set(this.key(ex), { state: "error", text: e.message });
      this.showStatus();
    } finally {
      this.startBtn.disabled = false;
      this.showButtons();
    }
  }

  check() {
    this.checker.check(this.shown.class.id, this.shown.slug, this.path, this.area);
  }
}
