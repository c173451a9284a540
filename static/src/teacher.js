// The teacher's tools: the live class view (who is online, running, stuck on
// an error, when each last saved, pushed by the server over /ws/class), a
// student's detail (student-detail.js: their open file and console, live)
// and files (read-only, following their saves, with a copy into the
// teacher's own files to run there), pushing starter files from a
// class's course folder to its students, and their passwords
// (class-passwords.js). Its exercises and gradebook are class-exercises.js's;
// raised hands and messages to the class, class-talk.js's.
import { h, $, clear, ago } from "./dom.js";
import { get, post } from "./api.js";
import { openDialog, alertDialog } from "./dialog.js";
import { FileTree } from "./files.js";
import { ClassSocket, NOT_YOUR_CLASS, OTHER_TAB } from "./class-socket.js";
import { ClassExercises } from "./class-exercises.js";
import { ClassExams } from "./class-exams.js";
import { StudentDetail } from "./student-detail.js";
import { IDLE_MINUTES, LIMIT_WORDS, idle } from "./class-tiles.js";
import { ClassTalk } from "./class-talk.js";
import { resetStudentPassword, classPasswordsDialog } from "./class-passwords.js";
import { StudentPicker } from "./student-picker.js";

const REDRAW_MS = 20000; // "3 min ago" and the idle filter move with the clock
const FILTERS = [
  { id: "all", label: "All", test: () => true },
  { id: "online", label: "Online", test: (s) => s.online },
  { id: "error", label: "Has an error now", test: (s) => !s.running && s.last_run?.outcome === "error" },
  { id: "idle", label: `Not saved for ${IDLE_MINUTES} min`, test: idle },
];

/** A time the server gave, as this browser's clock puts it (they may differ by `skew` ms). */
const local = (when, skew) => new Date(Date.parse(when) - skew);

/** What a student's program is doing, in words: [kind, text]. */
function runState(s, skew) {
  if (s.running) return ["running", `running, started ${ago(local(s.run_started_at, skew))}`];
  const run = s.last_run;
  if (!run) return ["none", "has not run a program"];
  if (run.outcome === "error") return ["error", run.error ? `error: ${run.error.text}` : "stopped with an error"];
  if (run.outcome === "limit") return ["limit", `stopped: ${LIMIT_WORDS[run.reason] || run.reason}`];
  if (run.outcome === "ok") return ["ok", "last run finished"];
  return ["stopped", "last run stopped"];
}

class ClassView extends EventTarget {
  /**
   * The Class panel. classes: the classes the teacher teaches (GET /api/classes).
   * events: "open" {area, path}, "copy" {area, path}, "saved" {username},
   * "exercises" {area}: the files of a class's exercises changed.
   */
  constructor(el, classes) {
    super();
    this.el = el;
    this.classes = classes;
    this.socket = null;
    this.filter = "all";
    this.chosen = null;
    this.tree = null;
    this.rows = new Map(); // username -> its <li>
    this.picker = h("select", { "aria-label": "Class", class: "class-pick", onchange: () => this.watch(Number(this.picker.value)) },
      classes.map((c) => h("option", { value: String(c.id), text: c.name })));
    this.liveState = h("span", { class: "live-state", role: "status" });
    this.fullScreen = h("a", { class: "btn small", href: "/class/", title: "Every student of the class as a tile, and the class's mistakes" },
      "Full screen");
    this.fullScreen.hidden = !classes.length;
    this.summary = h("p", { class: "class-summary", "aria-live": "polite" });
    this.search = h("input", { type: "search", placeholder: "Find a student", "aria-label": "Find a student",
      oninput: () => this.render() });
    this.chips = h("div", { class: "chips", role: "group", "aria-label": "Show" },
      FILTERS.map((f) => h("button", { type: "button", class: "chip", dataset: { filter: f.id }, "aria-pressed": String(f.id === this.filter),
        onclick: () => { this.filter = f.id; this.render(); } }, f.label)));
    this.list = h("ul", { class: "roster", "aria-label": "Students" });
    this.note = h("p", { class: "tree-note" });
    this.files = h("div", { class: "student-files" });
    this.detailEl = h("div", { class: "detail-host" });
    this.detail = null;
    this.talkEl = h("div", { class: "class-talk-host" });
    this.talk = null; // ClassTalk: raised hands and messages to the class
    this.exercises = new ClassExercises();
    this.exams = new ClassExams();
    this.exercises.addEventListener("changed", (e) => this.dispatchEvent(new CustomEvent("exercises", { detail: e.detail })));
    clear(el,
      h("div", { class: "class-head" }, classes.length > 1 ? this.picker : h("strong", { class: "class-name" }, classes[0]?.name || "No class"),
        this.liveState, this.fullScreen),
      this.summary, this.talkEl, h("div", { class: "roster-tools" }, this.search,
        h("button", { class: "btn small", type: "button", id: "class-passwords", onclick: () => this.passwords() },
          "New passwords and slips")), this.chips, this.note, this.list,
      this.detailEl, this.exercises.el, this.exams.el, this.files);
    setInterval(() => { if (!document.hidden) this.render(); }, REDRAW_MS);
    if (!classes.length) this.note.textContent = "You teach no class yet: an admin puts you in one.";
  }

  get current() {
    return this.classes.find((c) => c.id === this.socket?.classId) || null;
  }

  /** Watch the class `id` (the last one watched, by default). */
  watch(id = Number(localStorage.getItem("pyc.teacher.class")) || this.classes[0]?.id) {
    if (!this.classes.some((c) => c.id === id)) id = this.classes[0]?.id;
    if (id === undefined) return;
    localStorage.setItem("pyc.teacher.class", String(id));
    this.picker.value = String(id);
    this.fullScreen.href = `/class/${id}`;
    this.socket?.close();
    for (const li of this.rows.values()) li.remove();
    this.rows.clear();
    this.choose(null);
    this.socket = new ClassSocket(id);
    this.socket.addEventListener("students", (e) => {
      this.changed(e.detail.saved);
      this.exercises.checked(e.detail.checked);
    });
    this.socket.addEventListener("state", (e) => this.showState(e.detail));
    this.detail?.close();
    this.detail = new StudentDetail(this.detailEl, { socket: this.socket });
    this.detail.addEventListener("copy", (e) => this.dispatchEvent(new CustomEvent("copy", { detail: e.detail })));
    this.talk?.close();
    this.talk = new ClassTalk(this.talkEl, { classId: id, socket: this.socket });
    this.socket.connect();
    this.exercises.show(id, this.classes.find((c) => c.id === id).name);
    this.exams.show(id);
    this.render();
  }

  changed(saved) {
    for (const username of saved) {
      this.dispatchEvent(new CustomEvent("saved", { detail: { username } }));
      if (username === this.chosen) this.tree?.load(); // a new file shows up in their tree
    }
    this.render();
  }

  showState(code) {
    const state = this.socket.state;
    this.liveState.dataset.state = state;
    this.liveState.textContent = { live: "Live", connecting: "Connecting…", waiting: "Reconnecting…", ended: "Stopped" }[state];
    if (state === "ended" && code === NOT_YOUR_CLASS) {
      alertDialog("Class view stopped", "You no longer teach this class. Reload the page to see your classes.");
    } else if (state === "ended" && code === OTHER_TAB) {
      this.liveState.textContent = "Stopped: open in another tab";
    }
  }

  /** Show the students that match the search and the filter, as they are now. */
  render() {
    if (!this.socket) return;
    const now = this.socket.now();
    const students = [...this.socket.students.values()];
    const filter = FILTERS.find((f) => f.id === this.filter);
    for (const chip of this.chips.children) chip.setAttribute("aria-pressed", String(chip.dataset.filter === this.filter));
    const q = this.search.value.trim().toLowerCase();
    let shown = 0;
    // Rows are kept and updated in place, so the one a keyboard is on keeps the focus.
    for (const [username, li] of this.rows) {
      if (!this.socket.students.has(username)) {
        li.remove();
        this.rows.delete(username);
      }
    }
    students.sort((a, b) => a.username.localeCompare(b.username));
    let previous = null;
    for (const s of students) {
      let li = this.rows.get(s.username);
      if (!li) {
        li = h("li", { dataset: { username: s.username } });
        this.rows.set(s.username, li);
        if (previous) previous.after(li);
        else this.list.prepend(li);
      }
      previous = li;
      const visible = filter.test(s, now) && (!q || s.username.includes(q) || s.display_name.toLowerCase().includes(q));
      li.hidden = !visible;
      shown += visible;
      this.fill(li, s);
    }
    const count = (test) => students.filter((s) => test(s, now)).length;
    this.summary.textContent = students.length
      ? `${count((s) => s.online)} of ${students.length} online · ${count((s) => s.running)} running · `
        + `${count(FILTERS[2].test)} with an error · ${count(FILTERS[3].test)} not saved for ${IDLE_MINUTES} min`
      : "";
    this.note.textContent = this.socket.state === "connecting" && !students.length ? "Loading the class…"
      : !students.length ? "No students in this class yet." : !shown ? "No student matches." : "";
    this.note.hidden = !this.note.textContent;
  }

  fill(li, s) {
    const [kind, words] = runState(s, this.socket.skew);
    const saved = s.last_save_at ? `saved ${ago(local(s.last_save_at, this.socket.skew))}` : "never saved";
    const check = s.last_check ? `checked ${s.last_check.exercise}: ${s.last_check.score}/${s.last_check.max_score}, `
      + ago(local(s.last_check.at, this.socket.skew)) : "";
    // The name says the visible lines in their order (WCAG 2.5.3), then what only the dot shows.
    const label = [`${s.display_name}${s.active ? "" : " (deactivated)"}`, words, check, `${s.username} · ${saved}`,
      s.over_quota ? "over quota" : "", s.online ? "online" : "offline"].filter(Boolean).join(", ");
    let button = li.firstChild;
    if (!button) {
      button = h("button", { type: "button", class: "student", onclick: () => this.choose(s.username) });
      li.append(button);
    }
    button.className = `student ${this.chosen === s.username ? "chosen" : ""}`;
    button.dataset.username = s.username;
    button.dataset.state = kind;
    button.dataset.online = String(s.online);
    button.setAttribute("aria-pressed", String(this.chosen === s.username));
    button.setAttribute("aria-label", label);
    clear(button,
      h("span", { class: "student-line" },
        h("span", { class: `presence ${s.online ? "on" : ""}`, title: s.online ? "Online: the IDE is open" : "Offline" }),
        h("span", { class: "student-name" }, s.display_name, s.active ? null : " (deactivated)")),
      // Spaces between the lines (the grid ignores them): read as words, not "Ada Lovelacelast run".
      " ", h("span", { class: `run-line ${kind}`, title: words }, words),
      " ", check ? h("span", { class: "student-meta check-meta" }, check) : null,
      " ", h("span", { class: "student-meta" }, `${s.username} · ${saved}`,
        s.over_quota ? h("span", { class: "badge warn", title: "Their folder is over its quota: their next save or run is refused until they delete something." }, " · over quota") : null));
  }

  /** New passwords and slips for the class's students (all, or those picked). */
  passwords() {
    if (!this.current) return;
    const students = [...this.socket.students.values()].filter((s) => s.active)
      .sort((a, b) => a.username.localeCompare(b.username));
    classPasswordsDialog(this.current, students);
  }

  choose(username) {
    this.chosen = username;
    this.render();
    this.detail?.show(username);
    if (!username) {
      this.tree = null;
      clear(this.files);
      return;
    }
    this.tree = new FileTree({
      area: `user/${username}`, title: `${username}'s files (read-only)`, writable: false,
      extraItems: (entry) => entry.kind === "file"
        ? [{ label: "Copy to my files", action: () => this.dispatchEvent(new CustomEvent("copy", { detail: { area: `user/${username}`, path: entry.path } })) },
          { label: "Replay how it was written", action: () => import("./replay.js").then((m) => m.replayDialog(`user/${username}`, entry.path, username)) }]
        : [],
    });
    this.tree.addEventListener("open", (e) => this.dispatchEvent(new CustomEvent("open", { detail: e.detail })));
    const student = this.socket.students.get(username);
    clear(this.files,
      h("div", { class: "student-actions" },
        h("button", { class: "btn small", type: "button", id: "student-password",
          "aria-label": `Reset password of ${student?.display_name || username}`,
          onclick: () => resetStudentPassword(this.current, this.socket.students.get(username) || { username, display_name: username }) },
        "Reset password")),
      this.tree.el);
    this.tree.load();
  }
}

/** The teacher's Class tab of the side bar: the live class. */
export function classView(classes) {
  const view = new ClassView($("#class-panel"), classes.filter((c) => c.teachers !== undefined));
  view.watch();
  return view;
}

/** Push `path` of the course folder `area` to the class's students (all, or
 * those picked); show what was copied, updated and left. */
export async function pushDialog(area, path, classes) {
  const found = classes.find((c) => c.area === area);
  let students = [];
  try {
    students = (await get(`/api/roster?class=${found.id}`)).students.filter((s) => s.active);
  } catch (e) {
    return alertDialog("Send to students", e.message);
  }
  const everyone = h("input", { type: "radio", name: "push-who", value: "all", checked: true });
  const some = h("input", { type: "radio", name: "push-who", value: "some" });
  const picker = new StudentPicker(students, { searchLabel: "Find a student to send to" });
  for (const r of [everyone, some]) r.addEventListener("change", () => picker.enable(some.checked));
  const report = h("div", { class: "push-report", role: "status", "aria-live": "polite" });
  const changed = CHANGED.map((c, i) => ({ ...c, input: h("input", { type: "radio", name: "push-changed", value: c.id, checked: i === 0 }) }));
  return openDialog({
    title: `Send ${path} to ${found.name}`,
    wide: true,
    body: h("div", { class: "form" },
      h("p", {}, `A copy of ${path} goes into each student's files, at the same place. `
        + "A copy a student has not changed since the last send is replaced by this version."),
      h("label", { class: "check" }, everyone, `All active students of ${found.name} (${students.length})`),
      h("label", { class: "check" }, some, "Only these:"),
      picker.el,
      h("fieldset", { class: "push-changed" }, h("legend", {}, "If a student changed their copy (or has a file of their own there):"),
        changed.map((c) => h("label", { class: "check" }, c.input, c.label))),
      report),
    buttons: [
      { label: "Close", value: null },
      {
        label: "Send", kind: "primary", id: "push-send",
        action: async (close, button) => {
          const body = { area, path, changed: changed.find((c) => c.input.checked).id };
          if (some.checked) body.students = picker.chosen();
          if (body.students && !body.students.length) {
            clear(report, h("p", { class: "field-error" }, "Choose at least one student."));
            return;
          }
          try {
            showReport(report, await post("/api/course/push", body));
            button.textContent = "Send again";
          } catch (e) {
            clear(report, h("p", { class: "field-error" }, e.message));
          }
        },
      },
    ],
  });
}

const CHANGED = [
  { id: "keep", label: "Leave theirs as it is (they are listed below)" },
  { id: "overwrite", label: "Update everyone's copy anyway: theirs is kept in the file's history, where they can get it back" },
  { id: "new_file", label: "Send it as a new file beside theirs, e.g. lesson2 (teacher).py" },
];

const REASONS = { changed: "they changed their copy: theirs is left as it is",
  quota_exceeded: "their folder is full: nothing was replaced",
  no_free_name: "no free name was found for a new file", file_too_large: "the file is too large to send",
  not_a_file: "a folder of theirs has this name" };

/** What one student got, as sentences (one per file). */
function outcomes(r, u) {
  const each = (key, say) => (r[key]?.[u] || []).map(say);
  if (r.failed[u]) return [[ "failed", r.failed[u] ]];
  return [
    ...each("copied", (p) => ["copied", `${p}: a new copy`]),
    ...each("updated", (p) => ["updated", `${p}: updated (they had not changed it)`]),
    ...each("replaced", (x) => ["replaced", `${x.path}: replaced; their version is kept in the file's history`]),
    ...each("sent_as_new", (x) => ["sent_as_new", `${x.path}: sent as a new file named ${x.as}`]),
    ...each("up_to_date", (p) => ["up_to_date", `${p}: already up to date`]),
    ...each("skipped", (x) => ["skipped", `${x.path}: skipped, ${REASONS[x.reason] || x.reason.replace(/_/g, " ")}`]),
  ];
}

/** Who got what, by the students' names (usernames beside). */
function showReport(el, r) {
  const users = Object.keys(r.names).sort((a, b) => r.names[a].localeCompare(r.names[b]) || a.localeCompare(b));
  const count = (key) => users.filter((u) => r[key]?.[u]?.length).length;
  const kept = users.filter((u) => (r.skipped[u] || []).some((s) => s.reason === "changed")).length;
  const failed = users.filter((u) => r.failed[u]);
  clear(el,
    h("p", { class: "ok" }, [`Copied to ${count("copied")} of ${r.students} students`,
      count("updated") && `updated for ${count("updated")} (they had not changed it)`,
      count("replaced") && `replaced for ${count("replaced")} (their version kept in its history)`,
      count("sent_as_new") && `sent as a new file to ${count("sent_as_new")}`,
      count("up_to_date") && `${count("up_to_date")} already had this version`,
      kept && `${kept} kept their own version`].filter(Boolean).join("; ") + "."),
    failed.length ? h("p", { class: "field-error" }, `Could not write for ${failed.map((u) => r.names[u]).join(", ")}.`) : null,
    h("table", { class: "report" },
      h("thead", {}, h("tr", {}, ["Student", "What they got"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, users.map((u) =>
        h("tr", { dataset: { username: u } },
          h("td", {}, h("span", { class: "student-name" }, r.names[u]), h("span", { class: "hint" }, ` (${u})`)),
          h("td", {}, h("ul", { class: "push-outcomes" },
            outcomes(r, u).map(([kind, text]) => h("li", { dataset: { outcome: kind } }, text)))))))));
}
