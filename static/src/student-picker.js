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
