// What the teacher says to a student's IDE, and the student's raised hand.
// A teacher's message comes on the run socket ("class_message", see
// docs/run-protocol.md) and shows as a notice above the editor until the
// student dismisses it; it is read out by screen readers and never takes the
// focus from the editor. An IDE opened a little after the message (or
// reconnected, or told it "missed" some) asks GET /api/talk for it.
// The hand button asks the teacher for help, with an optional note and the
// file and line the editor is on; it goes down when the student lowers it
// or a teacher marks it answered (the "hand" message says which).
import { h, clear, toast } from "./dom.js";
import { get, post, request } from "./api.js";
import { openDialog } from "./dialog.js";
import { icon } from "./icons.js";
import { StarterNotices } from "./starter-notices.js";

const MAX_NOTE = 200; // as server/teaching/talk.py
const DISMISSED_KEPT = 30;

const timeOf = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

export class StudentTalk {
  /**
   * socket: the RunSocket; classes: the student's classes (GET /api/classes);
   * where(): {file, line} of the editor, or null; backToEditor(): give the
   * focus back to the code; open(area, path): show a file in the editor.
   */
  constructor({ socket, classes, username, where, backToEditor, open }) {
    this.classes = classes;
    this.where = where;
    this.backToEditor = backToEditor;
    this.storageKey = `pyc.talk.dismissed.${username}`;
    this.shown = new Map(); // class id -> its notice element (the latest message of each class)
    this.up = new Set(); // class ids where the hand is up
    // A live region from the start: screen readers announce what is added to it.
    this.el = h("div", { id: "talk-notices", class: "talk-notices", "aria-live": "polite", "aria-relevant": "additions" });
    document.getElementById("conn-banner").after(this.el);
    this.starters = new StarterNotices({ el: this.el, open, backToEditor, several: classes.length > 1 });
    this.button = h("button", { id: "hand-btn", class: "btn hand-btn", type: "button", "aria-pressed": "false",
      onclick: () => (this.up.size ? this.lower() : this.ask()) });
    document.getElementById("history-btn").before(this.button);
    this.renderButton();
    socket.addEventListener("message", (e) => this.received(e.detail));
    socket.addEventListener("state", () => { if (socket.state === "open") this.catchUp(); });
  }

  received(msg) {
    if (msg.type === "class_message") this.show(msg);
    else if (msg.type === "hand") this.handChanged(msg);
    else if (msg.type === "starter") this.starters.show(msg);
    else if (msg.type === "missed") this.catchUp();
  }

  /** What was said while this IDE was not listening. */
  async catchUp() {
    let found;
    try {
      found = await get("/api/talk");
    } catch {
      return; // the connection banner says what is wrong
    }
    for (const m of found.messages) this.show(m);
    for (const s of found.starters || []) this.starters.show(s);
    this.up = new Set(found.hands.map((hand) => hand.class));
    this.renderButton();
    this.el.dataset.caughtUp = "true"; // what was said before this IDE opened is shown
  }

  dismissed() {
    try {
      return JSON.parse(localStorage.getItem(this.storageKey)) || [];
    } catch {
      return [];
    }
  }

  show(m) {
    const old = this.shown.get(m.class);
    if (this.dismissed().includes(m.id) || (old && Number(old.dataset.messageId) >= m.id)) return;
    const several = this.classes.length > 1 && m.class_name;
    const notice = h("div", { class: "talk-notice class-message", dataset: { messageId: String(m.id) } },
      h("span", { class: "talk-icon" }, icon("announce")),
      h("div", { class: "talk-body" },
        h("p", { class: "talk-from" }, h("strong", {}, `Message from ${m.from}`),
          h("span", { class: "talk-when" }, ` · ${several ? `${m.class_name}, ` : ""}${timeOf(m.at)}`)),
        h("p", { class: "talk-text" }, m.text)),
      h("button", { class: "btn small", type: "button", "aria-label": `OK, close the message from ${m.from}`,
        onclick: () => this.dismiss(m) }, "OK"));
    if (old) old.replaceWith(notice);
    else this.el.append(notice);
    this.shown.set(m.class, notice);
  }

  dismiss(m) {
    const notice = this.shown.get(m.class);
    const hadFocus = notice?.contains(document.activeElement);
    notice?.remove();
    this.shown.delete(m.class);
    localStorage.setItem(this.storageKey, JSON.stringify([...this.dismissed(), m.id].slice(-DISMISSED_KEPT)));
    if (hadFocus) this.backToEditor();
  }

  handChanged(msg) {
    if (msg.up) this.up.add(msg.class);
    else this.up.delete(msg.class);
    this.renderButton();
    if (!msg.up && msg.answered_by) {
      this.note(`${msg.answered_by} marked your raised hand as answered.`);
    }
  }

  /** A short notice of our own (not a teacher's message): dismissable, read out. */
  note(text) {
    const notice = h("div", { class: "talk-notice hand-notice" },
      h("span", { class: "talk-icon" }, icon("hand")),
      h("div", { class: "talk-body" }, h("p", { class: "talk-text" }, text)),
      h("button", { class: "btn small", type: "button", "aria-label": "OK, close this note",
        onclick: () => { const hadFocus = notice.contains(document.activeElement); notice.remove(); if (hadFocus) this.backToEditor(); } },
      "OK"));
    this.el.append(notice);
  }

  renderButton() {
    const up = this.up.size > 0;
    this.button.setAttribute("aria-pressed", String(up));
    this.button.classList.toggle("up", up);
    clear(this.button, icon("hand"), h("span", { class: "btn-label" }, up ? "Hand up · Lower it" : "Ask for help"));
    this.button.title = up ? "Your teacher sees that you need help. Click to lower your hand."
      : "Raise your hand: your teacher sees that you need help";
  }

  /** The dialog that raises the hand, with a note and the line the editor is on. */
  async ask() {
    const where = this.where();
    const note = h("textarea", { id: "hand-note", rows: 3, maxlength: MAX_NOTE, autofocus: true,
      placeholder: "For example: my loop never stops" });
    const line = where ? h("input", { type: "checkbox", id: "hand-line", checked: true }) : null;
    const pick = this.classes.length > 1
      ? h("select", { id: "hand-class" }, this.classes.map((c) => h("option", { value: String(c.id), text: c.name })))
      : null;
    const error = h("p", { class: "field-error", role: "alert" });
    const raised = await openDialog({
      title: "Ask your teacher for help",
      body: h("div", { class: "form" },
        h("p", {}, "Your teacher will see that you need help. You can keep working while you wait."),
        pick ? h("label", { for: "hand-class" }, "Class", pick) : null,
        h("label", { for: "hand-note" }, "What do you need help with? (you can leave this empty)"), note,
        line ? h("label", { class: "check" }, line, `Show my teacher where I am: ${where.file}, line ${where.line}`) : null,
        error),
      buttons: [
        { label: "Cancel", value: null },
        { label: "Raise my hand", kind: "primary", id: "hand-raise",
          action: async (close) => {
            const body = { note: note.value };
            if (line?.checked) Object.assign(body, where);
            const classId = pick ? Number(pick.value) : this.classes[0]?.id;
            try {
              const answer = await post(`/api/classes/${classId}/hand`, body);
              this.handChanged({ class: answer.hand.class, up: true });
              close(true);
            } catch (e) {
              error.textContent = e.message;
            }
          } },
      ],
    });
    if (raised) this.backToEditor(); // go on working while the hand is up
  }

  async lower() {
    for (const classId of [...this.up]) {
      try {
        await request("DELETE", `/api/classes/${classId}/hand`);
        this.handChanged({ class: classId, up: false });
      } catch (e) {
        toast(e.message, "error");
      }
    }
  }
}
