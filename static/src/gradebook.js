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

function cellContent(cell) {
  if (!cell) return h("span", { class: "grid-none" }, "not started");
  return [
    h("span", { class: "grid-best" }, `best ${score(cell.best, cell.best_max)}`),
    h("span", { class: "grid-meta" }, `latest ${score(cell.latest, cell.latest_max)} · ${cell.attempts} attempt${cell.attempts === 1 ? "" : "s"}`),
    h("span", { class: "grid-meta" }, ago(cell.last_at)),
    cell.not_gradable ? h("span", { class: "grid-stuck" }, "last one could not be checked") : null,
    cell.stuck_on?.length ? h("span", { class: "grid-stuck" }, `stuck on ${cell.stuck_on.join(", ")}`) : null,
  ];
}

/** The grid as a table; a cell with attempts is a button that opens the latest. */
function gridTable(classId, grid) {
  if (!grid.exercises.length) return h("p", { class: "hint" }, "No exercise of this class can be done yet.");
  if (!grid.students.length) return h("p", { class: "hint" }, "No students in this class yet.");
  return h("div", { class: "table-wrap grid-wrap" }, h("table", { class: "report gradebook" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Student"),
      grid.exercises.map((e) => h("th", { scope: "col", dataset: { slug: e.slug } }, e.title, h("span", { class: "grid-meta" }, ` (${e.max_score})`))))),
    h("tbody", {}, grid.students.map((s) => h("tr", { dataset: { username: s.username } },
      h("th", { scope: "row" }, s.name, h("span", { class: "grid-meta" }, s.username)),
      grid.exercises.map((e) => {
        const cell = s.cells[e.slug];
        return h("td", { dataset: { slug: e.slug } }, cell
          ? h("button", { type: "button", class: "grid-cell", "aria-label": `${s.name}, ${e.title}: best ${score(cell.best, cell.best_max)}, `
            + `${cell.attempts} attempts. Open the latest attempt.`, onclick: () => attemptDialog(classId, e, s) }, cellContent(cell))
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
  const handle = {
    open: true,
    async refresh() {
      try {
        const grid = await get(`/api/classes/${classId}/grid`);
        if (!handle.open) return;
        // A teacher reading a cell keeps the keyboard on it across a refresh.
        const focused = document.activeElement?.closest?.(".gradebook td");
        const at = focused && [focused.closest("tr").dataset.username, focused.dataset.slug];
        clear(body, gridTable(classId, grid));
        if (at) body.querySelector(`tr[data-username="${CSS.escape(at[0])}"] td[data-slug="${CSS.escape(at[1])}"] button`)?.focus();
        status.textContent = `Updated ${new Date().toLocaleTimeString([], { hourCycle: "h23" })}.`;
      } catch (e) {
        status.textContent = e.message;
      }
    },
  };
  openDialog({
    title: `Gradebook: ${className}`,
    wide: true,
    body: h("div", {},
      h("div", { class: "toolbar" },
        h("a", { class: "btn", href: `/api/classes/${classId}/grades.csv`, download: `grades-${classId}.csv` }, "Download grades (CSV)"),
        h("span", { class: "hint" }, "Best counted score per student and exercise; updates live while open."),
        status),
      body),
  }).then(() => {
    handle.open = false;
    onClose?.();
  });
  handle.refresh();
  return handle;
}
