// The class as tiles, one per student, for the full-screen class view
// (classroom.js): online or not, running, stuck on an error (its kind,
// file, line and message), stopped by a limit, not saved for a while, over
// quota, the last check of an exercise. Tiles are kept per student and
// updated in place, at most once a frame however many updates arrive;
// sorting moves only the tiles whose place changed. Everything a student
// chose (names, file names, messages) is set as text, never as markup.
// What a tile shows, and the filters and sorts that go with it, is a face:
// the class's (CLASS_FACE, here) or an exam's (class-proctor.js).
import { h, ago } from "./dom.js";
import { currentError } from "./class-errors.js";

export const IDLE_MINUTES = 10;
const CLOCK_MS = 20000; // "3 min ago" and "not saved for 10 min" move with the clock
export const LIMIT_WORDS = { timeout: "ran too long", cpu_limit: "used too much CPU time", memory_limit: "used too much memory",
  output_limit: "printed too much", disk_limit: "filled their folder" };
const RANK = { error: 0, limit: 1, running: 2, stopped: 3, ok: 4, none: 5 };

/** Whether a student has not saved for IDLE_MINUTES (`now`: the server's clock, ms). */
export const idle = (s, now) => !s.last_save_at || now - Date.parse(s.last_save_at) > IDLE_MINUTES * 60000;

/** What a student's program is doing: running, error, limit, ok, stopped or none. */
export function runKind(s) {
  if (s.running) return "running";
  return { error: "error", limit: "limit", ok: "ok" }[s.last_run?.outcome] || (s.last_run ? "stopped" : "none");
}

export const FILTERS = [
  { id: "all", label: "All", test: () => true },
  { id: "online", label: "Online", test: (s) => s.online },
  { id: "running", label: "Running", test: (s) => s.running },
  { id: "error", label: "Error", test: (s) => runKind(s) === "error" },
  { id: "limit", label: "Stopped by a limit", test: (s) => runKind(s) === "limit" },
  { id: "idle", label: `Not saved for ${IDLE_MINUTES} min`, test: idle },
  { id: "quota", label: "Over quota", test: (s) => s.over_quota },
];

export const byName = (a, b) => a.display_name.localeCompare(b.display_name) || a.username.localeCompare(b.username);
const score = (s) => (s.last_check && s.last_check.max_score ? s.last_check.score / s.last_check.max_score : -1);
export const SORTS = [
  { id: "name", label: "Name", compare: byName },
  { id: "state", label: "Errors first", compare: (a, b) => RANK[runKind(a)] - RANK[runKind(b)] || byName(a, b) },
  { id: "save", label: "Oldest save first",
    compare: (a, b) => (Date.parse(a.last_save_at) || 0) - (Date.parse(b.last_save_at) || 0) || byName(a, b) },
  { id: "progress", label: "Lowest exercise score first", compare: (a, b) => score(a) - score(b) || byName(a, b) },
];

export class Tiles extends EventTarget {
  /**
   * socket: the class's ClassSocket (its students, its clock); face: what a
   * tile shows ({filters, sorts, clockMs, make(username, select), fill(tile, s, now, skew)}).
   * Events: "selected" {username, student}: a tile was clicked; "shown" {shown, total}.
   */
  constructor(socket, face = CLASS_FACE) {
    super();
    this.socket = socket;
    this.face = face;
    this.filters = face.filters;
    this.sorts = face.sorts;
    this.el = h("ul", { class: "tiles", "aria-label": face.listName || "Students" });
    this.tiles = new Map(); // username -> {li, button, parts, student}
    this.filter = "all";
    this.sort = "name";
    this.query = "";
    this.only = null; // a Set of usernames (an error group), or null
    this.selected = null;
    this.frame = 0;
    this.stale = true; // every tile's times are to be written again
    setInterval(() => { this.stale = true; this.update(); }, face.clockMs);
  }

  /** Draw what changed, once in the next frame. */
  update() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  set(changes) {
    Object.assign(this, changes);
    this.update();
  }

  select(username) {
    const before = this.tiles.get(this.selected);
    this.selected = username;
    if (before) this.mark(before);
    const tile = this.tiles.get(username);
    if (tile) this.mark(tile);
    this.dispatchEvent(new CustomEvent("selected", { detail: { username, student: tile?.student || null } }));
  }

  mark(tile) {
    const on = tile.student.username === this.selected;
    tile.li.classList.toggle("selected", on);
    tile.button.setAttribute("aria-pressed", String(on));
  }

  draw() {
    const students = this.socket.students;
    const now = this.socket.now();
    for (const [username, tile] of this.tiles) {
      if (!students.has(username)) {
        tile.li.remove();
        this.tiles.delete(username);
      }
    }
    for (const s of students.values()) {
      let tile = this.tiles.get(s.username);
      if (!tile) {
        tile = { ...this.face.make(s.username, () => this.select(s.username)), student: null };
        this.tiles.set(s.username, tile);
      }
      if (tile.student !== s || this.stale) {
        tile.student = s;
        this.face.fill(tile, s, now, this.socket.skew);
        this.mark(tile);
      }
    }
    this.stale = false;
    const filter = this.filters.find((f) => f.id === this.filter);
    const sort = this.sorts.find((o) => o.id === this.sort);
    const q = this.query.trim().toLowerCase();
    const ordered = [...students.values()].sort(sort.compare);
    let shown = 0;
    let at = this.el.firstChild;
    for (const s of ordered) {
      const { li } = this.tiles.get(s.username);
      if (li !== at) this.el.insertBefore(li, at); // moved only when out of place
      else at = at.nextSibling;
      const visible = filter.test(s, now) && (!this.only || this.only.has(s.username))
        && (!q || s.username.includes(q) || s.display_name.toLowerCase().includes(q));
      li.hidden = !visible;
      shown += visible;
    }
    this.dispatchEvent(new CustomEvent("shown", { detail: { shown, total: students.size, now } }));
  }
}

/** The class's tiles: what each student's program is doing, their last save and check. */
export const CLASS_FACE = {
  filters: FILTERS,
  sorts: SORTS,
  clockMs: CLOCK_MS,

  make(username, select) {
    const parts = {
      presence: h("span", { class: "presence" }),
      name: h("span", { class: "tile-name" }),
      username: h("span", { class: "tile-user" }),
      state: h("span", { class: "tile-state" }),
      detail: h("span", { class: "tile-detail" }),
      meta: h("span", { class: "tile-meta" }),
    };
    const button = h("button", { type: "button", class: "tile-btn", "aria-pressed": "false", onclick: select },
      // Spaces between the lines (the grid ignores them): read as words, not "Ada Lovelaceada".
      h("span", { class: "tile-head" }, parts.presence, parts.name, " ", parts.username), " ", parts.state, " ",
      parts.detail, " ", parts.meta);
    const li = h("li", { class: "tile", dataset: { username } }, button);
    return { li, button, parts };
  },

  /** Write a student's tile as they are now: text only. */
  fill(tile, s, now, skew) {
    const { parts, li, button } = tile;
    const kind = runKind(s);
    const [state, detail] = this.words(s, kind, skew);
    const saved = s.last_save_at ? `saved ${ago(new Date(Date.parse(s.last_save_at) - skew))}` : "never saved";
    const check = s.last_check
      ? `${s.last_check.exercise}: ${s.last_check.score}/${s.last_check.max_score}` : "";
    li.dataset.state = kind;
    li.dataset.online = String(s.online);
    // The server's times, unformatted, for tools that time the view (loadtest/bench_class_view.py).
    li.dataset.savedAt = s.last_save_at || "";
    li.dataset.runAt = s.last_run?.at || "";
    li.classList.toggle("idle", idle(s, now));
    li.classList.toggle("over-quota", !!s.over_quota);
    parts.presence.classList.toggle("on", s.online);
    parts.presence.title = s.online ? "Online: the IDE is open" : "Offline";
    parts.name.textContent = s.display_name + (s.active ? "" : " (deactivated)");
    parts.username.textContent = s.username;
    parts.state.textContent = state;
    parts.state.title = state;
    parts.detail.textContent = detail;
    parts.detail.title = detail;
    parts.name.title = `${parts.name.textContent} (${s.username})`;
    parts.username.title = s.username;
    parts.meta.textContent = [saved, check ? `checked ${check}` : "", s.over_quota ? "over quota" : ""].filter(Boolean).join(" · ");
    parts.meta.title = s.over_quota
      ? "Their folder is over its quota: their next save or run is refused until they delete something." : "";
    // The name says the tile's visible text in its order (WCAG 2.5.3), then what only the dot shows.
    button.setAttribute("aria-label", [parts.name.textContent, s.username, state, detail, parts.meta.textContent,
      s.online ? "online" : "offline"].filter(Boolean).join(", "));
  },

  /** [state, detail]: what the tile says of the student's program. */
  words(s, kind, skew) {
    if (kind === "running") return ["Running", `started ${ago(new Date(Date.parse(s.run_started_at) - skew))}`];
    if (kind === "error") {
      const error = currentError(s);
      const where = error.file ? ` · ${error.file}:${error.line}` : "";
      return [`${error.kind || "Error"}${where}`, error.kind ? error.message || error.text : error.text || "stopped with an error"];
    }
    if (kind === "limit") return ["Stopped by a limit", LIMIT_WORDS[s.last_run.reason] || s.last_run.reason];
    if (kind === "ok") return ["Finished", ""];
    if (kind === "stopped") return ["Stopped", ""];
    return ["No run yet", ""];
  },
};
