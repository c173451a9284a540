// The Exercises part of the teacher's class view: the class's exercises
// (with what is wrong in one, in sentences), a form to write or change one
// (exercise-form.js), deleting one, and the gradebook (gradebook.js), kept
// fresh while open by the live class's news of checks.
import { h, clear, dueWords, debounce, toast } from "./dom.js";
import { get, request } from "./api.js";
import { confirmDialog } from "./dialog.js";
import { exerciseForm } from "./exercise-form.js";
import { gradebookDialog } from "./gradebook.js";

export class ClassExercises extends EventTarget {
  /** events: "changed" (detail: {area}): an exercise's files were written or deleted. */
  constructor() {
    super();
    this.classId = null;
    this.className = "";
    this.exercises = [];
    this.gradebook = null;
    this.collapsed = false;
    this.list = h("ul", { class: "ex-list teacher" });
    this.note = h("p", { class: "ex-list-note" });
    this.toggle = h("button", { type: "button", class: "tree-title", "aria-expanded": "true", onclick: () => {
      this.collapsed = !this.collapsed;
      this.toggle.setAttribute("aria-expanded", String(!this.collapsed));
      this.content.hidden = this.collapsed;
    } }, "Exercises");
    this.content = h("div", {},
      h("div", { class: "ex-tools" },
        h("button", { type: "button", class: "btn small", onclick: () => this.edit(null) }, "New exercise"),
        h("button", { type: "button", class: "btn small", onclick: () => this.openGradebook() }, "Gradebook")),
      this.note, this.list);
    this.el = h("section", { class: "class-exercises", "aria-label": "Exercises" },
      h("div", { class: "tree-header" }, this.toggle), this.content);
    this.refreshSoon = debounce(() => this.gradebook?.refresh(), 500);
  }

  show(classId, className) {
    this.classId = classId;
    this.className = className;
    this.exercises = [];
    this.load();
  }

  changed() {
    this.dispatchEvent(new CustomEvent("changed", { detail: { area: `checks/${this.classId}` } }));
  }

  async load() {
    if (this.classId === null) return;
    const id = this.classId;
    try {
      const exercises = (await get(`/api/classes/${id}/exercises`)).exercises;
      if (id !== this.classId) return;
      this.exercises = exercises;
      this.note.textContent = exercises.length ? "" : "No exercises yet: write one with New exercise.";
      this.note.classList.remove("error");
    } catch (e) {
      this.note.textContent = e.message;
      this.note.classList.add("error");
    }
    this.note.hidden = !this.note.textContent;
    this.render();
  }

  render() {
    clear(this.list, this.exercises.map((e) => h("li", { class: "ex-row", dataset: { slug: e.slug } },
      h("button", { type: "button", class: "ex-item", onclick: () => this.edit(e.slug), title: "Change this exercise" },
        h("span", { class: "ex-title" }, e.title || e.slug),
        h("span", { class: "ex-meta" }, [e.slug, e.due ? dueWords(e.due) : null,
          e.problems.length ? null : `${e.checks} check${e.checks === 1 ? "" : "s"}, ${e.max_score} points`].filter(Boolean).join(" · ")),
        e.problems.length ? h("span", { class: "ex-meta late" }, "Not shown to students until this is fixed:") : null,
        e.problems.map((p) => h("span", { class: "ex-problem" }, p))),
      h("button", { type: "button", class: "btn small ghost danger-outline", "aria-label": `Delete ${e.title || e.slug}`,
        title: "Delete this exercise", onclick: () => this.remove(e) }, "Delete"))));
  }

  async edit(slug) {
    const saved = await exerciseForm(this.classId, slug, this.exercises.map((e) => e.slug));
    if (saved) {
      toast(`Saved ${saved.title || saved.slug}.`, "ok");
      this.changed();
      await this.load();
      this.gradebook?.refresh();
    }
  }

  async remove(e) {
    const yes = await confirmDialog(`Delete ${e.title || e.slug}?`,
      "The exercise's folder goes to the Trash of the class's checks area (it can be restored from there); "
      + "students' files and attempts are kept.", { ok: "Delete", danger: true });
    if (!yes) return;
    try {
      await request("DELETE", `/api/classes/${this.classId}/exercises/${encodeURIComponent(e.slug)}`);
      toast(`Deleted ${e.title || e.slug}.`);
      this.changed();
    } catch (err) {
      toast(err.message, "warn");
    }
    this.load();
  }

  openGradebook() {
    this.gradebook = gradebookDialog(this.classId, this.className, () => { this.gradebook = null; });
  }

  /** The live class says these students checked an exercise: the gradebook follows. */
  checked(usernames) {
    if (usernames.length && this.gradebook) this.refreshSoon();
  }
}
