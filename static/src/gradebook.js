// The teacher's gradebook of a class: students × exercises (not started,
// or attempts, best and latest score, when they last checked and the
// checks they are stuck on), refreshed while open when the live class
// says a student checked; a cell opens the student's latest attempt with
// everything the grader saw; grades.csv to download.
import { h, clear, ago } from "./dom.js";
import { get } from "./api.js";
import { openDialog } from "./dialog.js";
import { checkItem, shownDetails } from "./results.js";

const score = (value, max) => (value === null || value === undefined ? "—" : `${value}/${max}`);

/** A cell in one line (a class of 30 fits a school laptop's screen); the rest is in its name. */
function cellContent(cell) {
  if (!cell) return h("span", { class: "grid-none" }, "not started");
  return [
    h("span", { class: "grid-best" }, `best ${score(cell.best, cell.best_max)}`),
    h("span", { class: "grid-meta" }, ` · ${cell.attempts}×`),
    cell.not_gradable ? h("span", { class: "grid-stuck" }, " · not checkable") : null,
    cell.stuck_on?.length ? h("span", { class: "grid-stuck" }, " · stuck") : null,
  ];
}

/** The cell's visible text, as one string. */
function cellText(cell) {
  const parts = cellContent(cell);
  return (Array.isArray(parts) ? parts : [parts]).filter(Boolean).map((el) => el.textContent).join("");
}

/** Everything a cell stands for, as a sentence (its button's name and tooltip). */
function cellWords(cell) {
  return [`best ${score(cell.best, cell.best_max)}`, `latest ${score(cell.latest, cell.latest_max)}`,
    `${cell.attempts} attempt${cell.attempts === 1 ? "" : "s"}`, `last checked ${ago(cell.last_at)}`,
    cell.not_gradable ? "the last one could not be checked" : null,
    cell.stuck_on?.length ? `stuck on ${cell.stuck_on.join(", ")}` : null].filter(Boolean).join(", ");
}

const passed = (cell) => !!cell && cell.best !== null && cell.best !== undefined && cell.best >= cell.best_max;
export const SHOWS = {
  all: { label: "Everyone", keep: () => true },
  not_attempted: { label: "Not attempted", keep: (cell) => !cell },
  not_passed: { label: "Not passed", keep: (cell) => !passed(cell) },
};
const byName = (a, b) => a.name.localeCompare(b.name) || a.username.localeCompare(b.username);
const best = (cell) => (cell && cell.best !== null && cell.best !== undefined ? cell.best / (cell.best_max || 1) : -1);
const last = (cell) => (cell ? Date.parse(cell.last_at) : 0);
export const SORTS = {
  name: { label: "Name", compare: () => 0 },
  score_low: { label: "Score, lowest first", compare: (a, b) => best(a) - best(b) },
  score_high: { label: "Score, highest first", compare: (a, b) => best(b) - best(a) },
  last_new: { label: "Last attempt, newest first", compare: (a, b) => last(b) - last(a) },
  last_old: { label: "Last attempt, oldest first", compare: (a, b) => last(a) - last(b) },
};

/** The students `view` ({show, sort, slug}) asks for, in its order: filtered and sorted by their cell of `slug`. */
export function shownStudents(grid, view) {
  const cell = (s) => s.cells[view.slug] ?? null;
  const { keep } = SHOWS[view.show] || SHOWS.all;
  const { compare } = SORTS[view.sort] || SORTS.name;
  return grid.students.filter((s) => keep(cell(s))).sort((a, b) => compare(cell(a), cell(b)) || byName(a, b));
}

/** The grid as a table; a cell with attempts is a button that opens the latest. */
function gridTable(classId, grid, students) {
  if (!grid.exercises.length) return h("p", { class: "hint" }, "No exercise of this class can be done yet.");
  if (!grid.students.length) return h("p", { class: "hint" }, "No students in this class yet.");
  if (!students.length) return h("p", { class: "hint" }, "No student matches what is chosen above.");
  return h("div", { class: "table-wrap grid-wrap" }, h("table", { class: "report gradebook" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Student"),
      grid.exercises.map((e) => h("th", { scope: "col", dataset: { slug: e.slug } }, e.title, h("span", { class: "grid-meta" }, ` (${e.max_score})`))))),
    h("tbody", {}, students.map((s) => h("tr", { dataset: { username: s.username } },
      h("th", { scope: "row" }, s.name, h("span", { class: "grid-meta" }, ` ${s.username}`)),
      grid.exercises.map((e) => {
        const cell = s.cells[e.slug];
        return h("td", { dataset: { slug: e.slug } }, cell
          ? h("button", { type: "button", class: "grid-cell", title: cellWords(cell),
            // The name holds the cell's visible text, as said (WCAG 2.5.3), then the rest of it.
            "aria-label": `${s.name}, ${e.title}: ${cellText(cell)}; ${cellWords(cell)}. Open the latest attempt.`,
            onclick: () => attemptDialog(classId, e, s) }, cellContent(cell))
          : cellContent(cell));
      }))))));
}

/** What became of one press of Check, in words. */
function pressOutcome(p) {
  if (p.outcome === "not_checked") return `could not be checked (${p.reason}): ${p.message || "no reason was given."}`;
  if (p.outcome === "not_gradable") return `did not parse: ${p.message || ""}`;
  return `${p.score}/${p.max_score}${p.counted ? "" : " (did not count)"}`;
}

/** The student's latest presses of Check, newest first, the ones that could not be checked with why. */
function pressList(presses) {
  if (!presses?.length) return null;
  return h("details", { class: "check-about" }, h("summary", {}, `Every press of Check (the latest ${presses.length})`),
    h("ul", { class: "press-list" }, presses.map((p) => h("li", {}, `${ago(p.started_at)}: ${pressOutcome(p)}`))));
}

/** A student's latest attempt at an exercise, as the grader saw it. */
export async function attemptDialog(classId, exercise, student) {
  let a;
  try {
    a = await get(`/api/classes/${classId}/exercises/${encodeURIComponent(exercise.slug)}/attempts/${encodeURIComponent(student.username)}`);
  } catch (e) {
    return openDialog({ title: `${student.name}: ${exercise.title}`, body: h("p", {}, e.message) });
  }
  return openDialog({
    title: `${a.name}: ${exercise.title}`,
    wide: true,
    body: h("div", { class: "attempt" },
      h("p", { class: "ex-progress" }, `Latest attempt: ${a.score}/${a.max_score}, checked ${ago(a.finished_at)}`
        + (a.counted ? "." : " (did not count).")),
      a.note ? h("p", { class: "ex-note" }, a.note) : null,
      a.message ? h("p", { class: "ex-note" }, a.message) : null,
      // Every check of the attempt ran these bytes, read once as Check was pressed.
      a.source != null ? h("details", { class: "check-about graded-source" },
        h("summary", {}, `The code that was checked: ${a.file} (version ${a.version})`),
        h("pre", { class: "check-text" }, a.source)) : null,
      h("ul", { class: "check-list" }, a.checks.map((c) => {
        const details = c.details && typeof c.details === "object" ? c.details : null;
        const item = checkItem(null, { ...c, label: `${c.id} (${c.kind})` });
        if (details) {
          item.append(...shownDetails(details, null),
            h("details", { class: "check-about" }, h("summary", {}, "Everything the checker recorded"),
              h("pre", { class: "check-text" }, JSON.stringify(details, null, 2))));
        }
        return item;
      })),
      h("details", { class: "check-about" }, h("summary", {}, "What the student saw"),
        h("ul", { class: "check-list" }, (a.student_saw || []).map((r) => checkItem(null, r)))),
      pressList(a.presses)),
  });
}

/** Open the gradebook of a class; returns {refresh()} while it is open (null once closed). */
export function gradebookDialog(classId, className, onClose) {
  const body = h("div", { class: "gradebook-body" }, h("p", { class: "hint" }, "Loading…"));
  const status = h("p", { class: "hint", role: "status", "aria-live": "polite" });
  const count = h("span", { class: "hint grid-count" });
  const view = { show: "all", sort: "name", slug: null };
  let grid = null;
  const choice = (label, options, key) => h("label", { class: "grid-choice" }, label, h("select", {
    onchange: (e) => { view[key] = e.target.value; draw(); } }, options));
  const show = choice("Show", Object.entries(SHOWS).map(([k, v]) => h("option", { value: k }, v.label)), "show");
  const exercise = choice("of", [], "slug");
  const sort = choice("Sort by", Object.entries(SORTS).map(([k, v]) => h("option", { value: k }, v.label)), "sort");

  function draw() {
    // A teacher reading a cell keeps the keyboard on it across a redraw.
    const focused = document.activeElement?.closest?.(".gradebook td");
    const at = focused && [focused.closest("tr").dataset.username, focused.dataset.slug];
    const slugs = grid.exercises.map((e) => e.slug);
    if (!slugs.includes(view.slug)) view.slug = slugs[slugs.length - 1] ?? null; // the newest exercise
    const select = exercise.querySelector("select");
    if (select.dataset.slugs !== slugs.join("\n")) {
      clear(select, grid.exercises.map((e) => h("option", { value: e.slug }, e.title)));
      select.dataset.slugs = slugs.join("\n");
    }
    select.value = view.slug ?? "";
    const students = shownStudents(grid, view);
    count.textContent = `${students.length} of ${grid.students.length} students shown.`;
    clear(body, gridTable(classId, grid, students));
    if (at) body.querySelector(`tr[data-username="${CSS.escape(at[0])}"] td[data-slug="${CSS.escape(at[1])}"] button`)?.focus();
  }

  const handle = {
    open: true,
    async refresh() {
      try {
        const fresh = await get(`/api/classes/${classId}/grid`);
        if (!handle.open) return;
        grid = fresh;
        draw();
        status.textContent = `Updated ${new Date().toLocaleTimeString([], { hourCycle: "h23" })}.`;
      } catch (e) {
        status.textContent = e.message;
      }
    },
  };
  openDialog({
    title: `Gradebook: ${className}`,
    wide: true,
    className: "gradebook-dialog",
    buttons: [], // closed by its head's button or Esc: the rows get the room
    body: h("div", {},
      h("div", { class: "toolbar grid-tools" },
        h("a", { class: "btn small", href: `/api/classes/${classId}/grades.csv`, download: `grades-${classId}.csv`,
          title: "Best counted score per student and exercise" }, "Download grades (CSV)"),
        show, exercise, sort, count, status),
      body),
  }).then(() => {
    handle.open = false;
    onClose?.();
  });
  handle.refresh();
  return handle;
}
