// The tab bar of open files (role="tablist"); each tab shows whether its
// file is saved.
import { h, clear } from "./dom.js";
import { icon } from "./icons.js";
import { isCourse } from "./api.js";

export class Tabs extends EventTarget {
  constructor(el) {
    super();
    this.el = el;
    this.docs = [];
    this.current = null;
  }

  find(key) {
    return this.docs.find((d) => d.key === key) || null;
  }

  add(doc) {
    this.docs.push(doc);
    this.render();
  }

  remove(doc) {
    const i = this.docs.indexOf(doc);
    if (i < 0) return null;
    this.docs.splice(i, 1);
    if (this.current === doc) this.current = null;
    this.render();
    return this.docs[Math.min(i, this.docs.length - 1)] || null;
  }

  activate(doc) {
    this.current = doc;
    this.render();
  }

  next(step) {
    if (!this.docs.length) return null;
    const i = this.docs.indexOf(this.current);
    return this.docs[(i + step + this.docs.length) % this.docs.length];
  }

  label(doc) {
    if (doc.area === "home") return doc.path;
    if (isCourse(doc.area)) return `course/${doc.path}`;
    return `${doc.area.slice(5)}: ${doc.path}`;
  }

  render() {
    clear(this.el, this.docs.map((doc) => {
      const selected = doc === this.current;
      const marker = doc.readOnly ? "readonly" : doc.status;
      const tab = h("div", {
        class: `tab ${selected ? "selected" : ""}`, role: "tab", "aria-selected": String(selected),
        tabindex: selected ? "0" : "-1", title: this.label(doc), "aria-keyshortcuts": "Delete", dataset: { key: doc.key, status: marker },
        onclick: () => this.dispatchEvent(new CustomEvent("select", { detail: doc })),
        onauxclick: (e) => { if (e.button === 1) this.dispatchEvent(new CustomEvent("close", { detail: doc })); },
        onkeydown: (e) => {
          if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
            const next = this.next(e.key === "ArrowRight" ? 1 : -1);
            this.dispatchEvent(new CustomEvent("select", { detail: next }));
            this.el.querySelector(`[data-key="${CSS.escape(next.key)}"]`)?.focus();
            e.preventDefault();
          } else if (e.key === "Delete") {
            this.dispatchEvent(new CustomEvent("close", { detail: doc }));
          }
        },
      },
      doc.readOnly ? icon("lock") : null,
      h("span", { class: "tab-name" }, this.label(doc)),
      h("span", { class: "tab-dot", title: statusWord(marker) },
        marker === "saved" || marker === "readonly" ? null : h("span", { class: "sr-only" }, `, ${statusWord(marker)}`)),
      // A control inside a tab is a control no screen reader reaches (WCAG 4.1.2):
      // the cross is for the mouse, and the tab's own Delete key closes it.
      h("span", {
        class: "tab-close", "aria-hidden": "true", title: `Close ${this.label(doc)} (Delete)`,
        onclick: (e) => { e.stopPropagation(); this.dispatchEvent(new CustomEvent("close", { detail: doc })); },
      }, icon("close")));
      return tab;
    }));
  }
}

function statusWord(status) {
  return { dirty: "unsaved", saving: "saving", offline: "offline", conflict: "conflict", error: "not saved" }[status] || "";
}
