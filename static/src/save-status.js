// Whether the shown file is saved, in the top bar ("Saved", "Offline —
// retrying", a button to settle a conflict), and for screen readers only the
// problems and their end, not every save.
import { h, $, clear } from "./dom.js";
import { STATUS_TEXT } from "./autosave.js";

const SERIOUS = ["offline", "conflict", "error"];

export class SaveStatus {
  /** onConflict(doc): the student asked to settle the conflict of `doc`. */
  constructor({ onConflict }) {
    this.el = $("#save-status");
    this.announcer = $("#announcer");
    this.onConflict = onConflict;
    this.announced = "saved";
  }

  /** Show the status of `doc` (null: no file open). */
  show(doc) {
    const el = this.el;
    if (!doc) {
      el.dataset.status = "none";
      clear(el);
      return;
    }
    this.announce(doc);
    const status = doc.readOnly ? "readonly" : doc.status;
    el.dataset.status = status;
    if (status === "conflict") {
      clear(el, h("button", { class: "btn small warn", type: "button", onclick: () => this.onConflict(doc) },
        "Conflict — choose a version"));
      return;
    }
    const words = doc.readOnly ? "Read-only" : STATUS_TEXT[doc.status];
    clear(el, h("span", { class: "dot", "aria-hidden": "true" }), h("span", { title: doc.message || "" }, words),
      status === "error" && doc.message ? h("span", { class: "status-detail" }, `: ${doc.message}`) : null);
  }

  announce(doc) {
    const status = doc.readOnly ? "saved" : doc.status;
    if (SERIOUS.includes(status) && status !== this.announced) {
      this.announcer.textContent = `${doc.name}: ${STATUS_TEXT[status]}${doc.message ? ". " + doc.message : ""}`;
    } else if (status === "saved" && SERIOUS.includes(this.announced)) {
      this.announcer.textContent = `${doc.name}: saved`;
    }
    if (status === "saved" || SERIOUS.includes(status)) this.announced = status;
  }
}
