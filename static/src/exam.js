// The exam a student is taking (server/exams/). Its clock is the server's:
// the time left comes from the server and is counted down here with the
// page's own monotonic clock, never the computer's date, and set again from
// the server every half minute (extra time shows within it). Warnings at 5
// and 1 minutes; at the end, "over". What the page sees that a teacher may
// want to know (pastes, leaving the page, losing the network) goes to the
// server as signals: evidence for the teacher, nothing is blocked here.
import { h, clear, toast } from "./dom.js";
import { get, post, connection } from "./api.js";
import { alertDialog } from "./dialog.js";

const RESYNC_MS = 30_000;
const WARNINGS = [[300, "5 minutes left in the exam. Your files are saved as you type."],
  [60, "1 minute left in the exam. Your files are saved as you type."]];

/** "12:05" (minutes:seconds), "1:02:05" past an hour. */
export function clockWords(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  const hms = [Math.floor(s / 3600), Math.floor(s / 60) % 60, s % 60];
  const two = (n) => String(n).padStart(2, "0");
  return hms[0] ? `${hms[0]}:${two(hms[1])}:${two(hms[2])}` : `${hms[1]}:${two(hms[2])}`;
}

export class ExamBar extends EventTarget {
  /** el: the bar's element; exam: what GET /api/exam says (a student's view). */
  constructor({ el, exam }) {
    super();
    this.el = el;
    this.exam = exam;
    this.warned = new Set();
    this.state = exam.state;
    this.clock = h("span", { class: "exam-clock", role: "timer", "aria-live": "off" });
    this.note = h("span", { class: "exam-note" });
    clear(el, h("span", { class: "exam-title" }, `Exam: ${exam.title}`), this.clock, this.note);
    el.hidden = false;
    this.setFrom(exam);
    this.timer = setInterval(() => this.tick(), 1000);
    this.sync = setInterval(() => this.resync(), RESYNC_MS);
    this.tick();
  }

  /** Take the server's view again: its `seconds_left` and, before the start, how long until it. */
  setFrom(exam) {
    const now = performance.now();
    this.endsAt = now + exam.seconds_left * 1000;
    this.startsAt = now + Math.max(0, new Date(exam.starts) - new Date(exam.now)); // both the server's times
  }

  async resync() {
    try {
      const fresh = (await get(`/api/exams/${this.exam.id}`)).exam;
      this.exam = fresh;
      this.setFrom(fresh);
      if (fresh.seconds_left > 60) this.warned.delete(60);
      if (fresh.seconds_left > 300) this.warned.delete(300);
    } catch {
      // Offline or the server busy: the count goes on, and the next sync sets it.
    }
  }

  tick() {
    const now = performance.now();
    if (now < this.startsAt) {
      this.show("upcoming", `starts in ${clockWords((this.startsAt - now) / 1000)}`);
      return;
    }
    if (this.state === "upcoming") {
      this.state = "running"; // (what listens to "started" sees it running)
      this.dispatchEvent(new Event("started"));
    }
    const left = (this.endsAt - now) / 1000;
    if (left <= 0) {
      if (this.state !== "over") {
        this.show("over", "over");
        this.note.textContent = "Your files were handed in as they were at the end. You can still read them.";
        toast("The exam is over. Your files were handed in as they were at the end.", "info", 10_000);
        this.dispatchEvent(new Event("over"));
      }
      return;
    }
    this.show("running", `${clockWords(left)} left`);
    for (const [at, words] of WARNINGS) {
      if (left <= at && !this.warned.has(at)) {
        this.warned.add(at);
        if (left > at - 5) toast(words, "warn", 10_000); // (not when the page opens with less left)
      }
    }
  }

  show(state, text) {
    this.state = state;
    this.el.dataset.state = state;
    if (this.clock.textContent !== text) this.clock.textContent = text;
  }

  /** Tell the teacher what the page saw ({kind, ...}); a signal lost offline is not kept. */
  signal(detail) {
    if (this.state !== "running") return;
    post(`/api/exams/${this.exam.id}/signals`, detail).catch(() => {});
  }

  /**
   * What was typed in the exam's files while the network was away is kept in
   * this browser (the saver's copy) and sent when it is back: say plainly
   * whether it was handed in, or came after the student's end.
   */
  reportOfflineSaves(saver) {
    const waiting = new Set(); // the exam's files that could not be saved for want of the network
    saver.addEventListener("status", (e) => {
      const doc = e.detail;
      if (doc.area !== this.exam.folder) return;
      if (doc.status === "offline") {
        waiting.add(doc);
      } else if (waiting.has(doc) && doc.status === "saved") {
        waiting.delete(doc);
        toast(`You are back online: what you typed in ${doc.name} meanwhile is saved in your exam.`, "ok", 8000);
      } else if (waiting.has(doc) && doc.status === "error") {
        waiting.delete(doc);
        alertDialog(`${doc.name} was not handed in as you left it`, doc.refusal === "exam_over"
          ? "What you typed while the network was away reached the server after your exam ended, so it was not "
            + "handed in: your answer is the file as it was saved before the end. Tell your teacher if you think this is wrong."
          : `What you typed while the network was away could not be saved: ${doc.message}`);
      }
    });
  }

  /** Watch the page for what the teacher sees as signals. */
  watch(editorEl) {
    let copied = "";
    const remember = (e) => { copied = e.clipboardData?.getData("text/plain") || document.getSelection()?.toString() || ""; };
    document.addEventListener("copy", remember);
    document.addEventListener("cut", remember);
    editorEl.addEventListener("paste", (e) => {
      const text = e.clipboardData?.getData("text/plain") || "";
      if (text) this.signal({ kind: "paste", chars: text.length, outside: text !== copied });
    }, true);
    let away = null;
    const left = () => {
      if (away !== null) return;
      away = performance.now();
      this.signal({ kind: "focus_lost" });
    };
    const back = () => {
      if (away === null) return;
      this.signal({ kind: "focus_back", away_seconds: Math.round((performance.now() - away) / 100) / 10 });
      away = null;
    };
    window.addEventListener("blur", left);
    window.addEventListener("focus", back);
    document.addEventListener("visibilitychange", () => (document.hidden ? left() : back()));
    // Offline, the signal cannot go: both go once the server answers again.
    let offline = null;
    connection.addEventListener("change", () => {
      if (!connection.online) {
        if (offline === null) offline = performance.now();
        return;
      }
      if (offline === null) return;
      const seconds = Math.round((performance.now() - offline) / 100) / 10;
      offline = null;
      this.signal({ kind: "offline" });
      this.signal({ kind: "online", away_seconds: seconds });
    });
  }
}
