// The Exams part of the teacher's class view (server/exams/): the class's
// exams, a form to make one from its exercises, and one exam's students
// with their end and extra time, the signals their pages sent, and the
// grades of their submissions (each check, hidden ones too), which the
// teacher opens read-only.
import { h, clear, toast } from "./dom.js";
import { areaUrl, get, post, request } from "./api.js";
import { openDialog } from "./dialog.js";
import { FileTree } from "./files.js";

const GRADES_POLL_MS = 2000; // while submissions wait in the checks' line, the dialog asks again this often

const ALLOWS = [["run", "Run"], ["check", "Check"], ["assist", "Editing help"], ["own_files", "Their own files and the course folder"],
  ["ask", "Ask for help"]];
const SIGNAL_WORDS = {
  paste: (s) => `pasted ${s.chars} characters${s.outside ? ", from outside the IDE" : ""}`,
  focus_lost: () => "left the page", focus_back: (s) => `came back after ${s.away_seconds} s`,
  offline: () => "lost the network", online: (s) => `was back online after ${s.away_seconds} s`, run: () => "pressed Run",
  check: (s) => `pressed Check (${s.exercise})`,
  ide_opened: () => "opened the IDE", second_session: () => "opened the IDE in another session (another device, or signed in again)",
};

/** What a signal says, in words ("pasted 30 characters, from outside the IDE"). */
export const signalWords = (g) => (SIGNAL_WORDS[g.kind] || (() => g.kind))(g);

const when = (iso) => new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });

/** "2026-03-01T09:00" of a datetime-local input, as an ISO time with this computer's offset. */
export function withOffset(local) {
  const date = new Date(local);
  if (Number.isNaN(date.getTime())) return null;
  const minutes = -date.getTimezoneOffset();
  const two = (n) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  return `${local.length === 16 ? local + ":00" : local}${minutes >= 0 ? "+" : "-"}${two(minutes / 60)}:${two(minutes % 60)}`;
}

export class ClassExams {
  constructor() {
    this.classId = null;
    this.exams = [];
    this.list = h("ul", { class: "ex-list teacher exam-list" });
    this.note = h("p", { class: "exam-list-note" });
    this.toggle = h("button", { type: "button", class: "tree-title", "aria-expanded": "true", onclick: () => {
      this.content.hidden = !this.content.hidden;
      this.toggle.setAttribute("aria-expanded", String(!this.content.hidden));
    } }, "Exams");
    this.content = h("div", {},
      h("div", { class: "ex-tools" }, h("button", { type: "button", class: "btn small", onclick: () => this.make() }, "New exam")),
      this.note, this.list);
    this.el = h("section", { class: "class-exams", "aria-label": "Exams" }, h("div", { class: "tree-header" }, this.toggle),
      this.content);
  }

  show(classId) {
    this.classId = classId;
    this.exams = [];
    this.load();
  }

  async load() {
    const id = this.classId;
    if (id === null) return;
    try {
      const exams = (await get(`/api/classes/${id}/exams`)).exams;
      if (id !== this.classId) return;
      this.exams = exams;
      this.note.textContent = exams.length ? "" : "No exams yet: make one from the class's exercises with New exam.";
      this.note.classList.remove("error");
    } catch (e) {
      this.note.textContent = e.message;
      this.note.classList.add("error");
    }
    this.note.hidden = !this.note.textContent;
    clear(this.list, this.exams.map((e) => h("li", { class: "exam-row", dataset: { exam: String(e.id) } },
      h("button", { type: "button", class: "ex-item", onclick: () => this.open(e.id), title: "Its students, their time and signals" },
        h("span", { class: "ex-title" }, e.title),
        h("span", { class: "ex-meta" }, `${{ upcoming: "Starts", running: "Running since", over: "Was" }[e.state]} `
          + `${when(e.starts)}, ends ${when(e.ends)} · ${e.exercises.join(", ")}`)))));
  }

  /** The form of a new exam; made on the server, or a sentence saying what to change. */
  async make() {
    let exercises = [];
    try {
      exercises = (await get(`/api/classes/${this.classId}/exercises`)).exercises.filter((e) => !e.problems.length);
    } catch (e) {
      toast(e.message, "warn");
      return;
    }
    if (!exercises.length) {
      toast("An exam is made of the class's exercises: write one first with New exercise.", "warn");
      return;
    }
    const title = h("input", { type: "text", maxlength: "100", required: true, autofocus: true });
    const picks = exercises.map((e) => h("input", { type: "checkbox", value: e.slug }));
    const later = h("input", { type: "checkbox" });
    const starts = h("input", { type: "datetime-local", disabled: true });
    later.addEventListener("change", () => { starts.disabled = !later.checked; });
    const minutes = h("input", { type: "number", min: "1", max: "1440", value: "45", required: true });
    const allows = ALLOWS.map(([name]) => h("input", { type: "checkbox", value: name,
      checked: ["run", "check", "ask"].includes(name) }));
    const sebKey = h("input", { type: "text", maxlength: "64", pattern: "[0-9a-fA-F]{64}", spellcheck: "false",
      autocomplete: "off", "aria-describedby": "exam-seb-hint" });
    const error = h("p", { class: "form-error", role: "alert" });
    const label = (text, input) => h("label", { class: "field" }, h("span", {}, text), input);
    const body = h("form", { class: "exam-form" },
      label("Title", title),
      h("fieldset", {}, h("legend", {}, "Exercises"),
        exercises.map((e, i) => h("label", { class: "check-line" }, picks[i], ` ${e.title || e.slug}`))),
      h("label", { class: "check-line" }, later, " Starts later (else now)"),
      label("Starts at", starts),
      label("Minutes", minutes),
      h("fieldset", {}, h("legend", {}, "Students may use"),
        ALLOWS.map(([, words], i) => h("label", { class: "check-line" }, allows[i], ` ${words}`))),
      label("Safe Exam Browser Config Key (optional)", sebKey),
      h("p", { class: "field-hint", id: "exam-seb-hint" }, "To require Safe Exam Browser, paste the Config Key its "
        + "configuration tool shows for the exam's .seb file (64 letters and digits), and give students that file. "
        + "Empty: any browser."),
      error);
    const made = await openDialog({
      title: "New exam", body, wide: true,
      buttons: [{ label: "Cancel", value: null }, { label: "Make the exam", kind: "primary", submit: true, action: async (close) => {
        const form = { title: title.value, exercises: picks.filter((p) => p.checked).map((p) => p.value),
          minutes: Number(minutes.value), allows: Object.fromEntries(allows.map((a) => [a.value, a.checked])) };
        if (later.checked) form.starts = withOffset(starts.value) || starts.value;
        if (sebKey.value.trim()) form.seb_config_key = sebKey.value.trim();
        try {
          close((await post(`/api/classes/${this.classId}/exams`, form)).exam);
        } catch (e) {
          error.textContent = e.message;
        }
      } }],
    });
    if (made) {
      toast(`Made the exam ${made.title}.`, "ok");
      this.load();
    }
  }

  /** One exam: each student's end, extra time to give, the signals so far, and their grades. */
  async open(examId) {
    let exam, signals, grades;
    try {
      [exam, signals, grades] = await Promise.all([get(`/api/exams/${examId}`).then((r) => r.exam),
        get(`/api/exams/${examId}/signals`).then((r) => r.signals), get(`/api/exams/${examId}/grades`)]);
    } catch (e) {
      toast(e.message, "warn");
      return;
    }
    const gradeCells = new Map(); // username -> the cell that shows their grades
    const gradeNote = h("p", { class: "exam-grade-note", role: "status" });
    let open = true;
    let polling = null;
    const showGrades = (answer) => {
      for (const [username, cell] of gradeCells) {
        const theirs = answer.grades.filter((g) => g.username === username);
        clear(cell, theirs.length ? h("ul", { class: "exam-grades" }, theirs.map((g) => h("li", {}, gradeLine(g, exam))))
          : "not graded yet");
      }
      const waiting = answer.grades.filter((g) => g.state === "queued").length;
      gradeNote.textContent = waiting ? `${waiting} exercise${waiting === 1 ? "" : "s"} of the submissions still waiting for their checks.` : "";
      clearTimeout(polling);
      if (waiting && open) polling = setTimeout(refresh, GRADES_POLL_MS);
    };
    const refresh = async () => {
      try {
        if (open) showGrades(await get(`/api/exams/${examId}/grades`));
      } catch (e) {
        gradeNote.textContent = e.message;
      }
    };
    const grade = async (username) => {
      try {
        const asked = (await post(`/api/exams/${examId}/grade`, username ? { student: username } : {})).grading;
        const left = asked.not_over.length ? ` ${asked.not_over.length} still have time: grade theirs after their end.` : "";
        toast(`Grading ${asked.students.length} submission${asked.students.length === 1 ? "" : "s"}: each grade shows here when its checks are done.${left}`, "ok");
        refresh();
      } catch (e) {
        toast(e.message, "warn");
      }
    };
    const rows = exam.students.map((s) => {
      const extra = h("input", { type: "number", min: "0", max: "1440", value: String(s.extra_minutes),
        "aria-label": `Extra minutes for ${s.display_name}` });
      const ends = h("span", { class: "ex-meta" }, `ends ${when(s.ends)}`);
      const save = h("button", { type: "button", class: "btn small", onclick: async () => {
        try {
          const given = await request("PUT", `/api/exams/${examId}/students/${encodeURIComponent(s.username)}/extra`,
            { json: { minutes: Number(extra.value) } });
          ends.textContent = `ends ${when(given.ends)}`;
          toast(`${s.display_name} now ends ${when(given.ends)}.`, "ok");
        } catch (e) {
          toast(e.message, "warn");
        }
      } }, "Give");
      const theirs = signals.filter((g) => g.username === s.username);
      const gradeCell = h("div", {});
      gradeCells.set(s.username, gradeCell);
      return h("tr", { dataset: { username: s.username } },
        h("th", { scope: "row" }, s.display_name), h("td", {}, ends),
        h("td", {}, h("span", { class: "exam-extra" }, extra, save)),
        h("td", {}, gradeCell, h("span", { class: "exam-extra" },
          h("button", { type: "button", class: "btn small", "aria-label": `Grade ${s.display_name}'s submission`,
            onclick: () => grade(s.username) }, "Grade"),
          h("button", { type: "button", class: "btn small ghost", "aria-label": `Open ${s.display_name}'s submission`,
            onclick: () => openSubmission(examId, s) }, "Open"))),
        h("td", {}, theirs.length ? h("ul", { class: "exam-signals" }, theirs.slice(-5).map((g) =>
          h("li", {}, `${new Date(g.at).toLocaleTimeString()}: ${signalWords(g)}`))) : "none"));
    });
    showGrades(grades);
    await openDialog({
      title: `${exam.title}: students`, wide: true, scrolls: !rows.length,
      body: h("div", {},
        h("p", {}, `Starts ${when(exam.starts)}, ends ${when(exam.ends)}. Signals are evidence, not verdicts: nothing is blocked.`
          + (exam.safe_exam_browser ? " Students must take it in Safe Exam Browser." : "")),
        rows.length ? h("div", { class: "ex-tools" }, h("button", { type: "button", class: "btn small", onclick: () => grade(null) },
          "Grade the submissions"), " Every student whose end has passed: each exercise's checks, hidden ones too.") : null,
        gradeNote,
        h("p", {}, h("a", { class: "btn small", href: `/class/${exam.class_id}?exam=${exam.id}` }, "Open the proctor view"),
          " Every student on one screen, live: time left, last save, last run or check, and flags."),
        rows.length ? h("table", { class: "exam-students" },
          h("thead", {}, h("tr", {}, ["Student", "End", "Extra minutes", "Grade", "Latest signals"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, rows)) : h("p", {}, "The class has no students.")),
    });
    open = false;
    clearTimeout(polling);
  }
}

/** One exercise's grade, as a line: its score and each check (hidden ones marked), or why it is not graded. */
function gradeLine(g, exam) {
  const name = exam.exercises.length > 1 ? `${g.exercise}: ` : "";
  if (g.state === "queued") return `${name}waiting for its checks`;
  if (g.state === "not_graded") return h("span", { class: "error" }, `${name}not graded. ${g.message}`);
  const checks = g.checks.map((c) => `${c.passed ? "passed" : "failed"}: ${c.label}${c.hidden ? " (hidden)" : ""}`
    + (c.passed || !c.message ? "" : ` (${c.message})`));
  return h("details", {}, h("summary", {}, `${name}${g.score} of ${g.max_score}`),
    g.message ? h("p", {}, g.message) : null,
    h("ul", {}, checks.map((line) => h("li", {}, line))));
}

/** A student's submission, read-only: its files, and the one chosen. */
function openSubmission(examId, student) {
  const area = `exams/${examId}/${student.username}`;
  const tree = new FileTree({ area, title: `${student.display_name}'s submission`, writable: false });
  const shown = h("pre", { class: "exam-submission-file", tabindex: "0", "aria-label": "The file chosen" },
    "Choose a file to read it.");
  tree.addEventListener("open", async (e) => {
    try {
      shown.textContent = (await get(areaUrl("files", area, e.detail.path))).content;
    } catch (err) {
      shown.textContent = err.message;
    }
  });
  tree.load();
  openDialog({ title: `${student.display_name}'s submission (read-only)`, wide: true, body: h("div", {}, tree.el, shown) });
}
