// The teacher's form for one exercise of a class (a new one, or one to
// change): title, the student's file, the due date, instructions
// (Markdown, with a preview), tests.py, the starter files and the checks,
// each with the fields of its kind. Saved whole with PUT
// /api/classes/<id>/exercises/<slug>, as the same files a teacher keeps
// in git; what is wrong comes back as sentences, shown above the buttons.
import { h, clear } from "./dom.js";
import { get, request, ApiError } from "./api.js";
import { openDialog } from "./dialog.js";
import { markdown } from "./markdown.js";

const SLUG = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const KINDS = { output: "Output: run with input, compare what it prints", function: "Function: a test of tests.py",
  code: "Code: look at the code itself" };
const COMPARES = { output: "as printed, input() prompts left out", exact: "exactly, input() prompts included",
  normalized: "ignoring spaces and capitals, input() prompts left out", regex: "matching a pattern (regex), input() prompts left out" };
const VISIBILITIES = { visible: "visible: students see input, expected output and hint",
  hidden: "hidden: students see only passed or not", after_due: "hidden until the due date" };

// What each code rule guarantees: only a prohibition can be watched while the program runs.
const RULES_SAID = "uses_loop, defines:NAME and uses_call:NAME are read from the code's text only. " +
  "no_import:MODULE is read from the text and also enforced while the checks run the program: importing " +
  "MODULE in any way (importlib, exec, a name built from pieces) stops the program and fails the rule, and " +
  "so does starting another program. A module that imports MODULE counts too: random imports math, and " +
  "most modules import os or sys, so forbid modules a student would import on purpose.";

const exerciseUrl = (classId, slug) => `/api/classes/${classId}/exercises/${encodeURIComponent(slug)}`;

/** An ISO date-time with its offset -> the value of a datetime-local field (this browser's time). */
function localValue(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A datetime-local value -> ISO 8601 with this browser's offset ("2030-06-30T18:00:00+02:00"). */
function isoValue(local) {
  if (!local) return null;
  const d = new Date(local);
  const offset = -d.getTimezoneOffset();
  const pad = (n) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  return `${local.length === 16 ? local + ":00" : local}${offset >= 0 ? "+" : "-"}${pad(offset / 60)}:${pad(offset % 60)}`;
}

const select = (options, value, label) => h("select", { "aria-label": label },
  Object.entries(options).map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
const field = (label, input, cls = "") => h("label", { class: cls }, label, input);

/** One check's fields; value() gives the check as the API takes it. */
class CheckFields {
  constructor(check, n, onRemove) {
    this.inputs = {
      id: h("input", { type: "text", value: check.id || "", spellcheck: "false" }),
      kind: select(KINDS, check.kind || "output", "Kind"),
      points: h("input", { type: "number", min: "0", max: "1000", step: "1", value: String(check.points ?? 1) }),
      visibility: select(VISIBILITIES, check.visibility || "visible", "Visibility"),
      hint: h("input", { type: "text", value: check.hint || "" }),
      input: h("textarea", { rows: "3", spellcheck: "false" }, check.input || ""),
      expected: h("textarea", { rows: "3", spellcheck: "false" }, check.expected || ""),
      compare: select(COMPARES, check.compare || "output", "Compare"),
      test: h("input", { type: "text", value: check.test || "", spellcheck: "false", placeholder: "test_two_numbers" }),
      rule: h("input", { type: "text", value: check.rule || "", spellcheck: "false",
        placeholder: "uses_loop, defines:NAME, no_import:MODULE or uses_call:NAME" }),
    };
    const i = this.inputs;
    this.kindFields = {
      output: [field("Input (what is typed)", i.input), field("Expected output", i.expected), field("Compare", i.compare),
        h("p", { class: "hint" }, "A prompt is what input() shows before the student types, as in input(\"A number: \"). "
          + "Only 'exactly' compares prompts: then write them in the expected output, without what is typed (a check does not show it).")],
      function: [field("Test function in tests.py", i.test)],
      code: [field("Rule", i.rule), h("p", { class: "hint rule-guarantees" }, RULES_SAID)],
    };
    this.legend = h("legend", {}, `Check ${n}`);
    this.el = h("fieldset", { class: "check-form" }, this.legend,
      h("div", { class: "check-form-row" }, field("Id", i.id), field("Kind", i.kind), field("Points", i.points),
        field("Visibility", i.visibility)),
      Object.values(this.kindFields).map((fields) => h("div", { class: "check-form-row kind" }, fields)),
      h("div", { class: "check-form-row" }, field("Hint (shown when the check fails)", i.hint, "grow"),
        h("button", { type: "button", class: "btn small danger-outline", onclick: onRemove }, `Remove check ${n}`)));
    i.kind.addEventListener("change", () => this.showKind());
    this.showKind();
  }

  number(n) {
    this.legend.textContent = `Check ${n}`;
    this.el.querySelector(".danger-outline").textContent = `Remove check ${n}`;
  }

  showKind() {
    const kind = this.inputs.kind.value;
    for (const [k, fields] of Object.entries(this.kindFields)) fields[0].parentElement.hidden = k !== kind;
  }

  value() {
    const i = this.inputs;
    const kind = i.kind.value;
    const check = { id: i.id.value.trim(), kind, points: Number(i.points.value), visibility: i.visibility.value };
    if (i.hint.value.trim()) check.hint = i.hint.value;
    if (kind === "output") Object.assign(check, { input: i.input.value, expected: i.expected.value, compare: i.compare.value });
    if (kind === "function") check.test = i.test.value.trim();
    if (kind === "code") check.rule = i.rule.value.trim();
    return check;
  }
}

/** One starter file: its path and text (null: a file the form cannot show, kept as it is). */
class StarterFields {
  constructor(path, text, onRemove) {
    this.text = text;
    this.path = h("input", { type: "text", value: path, spellcheck: "false", "aria-label": "Starter file name" });
    this.body = text === null ? h("p", { class: "hint" }, "Not text, or too large to show here: kept as it is.")
      : h("textarea", { rows: "5", spellcheck: "false", "aria-label": `Text of the starter file ${path || ""}`.trim() }, text);
    this.el = h("div", { class: "starter-form" },
      h("div", { class: "check-form-row" }, field("File name", this.path, "grow"),
        h("button", { type: "button", class: "btn small danger-outline", onclick: onRemove }, "Remove file")),
      this.body);
  }

  value() {
    return [this.path.value.trim(), this.text === null ? null : this.body.value];
  }
}

/**
 * Open the form for the exercise `slug` of a class (null: a new one; `taken`:
 * the folder names in use). Resolves to the saved exercise, or null.
 */
export async function exerciseForm(classId, slug, taken = []) {
  let ex = { title: "", file: "", due: null, instructions: "", tests: "", starter: {}, checks: [], etag: null };
  if (slug) {
    try {
      ex = await get(exerciseUrl(classId, slug));
    } catch (e) {
      return openDialog({ title: "Cannot open the exercise", body: h("p", {}, e.message) }).then(() => null);
    }
  }
  const slugInput = h("input", { type: "text", value: slug || "", spellcheck: "false", autofocus: !slug, readOnly: !!slug,
    placeholder: "average" });
  const title = h("input", { type: "text", value: ex.title || "", autofocus: !!slug });
  const file = h("input", { type: "text", value: ex.file || "", spellcheck: "false", placeholder: "average.py" });
  const due = h("input", { type: "datetime-local", value: localValue(ex.due) });
  const instructions = h("textarea", { rows: "8" }, ex.instructions || "");
  const preview = h("div", { class: "ex-preview", hidden: true, "aria-label": "Preview of the instructions" });
  const tests = h("textarea", { rows: "8", spellcheck: "false", placeholder: "from average import average\n\ndef test_two():\n    assert average([4, 6]) == 5" }, ex.tests || "");
  const checks = [];
  const checksEl = h("div", { class: "check-forms" });
  const renumber = () => checks.forEach((c, n) => c.number(n + 1));
  const addCheck = (c) => {
    const fields = new CheckFields(c, checks.length + 1, () => {
      checks.splice(checks.indexOf(fields), 1);
      fields.el.remove();
      renumber();
    });
    checks.push(fields);
    checksEl.append(fields.el);
    return fields;
  };
  for (const c of ex.checks.filter((c) => c.declared !== false)) addCheck(c);
  const fromTests = ex.checks.filter((c) => c.declared === false);
  const starters = [];
  const startersEl = h("div", { class: "starter-forms" });
  const addStarter = (path, text) => {
    const fields = new StarterFields(path, text, () => {
      starters.splice(starters.indexOf(fields), 1);
      fields.el.remove();
    });
    starters.push(fields);
    startersEl.append(fields.el);
    return fields;
  };
  for (const [path, text] of Object.entries(ex.starter || {})) addStarter(path, text);
  const problems = h("div", { class: "form-problems", role: "alert" });

  const body = h("form", { class: "form exercise-form", onsubmit: (e) => e.preventDefault() },
    h("div", { class: "check-form-row" },
      field("Folder name (in the class's checks area)", slugInput),
      field("Title", title, "grow")),
    h("div", { class: "check-form-row" },
      field("The student's file", file),
      field("Due (optional)", due)),
    h("p", { class: "hint" }, "Students get the starter files in a folder of this name in their files; the checks read the student's file there."),
    field("Instructions (Markdown)", instructions),
    h("div", {}, h("button", { type: "button", class: "btn small", onclick: () => {
      preview.hidden = !preview.hidden;
      clear(preview, markdown(instructions.value));
    } }, "Preview the instructions"), preview),
    h("h3", {}, "Checks"),
    checksEl,
    fromTests.length ? h("p", { class: "hint" }, `From tests.py, as visible checks worth 1 point each (no check names them): `
      + `${fromTests.map((c) => c.test).join(", ")}. Add a function check naming one to change its points or visibility.`) : null,
    h("div", {}, h("button", { type: "button", class: "btn small", onclick: () => addCheck({}).inputs.id.focus() }, "Add a check")),
    field("tests.py (function checks: def test_...() with plain asserts, importing the student's module)", tests),
    h("h3", {}, "Starter files"),
    startersEl,
    h("div", {}, h("button", { type: "button", class: "btn small", onclick: () => addStarter("", "").path.focus() }, "Add a starter file")),
    problems);

  const show = (sentences) => clear(problems, sentences.length
    ? h("ul", {}, sentences.map((s) => h("li", { class: "field-error" }, s))) : null);

  return openDialog({
    title: slug ? `Exercise: ${ex.title || slug}` : "New exercise",
    wide: true,
    body,
    buttons: [
      { label: "Cancel", value: null },
      {
        label: "Save", kind: "primary", action: async (close) => {
          const name = slugInput.value.trim();
          if (!slug && !SLUG.test(name)) {
            show(["The folder name must be 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. average or week-2)."]);
            return slugInput.focus();
          }
          if (!slug && taken.includes(name)) {
            show([`There is already an exercise named ${name} in this class: choose another folder name.`]);
            return slugInput.focus();
          }
          const starter = {};
          for (const s of starters) {
            const [path, text] = s.value();
            if (path) starter[path] = text;
          }
          // An empty title or file is left out: the server then says it is missing, and how to write it.
          const form = { title: title.value.trim() || undefined, file: file.value.trim() || undefined, due: isoValue(due.value),
            instructions: instructions.value, tests: tests.value, starter, checks: checks.map((c) => c.value()) };
          if (ex.etag) form.etag = ex.etag;
          try {
            close(await request("PUT", exerciseUrl(classId, name), { json: form }));
          } catch (e) {
            show(e instanceof ApiError && Array.isArray(e.body.problems) ? e.body.problems : [e.message]);
            problems.scrollIntoView({ block: "nearest" });
          }
        },
      },
    ],
  });
}
