// Talking to a class, for its teachers: the queue of raised hands (oldest
// first, live from the class socket's "hands" messages, each marked
// answered with a click) and a message to the whole class or to chosen
// students, which appears at once in their open IDEs.
//
//   const talk = new ClassTalk(el, { classId, socket });   // socket: a ClassSocket
//   talk.compose(["ada", "bob"]);   // a message to these students, say those with one error
//   talk.close();
//
// Self-contained: it fills `el` and depends on no layout around it.
import { h, clear } from "./dom.js";
import { post, request } from "./api.js";

const MAX_TEXT = 500; // as server/teaching/talk.py
const REDRAW_MS = 15000; // "waiting 3 min" moves with the clock

/** "just now", "2 min", "1 h 5 min": how long a hand has been up. */
function waited(ms) {
  const minutes = Math.floor(ms / 60000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

const hasError = (s) => !s.running && s.last_run?.outcome === "error";

export class ClassTalk {
  constructor(el, { classId, socket }) {
    this.el = el;
    this.classId = classId;
    this.socket = socket;
    this.chosen = new Set(); // usernames picked for a group message
    this.known = null; // the usernames the picker lists, to redraw it only when they change
    this.seen = null; // usernames whose hands were up at the last redraw
    this.count = h("span", { class: "hands-count" });
    this.queue = h("ol", { class: "hands-queue", "aria-label": "Raised hands, oldest first", tabindex: "-1" });
    this.empty = h("p", { class: "hint hands-empty" }, "No hands up.");
    this.announcer = h("p", { class: "sr-only", role: "status", "aria-live": "polite" });
    this.text = h("textarea", { class: "talk-text-input", rows: 2, maxlength: MAX_TEXT, "aria-label": "Message",
      placeholder: "Write a message for the students' screens" });
    const group = `talk-to-${classId}-${Math.random().toString(36).slice(2, 8)}`; // radios of this component only
    this.everyone = h("input", { type: "radio", name: group, checked: true, onchange: () => this.pickerShown() });
    this.some = h("input", { type: "radio", name: group, onchange: () => this.pickerShown() });
    this.picker = h("div", { class: "talk-picker", role: "group", "aria-label": "Students to send to", hidden: true });
    this.pickerTools = h("div", { class: "talk-picker-tools", hidden: true },
      h("button", { type: "button", class: "btn small", onclick: () => this.chooseErrors() }, "Those with an error now"),
      h("button", { type: "button", class: "btn small ghost", onclick: () => this.choose([]) }, "None"));
    this.status = h("p", { class: "talk-status", role: "status", "aria-live": "polite" });
    this.sendButton = h("button", { type: "submit", class: "btn primary small" }, "Send");
    this.form = h("form", { class: "talk-form", onsubmit: (e) => { e.preventDefault(); this.send(); } },
      this.text,
      h("div", { class: "talk-who" },
        h("label", { class: "check" }, this.everyone, "Everyone in the class"),
        h("label", { class: "check" }, this.some, "Only these students:")),
      this.pickerTools, this.picker,
      h("div", { class: "talk-send" }, this.sendButton, this.status));
    clear(el, h("section", { class: "class-talk", "aria-label": "Talk to the class" },
      h("h3", { class: "talk-head" }, "Raised hands ", this.count), this.empty, this.queue, this.announcer,
      h("h3", { class: "talk-head" }, "Message to the students"), this.form));
    this.onHands = () => this.renderHands();
    this.onStudents = () => this.renderPicker();
    socket.addEventListener("hands", this.onHands);
    socket.addEventListener("students", this.onStudents);
    this.timer = setInterval(() => { if (!document.hidden) this.renderHands(); }, REDRAW_MS);
    this.renderHands();
    this.renderPicker();
  }

  close() {
    clearInterval(this.timer);
    this.socket.removeEventListener("hands", this.onHands);
    this.socket.removeEventListener("students", this.onStudents);
  }

  /** Get a message ready for these students (none: the whole class). */
  compose(usernames = []) {
    this.everyone.checked = !usernames.length;
    this.some.checked = !!usernames.length;
    this.choose(usernames);
    this.pickerShown();
    this.text.focus();
  }

  // -- hands ----------------------------------------------------------------------

  renderHands() {
    const hands = this.socket.hands || [];
    const now = this.socket.now();
    const names = new Set(hands.map((hand) => hand.username));
    if (this.seen) {
      const raised = hands.filter((hand) => !this.seen.has(hand.username));
      if (raised.length) this.announcer.textContent = `${raised.map((hand) => hand.display_name).join(", ")} raised a hand.`;
    }
    this.seen = names;
    this.count.textContent = `(${hands.length})`;
    this.empty.hidden = hands.length > 0;
    // Rows are kept and updated in place, so a keyboard on one keeps the focus.
    const rows = new Map([...this.queue.children].map((li) => [li.dataset.username, li]));
    for (const [username, li] of rows) {
      if (names.has(username)) continue;
      // The hand just answered: the keyboard goes on to the next one, not to the top of the page.
      const hadFocus = li.contains(document.activeElement);
      const next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      if (hadFocus) (next?.querySelector("button") || this.queue).focus();
    }
    let previous = null;
    for (const hand of hands) {
      let li = rows.get(hand.username);
      if (!li) li = h("li", { class: "hand", dataset: { username: hand.username } });
      if (previous ? previous.nextSibling !== li : this.queue.firstChild !== li) {
        if (previous) previous.after(li);
        else this.queue.prepend(li);
      }
      previous = li;
      this.fillHand(li, hand, now);
    }
  }

  fillHand(li, hand, now) {
    if (!li.firstChild) {
      const button = h("button", { type: "button", class: "btn small", onclick: () => this.answer(hand.username, button) },
        "Answered");
      li.append(h("div", { class: "hand-line" }, h("strong", { class: "hand-name" }),
        h("span", { class: "hand-username" }), h("span", { class: "hand-waited" })),
      h("p", { class: "hand-note" }), h("p", { class: "hand-where" }, h("code")), button);
    }
    const wait = waited(now - Date.parse(hand.raised_at));
    const where = hand.file ? `${hand.file}${hand.line ? `:${hand.line}` : ""}` : "";
    const part = (name) => li.querySelector(`.${name}`);
    part("hand-name").textContent = hand.display_name;
    part("hand-username").textContent = ` (${hand.username})`;
    part("hand-waited").textContent = wait === "just now" ? " · just now" : ` · waiting ${wait}`;
    part("hand-note").textContent = hand.note;
    part("hand-note").hidden = !hand.note;
    part("hand-where").firstChild.textContent = where;
    part("hand-where").hidden = !where;
    li.querySelector("button").setAttribute("aria-label", `Mark ${hand.display_name}'s hand as answered`);
  }

  async answer(username, button) {
    if (button.getAttribute("aria-busy") === "true") return;
    button.setAttribute("aria-busy", "true"); // not disabled: a disabled button drops the keyboard's focus
    try {
      await request("DELETE", `/api/classes/${this.classId}/hands/${encodeURIComponent(username)}`);
    } catch (e) {
      if (e.code !== "no_such_hand") this.announcer.textContent = e.message; // answered already: the queue says so
    } finally {
      button.removeAttribute("aria-busy");
    }
  }

  // -- a message ----------------------------------------------------------------------

  pickerShown() {
    this.picker.hidden = this.pickerTools.hidden = !this.some.checked;
    this.sayWho();
  }

  /** The Send button says who the message will reach, before it is sent. */
  sayWho() {
    const plural = (n) => `${n} ${n === 1 ? "student" : "students"}`;
    if (this.everyone.checked) {
      const all = [...this.socket.students.values()].filter((s) => s.active).length;
      this.sendButton.textContent = `Send to everyone (${plural(all)})`;
    } else {
      this.sendButton.textContent = `Send to ${plural(this.chosen.size)}`;
    }
  }

  renderPicker() {
    const students = [...this.socket.students.values()].filter((s) => s.active)
      .sort((a, b) => a.display_name.localeCompare(b.display_name) || a.username.localeCompare(b.username));
    const key = students.map((s) => `${s.username}\n${s.display_name}`).join("\n");
    if (key === this.known) return;
    this.known = key;
    this.sayWho();
    clear(this.picker, students.length ? students.map((s) => h("label", { class: "check" },
      h("input", { type: "checkbox", value: s.username, checked: this.chosen.has(s.username),
        onchange: (e) => {
          if (e.target.checked) this.chosen.add(s.username); else this.chosen.delete(s.username);
          this.sayWho();
        } }),
      `${s.display_name} (${s.username})`)) : h("p", { class: "hint" }, "No students in this class yet."));
  }

  choose(usernames) {
    this.chosen = new Set(usernames);
    for (const box of this.picker.querySelectorAll("input")) box.checked = this.chosen.has(box.value);
    this.sayWho();
  }

  chooseErrors() {
    this.choose([...this.socket.students.values()].filter((s) => s.active && hasError(s)).map((s) => s.username));
  }

  async send() {
    const text = this.text.value.trim();
    if (!text) {
      this.status.textContent = "Write a message first.";
      return;
    }
    const body = { text };
    if (this.some.checked) {
      body.students = [...this.chosen];
      if (!body.students.length) {
        this.status.textContent = "Choose at least one student, or send to everyone.";
        return;
      }
    }
    this.sendButton.disabled = true;
    try {
      const sent = await post(`/api/classes/${this.classId}/messages`, body);
      this.text.value = "";
      this.status.textContent = `Sent to ${sent.sent_to} ${sent.sent_to === 1 ? "student" : "students"}.`;
      if (this.some.checked) {
        // A group message is done: the next one ("everyone look at the board") goes to the whole class.
        this.everyone.checked = true;
        this.choose([]);
        this.pickerShown();
        this.status.textContent += " The next message goes to everyone.";
      }
    } catch (e) {
      this.status.textContent = e.message;
    } finally {
      this.sendButton.disabled = false;
    }
  }
}
