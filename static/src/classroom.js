// The full-screen class view (/class/<id>): a tile per student (class-tiles.js),
// the class's mistakes grouped (class-errors.js), live over the class's
// socket (class-socket.js). Its side column (#class-side) holds the raised
// hands and the teacher's messages to the class (class-talk.js); an error
// group's students can be written to at once. A click on a tile opens the
// student's detail (student-detail.js) in a drawer over the side column.
// With ?exam=<id> it is that exam's proctor view (class-proctor.js): the
// tiles show each student's time left and flags, and the drawer their exam
// folder's file and their signals.
import { h, $, clear, toast } from "./dom.js";
import { get, meWhenReachable, ApiError } from "./api.js";
import { userMenu } from "./account.js";
import { ClassSocket, NOT_YOUR_CLASS, OTHER_TAB } from "./class-socket.js";
import { Tiles, CLASS_FACE } from "./class-tiles.js";
import { EXAM_FACE, SignalTimeline } from "./class-proctor.js";
import { errorGroups, describeGroup } from "./class-errors.js";
import { ClassTalk } from "./class-talk.js";
import { classPasswordsDialog, resetStudentPassword } from "./class-passwords.js";
import { StudentDetail } from "./student-detail.js";
import { copyToHome } from "./copies.js";
import "./settings.js"; // applies the theme

const number = Number(location.pathname.split("/")[2]);
const examId = Number(new URLSearchParams(location.search).get("exam")) || null;
const user = await meWhenReachable(() => toast("The server cannot be reached: retrying…", "warn", 3000));
if (!user) {
  location.replace(`/?next=${encodeURIComponent(location.pathname)}`);
  throw new Error("not signed in");
}
if (user.role === "student") {
  location.replace("/ide");
  throw new Error("not staff");
}
userMenu($("#user-btn"), user, "teacher");

/** Say why the class cannot be shown, in place of the view. */
function refuse(message) {
  clear($("#class-main"), h("div", { class: "class-refused", role: "alert" },
    h("h1", {}, "This class cannot be shown"), h("p", {}, message),
    h("p", {}, h("a", { href: "/teacher" }, "Back to the teacher view"))));
  $(".class-aside").hidden = true;
  document.body.classList.remove("loading");
  document.body.dataset.ready = "true";
}

let found = null;
try {
  found = (await get(`/api/roster?class=${number}`)).class;
} catch (e) {
  if (!(e instanceof ApiError)) throw e;
  refuse(e.status === 404 ? "There is no such class: it may have been deleted. Pick a class in the teacher view."
    : e.status === 403 ? "You do not teach this class: ask an admin to add you to it, or pick one of your classes."
      : e.message);
}
let exam = null;
if (found && examId) {
  try {
    exam = (await get(`/api/exams/${examId}`)).exam;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    refuse(e.status === 404 ? "There is no such exam: it may have been deleted. Open the proctor view from the class's Exams."
      : e.message);
  }
  if (exam && exam.class_id !== found.id) {
    refuse("This exam is of another class: open its proctor view from that class's Exams in the teacher view.");
    exam = null;
  }
  if (!exam) found = null;
}

/** "14 students: NameError …" with its first words in bold. */
function described(group) {
  const text = describeGroup(group);
  const at = text.indexOf(": ");
  return [h("strong", { class: "group-count" }, text.slice(0, at + 1)), h("span", { class: "group-text" }, text.slice(at + 1))];
}

class ClassPage {
  /** klass: the class; exam: the exam proctored (its staff view), or null. */
  constructor(klass, exam) {
    this.socket = new ClassSocket(klass.id, exam?.id);
    this.tiles = new Tiles(this.socket, exam ? EXAM_FACE : CLASS_FACE);
    this.group = null; // the key of the error group shown, or null
    const title = exam ? `Exam ${exam.title} · ${klass.name}` : klass.name;
    document.title = `${title} — PyClassroom`;
    $("#class-title").textContent = title;
    document.body.classList.toggle("proctor", !!exam);
    this.liveState = $("#live-state");
    this.summary = h("p", { class: "class-summary", "aria-live": "polite" });
    this.note = h("p", { class: "tree-note", role: "status" });
    this.chips = h("div", { class: "chips", role: "group", "aria-label": "Show" },
      this.tiles.filters.map((f) => h("button", { type: "button", class: "chip", dataset: { filter: f.id }, "aria-pressed": String(f.id === "all"),
        onclick: () => this.show({ filter: f.id, group: null }) }, h("span", { class: "chip-label" }, f.label), h("span", { class: "chip-count" }))));
    this.sort = h("select", { "aria-label": "Sort by", onchange: () => this.tiles.set({ sort: this.sort.value }) },
      this.tiles.sorts.map((o) => h("option", { value: o.id, text: o.label })));
    this.search = h("input", { type: "search", placeholder: "Find a student", "aria-label": "Find a student",
      oninput: () => this.tiles.set({ query: this.search.value }) });
    this.groups = h("ol", { class: "error-groups", "aria-label": "Errors by kind" });
    this.groupNote = h("p", { class: "hint" });
    clear($("#class-main"),
      h("div", { class: "class-tools" }, this.chips, this.summary),
      this.note, this.tiles.el);
    const passwords = h("button", { class: "btn ghost", type: "button", id: "class-passwords",
      onclick: () => classPasswordsDialog(klass, [...this.socket.students.values()].filter((s) => s.active)
        .sort((a, b) => a.display_name.localeCompare(b.display_name))) }, "New passwords and slips");
    clear($("#class-find"), this.search, this.sort, exam ? h("a", { class: "btn ghost", href: `/class/${klass.id}` }, "Class view")
      : passwords);
    clear($("#class-mistakes"), h("h2", {}, "Mistakes now"), this.groupNote, this.groups);
    this.tiles.addEventListener("shown", (e) => this.counted(e.detail));
    this.talk = new ClassTalk($("#class-side"), { classId: klass.id, socket: this.socket });
    this.drawer = new DetailDrawer($("#class-detail"), klass, this.socket, exam);
    this.tiles.addEventListener("selected", (e) => this.drawer.show(e.detail.username));
    this.drawer.addEventListener("closed", () => this.tiles.select(null));
    this.socket.addEventListener("students", () => this.tiles.update());
    this.socket.addEventListener("state", (e) => this.showState(e.detail));
    this.socket.connect();
    this.tiles.update();
  }

  /** Show only a filter's students, or an error group's (key), or all. */
  show({ filter = "all", group = null }) {
    this.group = group;
    const only = group ? new Set(errorGroups(this.socket.students.values()).find((g) => g.key === group)?.usernames) : null;
    this.tiles.set({ filter, only });
    for (const chip of this.chips.children) chip.setAttribute("aria-pressed", String(!group && chip.dataset.filter === filter));
    this.drawGroups();
  }

  counted({ shown, total, now }) {
    const students = [...this.socket.students.values()];
    for (const chip of this.chips.children) {
      const test = this.tiles.filters.find((f) => f.id === chip.dataset.filter).test;
      chip.lastChild.textContent = String(students.filter((s) => test(s, now)).length);
    }
    this.summary.textContent = total ? `${shown} of ${total} shown` : "";
    this.note.textContent = this.socket.state === "connecting" && !total ? "Loading the class…"
      : !total ? "No students in this class yet." : !shown ? "No student matches." : "";
    this.note.hidden = !this.note.textContent;
    this.drawGroups();
  }

  /** The error groups, biggest first; the one shown lists its students. */
  drawGroups() {
    const groups = errorGroups(this.socket.students.values());
    const chosen = groups.find((g) => g.key === this.group);
    if (this.group && !chosen) return this.show({ filter: this.tiles.filter }); // its students moved on
    if (chosen && this.tiles.only.size !== chosen.usernames.length) this.tiles.set({ only: new Set(chosen.usernames) });
    const names = (g) => g.usernames.map((u) => this.socket.students.get(u)?.display_name || u).sort((a, b) => a.localeCompare(b));
    // Drawn again only when a group changed, so a focused group keeps the focus.
    const drawn = JSON.stringify([this.group, groups.map((g) => [g.key, names(g)])]);
    if (drawn === this.drawn) return;
    this.drawn = drawn;
    this.groupNote.textContent = groups.length ? "Click a group to see its students." : "No student has an error now.";
    clear(this.groups, groups.map((g) => h("li", { class: `error-group ${g.key === this.group ? "chosen" : ""}` },
      h("button", { type: "button", class: "group-btn", "aria-pressed": String(g.key === this.group), dataset: { count: String(g.usernames.length) },
        onclick: () => this.show(g.key === this.group ? { filter: "all" } : { filter: "all", group: g.key }) },
      ...described(g)),
      g.key === this.group ? [h("p", { class: "group-names" }, names(g).join(", ")),
        h("button", { type: "button", class: "btn small group-message", onclick: () => this.talk.compose(g.usernames) },
          "Write to these students")] : null)));
  }

  showState(code) {
    const state = this.socket.state;
    this.liveState.dataset.state = state;
    this.liveState.textContent = { live: "Live", connecting: "Connecting…", waiting: "Reconnecting…", ended: "Stopped" }[state];
    if (state === "ended" && code === NOT_YOUR_CLASS) {
      this.liveState.textContent = "Stopped: you no longer teach this class";
    } else if (state === "ended" && code === OTHER_TAB) {
      this.liveState.textContent = "Stopped: open in another tab";
    }
  }
}

/** A student's detail over the side column: their name, a new password if
 * they forgot theirs, their open file and their console, live; in an
 * exam's mode their exam folder's file and their signals. */
class DetailDrawer extends EventTarget {
  constructor(el, klass, socket, exam) {
    super();
    this.el = el;
    this.klass = klass;
    this.socket = socket;
    this.username = null;
    this.title = h("h2", { id: "class-detail-title", class: "drawer-title" });
    this.password = h("button", { type: "button", class: "btn small", id: "student-password",
      onclick: () => resetStudentPassword(klass, this.socket.students.get(this.username)) }, "Reset password");
    this.body = h("div", { class: "drawer-body" });
    this.detail = new StudentDetail(this.body, { socket, exam: exam?.id });
    const signals = exam ? h("div", { class: "drawer-signals" }) : null;
    this.timeline = exam ? new SignalTimeline(signals, { examId: exam.id, socket }) : null;
    this.detail.addEventListener("copy", async (e) => {
      const name = await copyToHome(e.detail.area, e.detail.path);
      if (name) toast(`Copied to My files: ${name}. Open it in the teacher view (/teacher) to run it.`, "info", 8000);
    });
    clear(el, h("div", { class: "drawer-head" }, this.title, this.password,
      h("button", { type: "button", class: "btn ghost small", "aria-label": "Close the student's detail",
        onclick: () => this.close() }, "Close")), this.body, signals);
    el.addEventListener("keydown", (e) => { if (e.key === "Escape") this.close(); });
  }

  show(username) {
    if (!username) return this.close();
    const student = this.socket.students.get(username);
    this.username = username;
    this.title.textContent = student ? `${student.display_name} (${username})` : username;
    this.password.setAttribute("aria-label", `Reset password of ${student?.display_name || username}`);
    this.el.hidden = false;
    this.detail.show(username);
    this.timeline?.show(username);
  }

  close() {
    if (this.el.hidden) return;
    this.el.hidden = true;
    this.username = null;
    this.detail.show(null);
    this.timeline?.show(null);
    this.dispatchEvent(new CustomEvent("closed"));
  }
}

if (found) {
  new ClassPage(found, exam); // eslint-disable-line no-new
  document.body.classList.remove("loading");
  document.body.dataset.ready = "true";
}
