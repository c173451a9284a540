// The side bar's tabs: Files and Exercises, and on the teacher's page the
// live Class. One panel shows at a time; the arrow keys move between tabs.
import { $ } from "./dom.js";

export class Sidebar extends EventTarget {
  /** names: the tabs this page has, e.g. ["files", "exercises"], the first shown `first`;
   * events: "shown" (detail: the name). */
  constructor(names, first = names[0]) {
    super();
    this.names = names;
    this.current = null;
    for (const name of ["files", "class", "exercises"]) {
      $(`#tab-${name}`).hidden = !names.includes(name);
      $(`#tab-${name}`).addEventListener("click", () => this.show(name));
      $(`#tab-${name}`).addEventListener("keydown", (e) => this.key(e, name));
    }
    $("#sidebar-tabs").hidden = names.length < 2;
    this.show(first);
  }

  show(name) {
    this.current = name;
    for (const other of ["files", "class", "exercises"]) {
      const tab = $(`#tab-${other}`);
      tab.setAttribute("aria-selected", String(other === name));
      tab.tabIndex = other === name ? 0 : -1;
      $(`#${other}-panel`).hidden = other !== name;
    }
    this.dispatchEvent(new CustomEvent("shown", { detail: name }));
  }

  key(e, name) {
    const step = { ArrowLeft: -1, ArrowRight: 1 }[e.key];
    if (!step) return;
    e.preventDefault();
    const next = this.names[(this.names.indexOf(name) + step + this.names.length) % this.names.length];
    this.show(next);
    $(`#tab-${next}`).focus();
  }
}
