// Choosing some of a class's students (to push to, to give new passwords):
// a search, "select all shown", a checkbox each, and how many are chosen.
import { h } from "./dom.js";

export class StudentPicker {
  /** students: [{username, display_name}]; searchLabel: what the search is for, for screen readers. */
  constructor(students, { searchLabel = "Find a student" } = {}) {
    this.boxes = students.map((s) => {
      const input = h("input", { type: "checkbox", value: s.username, onchange: () => this.count() });
      return { s, input, label: h("label", { class: "check" }, input, `${s.display_name} (${s.username})`) };
    });
    this.search = h("input", { type: "search", placeholder: "Find a student", "aria-label": searchLabel,
      oninput: () => this.filter() });
    this.all = h("input", { type: "checkbox", onchange: () => this.selectShown(this.all.checked) });
    this.counter = h("span", { class: "hint", "aria-live": "polite" });
    this.el = h("fieldset", { class: "push-pick", disabled: true },
      h("legend", {}, "Students"),
      h("div", { class: "push-tools" }, this.search, h("label", { class: "check" }, this.all, "Select all shown"), this.counter),
      h("div", { class: "push-list" }, this.boxes.map((b) => b.label)));
    this.count();
  }

  enable(on) {
    this.el.disabled = !on;
    if (on) this.search.focus();
  }

  shown() {
    return this.boxes.filter((b) => !b.label.hidden);
  }

  filter() {
    const q = this.search.value.trim().toLowerCase();
    for (const b of this.boxes) b.label.hidden = !!q && !b.s.username.includes(q) && !b.s.display_name.toLowerCase().includes(q);
    this.count();
  }

  selectShown(on) {
    for (const b of this.shown()) b.input.checked = on;
    this.count();
  }

  chosen() {
    return this.boxes.filter((b) => b.input.checked).map((b) => b.s.username);
  }

  count() {
    const shown = this.shown();
    this.all.checked = shown.length > 0 && shown.every((b) => b.input.checked);
    this.counter.textContent = `${this.chosen().length} of ${this.boxes.length} chosen`;
  }
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
