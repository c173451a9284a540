// A teacher's help with passwords (the Class panel): a new password for a
// student who forgot theirs, and new passwords with slips for the class
// (all its students, or those picked). The server refuses staff and other
// classes' students; the new passwords are shown once (passwords.js).
import { h, clear } from "./dom.js";
import { post } from "./api.js";
import { openDialog, confirmDialog, alertDialog } from "./dialog.js";
import { PasswordSheet } from "./passwords.js";
import { StudentPicker } from "./student-picker.js";

const named = (s) => `${s.display_name} (${s.username})`;

async function make(cls, students) {
  return post(`/api/classes/${cls.id}/passwords`, students ? { students } : {});
}

/** The new passwords, in a dialog that asks before it lets them go unprinted. */
function show(title, made) {
  const sheet = new PasswordSheet(made.rows, made.class.name, made.sign_in_at, { table: true });
  return openDialog({
    title, wide: true, className: "passwords-dialog", body: sheet.el,
    buttons: [{
      label: "Done", kind: "primary",
      action: async (close) => {
        if (sheet.handed || await confirmDialog("Close without printing or downloading?",
          "The new passwords are not shown again: you would have to make new ones.", { ok: "Close", danger: true })) close(null);
      },
    }],
  });
}

/** Reset the password of `student` ({username, display_name}) of the class `cls` ({id, name}). */
export async function resetStudentPassword(cls, student) {
  const ok = await confirmDialog(`Reset the password of ${student.display_name}?`,
    `${named(student)} gets a new password and is signed out everywhere. The old password stops working at once.`,
    { ok: "Reset password", danger: true });
  if (!ok) return;
  let made;
  try {
    made = await make(cls, [student.username]);
  } catch (e) {
    return alertDialog("Could not reset the password", e.message);
  }
  return show(`New password for ${student.display_name}`, made);
}

/** New passwords and slips for the class `cls`: everyone, or those chosen
 * of `students` (its active students). */
export async function classPasswordsDialog(cls, students) {
  const picker = new StudentPicker(students);
  const count = students.length;
  const everyone = h("input", { type: "radio", name: "passwords-who", value: "all", checked: true });
  const some = h("input", { type: "radio", name: "passwords-who", value: "some" });
  for (const r of [everyone, some]) r.addEventListener("change", () => picker.enable(some.checked));
  const problem = h("p", { class: "field-error", role: "alert" });
  let made = null;
  await openDialog({
    title: `New passwords and slips for ${cls.name}`,
    wide: true,
    body: h("div", { class: "form" },
      h("p", {}, "Each student chosen gets a new password, shown once here, to print on slips or download. "),
      h("p", { class: "warn-note" }, "Their old passwords stop working at once and they are signed out everywhere."),
      h("label", { class: "check" }, everyone, `All active students of ${cls.name} (${count})`),
      h("label", { class: "check" }, some, "Only these:"),
      picker.el, problem),
    buttons: [
      { label: "Cancel", value: null },
      {
        label: "Make new passwords", kind: "danger", id: "class-passwords-make",
        action: async (close) => {
          const chosen = some.checked ? picker.chosen() : null;
          if (chosen && !chosen.length) {
            problem.textContent = "Choose at least one student.";
            return;
          }
          try {
            made = await make(cls, chosen);
            close(true);
          } catch (e) {
            clear(problem, e.message);
          }
        },
      },
    ],
  });
  if (made) await show(`New passwords for ${cls.name}`, made);
}
