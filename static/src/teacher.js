// The teacher's tools: the class roster with last-save times, a student's
// files (read-only), and pushing a starter file from course/ to the class.
import { h, $, clear, ago } from "./dom.js";
import { get, post } from "./api.js";
import { openDialog, alertDialog } from "./dialog.js";
import { FileTree } from "./files.js";

class Roster extends EventTarget {
  constructor(el) {
    super();
    this.el = el;
    this.students = [];
    this.chosen = null;
    this.tree = null;
    this.search = h("input", { type: "search", placeholder: "Find a student", "aria-label": "Find a student",
      oninput: () => this.renderList() });
    this.list = h("ul", { class: "roster", "aria-label": "Students" });
    this.files = h("div", { class: "student-files" });
    clear(el, h("div", { class: "roster-tools" }, this.search,
      h("button", { class: "btn small", type: "button", onclick: () => this.load() }, "Refresh")), this.list, this.files);
  }

  async load() {
    try {
      this.students = (await get("/api/roster")).students;
      this.error = null;
    } catch (e) {
      this.error = e.message;
    }
    this.renderList();
  }

  renderList() {
    const q = this.search.value.trim().toLowerCase();
    const shown = this.students.filter((s) => !q || s.username.includes(q) || s.display_name.toLowerCase().includes(q));
    clear(this.list,
      this.error ? h("li", { class: "tree-note error" }, this.error) : null,
      !this.error && !shown.length ? h("li", { class: "tree-note" }, this.students.length ? "No match." : "No students yet.") : null,
      shown.map((s) => h("li", {},
        h("button", {
          type: "button", class: `student ${this.chosen === s.username ? "chosen" : ""}`,
          "aria-pressed": String(this.chosen === s.username), dataset: { username: s.username },
          onclick: () => this.choose(s.username),
        },
        h("span", { class: "student-name" }, s.display_name, s.active ? null : " (deactivated)"),
        h("span", { class: "student-meta" }, `${s.username} · saved ${ago(s.last_save_at)}`,
          s.over_quota ? h("span", { class: "badge warn", title: "Their folder is over its quota: their next save or run is refused until they delete something." }, " over quota") : null)))));
  }

  choose(username) {
    this.chosen = username;
    this.renderList();
    this.tree = new FileTree({ area: `user/${username}`, title: `${username}'s files (read-only)`, writable: false });
    this.tree.addEventListener("open", (e) => this.dispatchEvent(new CustomEvent("open", { detail: e.detail })));
    clear(this.files, this.tree.el);
    this.tree.load();
  }
}

/** The teacher's sidebar: a Files tab and a Class tab (the roster, shown first). */
export function classView() {
  const roster = new Roster($("#class-panel"));
  $("#sidebar-tabs").hidden = false;
  const showPanel = (which) => {
    $("#tab-files").setAttribute("aria-selected", String(which === "files"));
    $("#tab-class").setAttribute("aria-selected", String(which === "class"));
    $("#files-panel").hidden = which !== "files";
    $("#class-panel").hidden = which !== "class";
    if (which === "class") roster.load();
  };
  $("#tab-files").addEventListener("click", () => showPanel("files"));
  $("#tab-class").addEventListener("click", () => showPanel("class"));
  showPanel("class");
  return roster;
}

/** Copy `path` of course/ into the homes of all (or chosen) students; show the report. */
export async function pushDialog(path) {
  let students = [];
  try {
    students = (await get("/api/roster")).students.filter((s) => s.active);
  } catch (e) {
    return alertDialog("Send to students", e.message);
  }
  const everyone = h("input", { type: "radio", name: "push-who", value: "all", checked: true });
  const some = h("input", { type: "radio", name: "push-who", value: "some" });
  const boxes = students.map((s) => h("label", { class: "check" },
    h("input", { type: "checkbox", value: s.username }), `${s.display_name} (${s.username})`));
  const picker = h("fieldset", { class: "push-pick", disabled: true }, h("legend", {}, "Students"), boxes);
  for (const r of [everyone, some]) r.addEventListener("change", () => { picker.disabled = everyone.checked; });
  const report = h("div", { class: "push-report", role: "status", "aria-live": "polite" });
  return openDialog({
    title: `Send ${path} to students`,
    body: h("div", { class: "form" },
      h("p", {}, `A copy of course/${path} goes into each student's files, at the same place. `
        + "A student who already has a file there keeps theirs: nothing is overwritten."),
      h("label", { class: "check" }, everyone, `All active students (${students.length})`),
      h("label", { class: "check" }, some, "Only these:"),
      picker, report),
    buttons: [
      { label: "Close", value: null },
      {
        label: "Send", kind: "primary", id: "push-send",
        action: async (close, button) => {
          const body = { path };
          if (some.checked) body.students = boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
          if (body.students && !body.students.length) {
            clear(report, h("p", { class: "field-error" }, "Choose at least one student."));
            return;
          }
          try {
            const r = await post("/api/course/push", body);
            showReport(report, r);
            button.textContent = "Send again";
          } catch (e) {
            clear(report, h("p", { class: "field-error" }, e.message));
          }
        },
      },
    ],
  });
}

function showReport(el, r) {
  const copied = Object.entries(r.copied);
  const skipped = Object.entries(r.skipped);
  clear(el,
    h("p", { class: "ok" }, `Copied to ${copied.length} of ${r.students} students; `
      + `${skipped.length} skipped (they already had the file).`),
    h("table", { class: "report" },
      h("thead", {}, h("tr", {}, h("th", {}, "Student"), h("th", {}, "Copied"), h("th", {}, "Skipped"))),
      h("tbody", {}, [...new Set([...copied.map((c) => c[0]), ...skipped.map((s) => s[0])])].sort().map((u) =>
        h("tr", {}, h("td", {}, u), h("td", {}, (r.copied[u] || []).join(", ") || "—"),
          h("td", {}, (r.skipped[u] || []).map((s) => `${s.path} (${s.reason === "conflict" ? "already there" : s.reason})`).join(", ") || "—"))))));
}
