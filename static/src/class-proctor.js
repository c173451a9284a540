// The proctor view: the class view (classroom.js) in an exam's mode
// (/class/<id>?exam=<exam>). Its socket sends each student's row with their
// exam fields (`exam`: starts, ends with their extra time, flags counted from
// their signals, last_run_at, latest signal; server/exams/proctor.py). Here:
// the exam's face of the tiles (EXAM_FACE: compact, so a whole exam of 150
// fits on one screen) and a student's signal timeline for the drawer.
// Everything a student chose is set as text, never as markup.
import { h, ago, clear } from "./dom.js";
import { get } from "./api.js";
import { idle, byName, FILTERS, SORTS } from "./class-tiles.js";
import { signalWords } from "./class-exams.js";

// The flags, in the order a tile says them: [key, words for n of them].
const FLAG_WORDS = [
  ["paste_outside", (n) => `${n} paste${n > 1 ? "s" : ""} from outside`],
  ["focus_lost", (n) => `left the page ${n}×`],
  ["offline", (n) => `offline ${n}×`],
  ["second_session", (n) => (n > 1 ? `${n} other sessions` : "another session")],
];

// The signals counted as flags, as the server counts them (proctor.py FLAGS).
const FLAGGED = { paste: (g) => g.outside, focus_lost: () => true, offline: () => true, second_session: () => true };

/** Seconds left of a student's exam by the server's clock `now` (ms); null: no exam fields. */
export function secondsLeft(s, now) {
  return s.exam ? Math.max(0, Math.ceil((Date.parse(s.exam.ends) - now) / 1000)) : null;
}

/** "12:05" (left), "over", "not started" (or "" with no exam fields). */
export function timeWords(s, now) {
  if (!s.exam) return "";
  if (now < Date.parse(s.exam.starts)) return "not started";
  const left = secondsLeft(s, now);
  if (!left) return "over";
  const hours = Math.floor(left / 3600);
  const mm = String(Math.floor(left / 60) % 60).padStart(hours ? 2 : 1, "0");
  return `${hours ? `${hours}:` : ""}${mm}:${String(left % 60).padStart(2, "0")}`;
}

const flagCount = (s) => FLAG_WORDS.reduce((n, [key]) => n + (s.exam?.flags?.[key] || 0), 0);
const flagWords = (s) => FLAG_WORDS.filter(([key]) => s.exam?.flags?.[key]).map(([key, words]) => words(s.exam.flags[key]));
const over = (s, now) => s.exam && now >= Date.parse(s.exam.starts) && !secondsLeft(s, now);

/** The student's last Run or Check press in the exam: {words, at} or null (a check with its score once it is in). */
function lastTry(s) {
  const run = s.exam?.last_run_at;
  const pressed = s.exam?.last_check_at;
  if (pressed && (!run || Date.parse(pressed) >= Date.parse(run))) {
    const done = s.last_check && Date.parse(s.last_check.at) >= Date.parse(pressed) ? s.last_check : null;
    return { words: done ? `checked ${done.exercise} ${done.score}/${done.max_score}` : "pressed Check", at: pressed };
  }
  return run ? { words: "ran", at: run } : null;
}

const endOf = (s) => (s.exam ? Date.parse(s.exam.ends) : Infinity);

/** The exam's tiles: name, time left, flags, last save and last run or check. */
export const EXAM_FACE = {
  filters: [
    FILTERS.find((f) => f.id === "all"),
    { id: "flagged", label: "Flagged", test: (s) => flagCount(s) > 0 },
    { id: "offline", label: "Offline", test: (s) => !s.online },
    FILTERS.find((f) => f.id === "idle"),
    { id: "over", label: "Time over", test: over },
  ],
  sorts: [
    { id: "name", label: "Name", compare: byName },
    { id: "flags", label: "Most flags first", compare: (a, b) => flagCount(b) - flagCount(a) || byName(a, b) },
    { id: "ends", label: "Least time left first", compare: (a, b) => endOf(a) - endOf(b) || byName(a, b) },
    SORTS.find((o) => o.id === "save"),
  ],
  clockMs: 1000, // the time left counts down
  listName: "Students: name, time left, flags, last save, last run or check",

  make(username, select) {
    const parts = {
      presence: h("span", { class: "presence" }),
      name: h("span", { class: "tile-name" }),
      time: h("span", { class: "tile-time" }),
      flags: h("span", { class: "tile-flags" }),
      meta: h("span", { class: "tile-meta" }),
    };
    const button = h("button", { type: "button", class: "tile-btn", "aria-pressed": "false", onclick: select },
      h("span", { class: "tile-head" }, parts.presence, parts.name, " ", parts.time), " ", parts.flags, " ", parts.meta);
    return { li: h("li", { class: "tile exam-tile", dataset: { username } }, button), button, parts };
  },

  /** Write a student's tile as they are now, setting only what changed (it is drawn every second). */
  fill(tile, s, now, skew) {
    const { parts, li, button } = tile;
    const since = (iso) => ago(new Date(Date.parse(iso) - skew));
    const time = timeWords(s, now);
    const clock = /\d$/.test(time); // a time left, not a word
    const flags = flagWords(s);
    const tried = lastTry(s);
    const meta = [s.last_save_at ? `saved ${since(s.last_save_at)}` : "not saved yet",
      tried ? `${tried.words} ${since(tried.at)}` : ""].filter(Boolean).join(" · ");
    const name = s.display_name + (s.active ? "" : " (deactivated)");
    set(li.dataset, "online", String(s.online));
    set(li.dataset, "time", clock ? "running" : time);
    set(li.dataset, "flagged", String(flags.length > 0));
    // The server's times, unformatted, for tools that time the view (as the class's tiles have them).
    set(li.dataset, "savedAt", s.last_save_at || "");
    set(li.dataset, "runAt", s.exam?.last_run_at || "");
    set(li.dataset, "checkAt", s.exam?.last_check_at || "");
    set(li.dataset, "signalAt", s.exam?.latest?.at || "");
    li.classList.toggle("idle", idle(s, now));
    parts.presence.classList.toggle("on", s.online);
    set(parts.presence, "title", s.online ? "Online: the IDE is open" : "Offline");
    set(parts.name, "textContent", name);
    set(parts.name, "title", `${name} (${s.username})`);
    set(parts.time, "textContent", time);
    set(parts.time, "title", clock ? `${time} left` : "");
    set(parts.flags, "textContent", flags.length ? flags.join(" · ") : "no flags");
    set(parts.flags, "title", flags.length ? "Signals are evidence, not verdicts: click to see when each happened." : "");
    set(parts.meta, "textContent", meta);
    // The name says the tile's visible text in its order (WCAG 2.5.3), then what only the dot shows;
    // the list's own name says the time is the time left.
    const label = [name, time, flags.length ? flags.join(", ") : "no flags", meta, s.online ? "online" : "offline"];
    const said = label.filter(Boolean).join(", ");
    if (button.getAttribute("aria-label") !== said) button.setAttribute("aria-label", said);
  },
};

/** Set `el[key]` only when it changes: 150 tiles are written every second. */
function set(el, key, value) {
  if (el[key] !== value) el[key] = value;
}

/** One student's signals in the exam, oldest first, for the drawer: loaded
 * when shown, then the new ones whenever their row's latest signal changes. */
export class SignalTimeline {
  /** el: where to show it; examId; socket: the class's ClassSocket (in the exam's mode). */
  constructor(el, { examId, socket }) {
    this.examId = examId;
    this.socket = socket;
    this.username = null;
    this.last = 0; // the id of the last signal shown
    this.loading = null;
    this.list = h("ol", { class: "signal-list", "aria-label": "Their signals, oldest first" });
    this.note = h("p", { class: "signal-note", role: "status" });
    clear(el, h("section", { class: "signal-timeline", "aria-labelledby": "signal-timeline-title" },
      h("h3", { id: "signal-timeline-title" }, "Signals"),
      h("p", { class: "hint" }, "Evidence, not verdicts: nothing was blocked."), this.note, this.list));
    this.stop = new AbortController();
    socket.addEventListener("students", () => {
      const latest = this.username && socket.students.get(this.username)?.exam?.latest;
      if (latest && latest.at !== this.latestAt) this.load();
    }, { signal: this.stop.signal });
  }

  /** Show the student `username`'s signals (null: nobody). */
  show(username) {
    this.username = username;
    this.last = 0;
    this.latestAt = undefined;
    clear(this.list);
    this.note.textContent = username ? "Loading their signals…" : "";
    if (username) this.load();
  }

  /** Load the signals after the last shown; one load at a time, and one more if asked meanwhile. */
  async load() {
    if (this.loading) {
      this.again = true;
      return;
    }
    const username = this.username;
    this.latestAt = this.socket.students.get(username)?.exam?.latest?.at;
    this.loading = get(`/api/exams/${this.examId}/signals?student=${encodeURIComponent(username)}&after=${this.last}`);
    try {
      const { signals } = await this.loading;
      if (username !== this.username) return;
      for (const g of signals) {
        if (g.id <= this.last) continue;
        this.last = g.id;
        const flag = FLAGGED[g.kind]?.(g) || false;
        this.list.append(h("li", { class: "signal", dataset: { kind: g.kind, flag: String(flag) } },
          h("time", { datetime: g.at }, new Date(g.at).toLocaleTimeString()), ` ${signalWords(g)}`));
      }
      this.note.textContent = this.list.childElementCount ? "" : "No signals yet.";
    } catch (e) {
      if (username === this.username) this.note.textContent = `${e.message} The list shows again with their next signal.`;
    } finally {
      this.loading = null;
      if (this.again) {
        this.again = false;
        if (this.username) this.load();
      }
    }
  }

  close() {
    this.stop.abort();
  }
}
