// The admin page: accounts (list, search, create, import, reset password,
// deactivate), classes (admin-classes.js) and the server's status
// (admin-status.js). New passwords can be downloaded and printed (passwords.js).
import { h, $, $$, clear, ago, debounce, toast } from "./dom.js";
import { get, post, request, meWhenReachable, ApiError } from "./api.js";
import { openDialog, confirmDialog, secretDialog, alertDialog } from "./dialog.js";
import { userMenu } from "./account.js";
import { ClassesTab } from "./admin-classes.js";
import { showStatus } from "./admin-status.js";
import { PasswordSheet } from "./passwords.js";
import "./settings.js"; // applies the theme

const user = await meWhenReachable(() => toast("The server cannot be reached: retrying…", "warn", 3000));
if (!user) {
  location.replace("/?next=/admin");
  throw new Error("not signed in");
}
if (user.role !== "admin") {
  location.replace(user.role === "teacher" ? "/teacher" : "/ide");
  throw new Error("not an admin");
}
userMenu($("#user-btn"), user, "admin");

// -- tabs -----------------------------------------------------------------------

const classesTab = new ClassesTab($("#classes"));
// Coming back to Accounts lists the classes again (the Classes tab may have made or renamed some).
const loaders = { accounts: () => { classesListed = false; loadAccounts(); }, classes: () => classesTab.load(), import: () => {}, status: loadStatus };
function showTab(name) {
  for (const tab of $$(".admin-tabs [role=tab]")) {
    const on = tab.getAttribute("aria-controls") === name;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
    $(`#${tab.getAttribute("aria-controls")}`).hidden = !on;
  }
  clearInterval(statusTimer);
  if (name === "status") statusTimer = setInterval(() => { if (!document.hidden) loadStatus(); }, 5000);
  loaders[name]();
  history.replaceState(null, "", `#${name}`);
}
for (const tab of $$(".admin-tabs [role=tab]")) {
  tab.addEventListener("click", () => showTab(tab.getAttribute("aria-controls")));
  tab.addEventListener("keydown", (e) => {
    const tabs = $$(".admin-tabs [role=tab]");
    const i = tabs.indexOf(tab);
    const to = e.key === "ArrowRight" ? tabs[(i + 1) % tabs.length] : e.key === "ArrowLeft" ? tabs[(i + tabs.length - 1) % tabs.length] : null;
    if (to) { to.focus(); to.click(); e.preventDefault(); }
  });
}
let statusTimer = null;

// -- accounts -------------------------------------------------------------------

const search = h("input", { type: "search", id: "user-search", placeholder: "Search by name or username", "aria-label": "Search accounts" });
const roleFilter = h("select", { id: "role-filter", "aria-label": "Role" },
  h("option", { value: "", text: "All roles" }), ["student", "teacher", "admin"].map((r) => h("option", { value: r, text: r })));
// The classes, as the filter offers them (filled in when the accounts first load).
const classFilter = h("select", { id: "class-filter", "aria-label": "Class" }, h("option", { value: "", text: "All classes" }));
let classesListed = false;
const table = h("table", { class: "users", id: "users" });
const count = h("p", { class: "hint", role: "status", "aria-live": "polite" });
clear($("#accounts"),
  h("div", { class: "toolbar" }, search, roleFilter, classFilter, h("div", { class: "spacer" }),
    h("button", { class: "btn primary", type: "button", id: "create-user", onclick: createDialog }, "Create account")),
  count, h("div", { class: "table-wrap" }, table));
search.addEventListener("input", debounce(loadAccounts, 250));
roleFilter.addEventListener("change", loadAccounts);
classFilter.addEventListener("change", loadAccounts);

async function listClasses() {
  try {
    const { classes } = await get("/api/classes");
    const was = classFilter.value;
    clear(classFilter, h("option", { value: "", text: "All classes" }), classes.map((c) => h("option", { value: String(c.id), text: c.name })));
    classFilter.value = classes.some((c) => String(c.id) === was) ? was : "";
    classesListed = true;
  } catch {
    // The accounts still load; the filter is offered on the next load.
  }
}

let loads = 0; // (the latest load's answer is shown: an earlier one that answers later is not)

async function loadAccounts() {
  const mine = ++loads;
  if (!classesListed) await listClasses();
  const params = new URLSearchParams();
  if (search.value.trim()) params.set("q", search.value.trim());
  if (roleFilter.value) params.set("role", roleFilter.value);
  if (classFilter.value) params.set("class", classFilter.value);
  let data;
  try {
    data = await get(`/api/admin/users?${params}`);
  } catch (e) {
    if (mine === loads) clear(table, h("caption", { class: "field-error" }, e.message));
    return;
  }
  if (mine !== loads) return; // a filter changed while this one was on its way
  count.textContent = `${data.users.length} account${data.users.length === 1 ? "" : "s"}`
    + (data.users.length >= data.limit ? ` (the first ${data.limit}: search to narrow)` : "");
  clear(table,
    h("thead", {}, h("tr", {}, ["Username", "Name", "Role", "Classes", "Status", "School account", "Created", "Last save", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, data.users.map((u) => h("tr", { dataset: { username: u.username }, class: u.active ? "" : "inactive" },
      h("td", {}, h("code", {}, u.username)),
      h("td", { class: "user-name" }, u.display_name),
      h("td", {}, h("span", { class: `role ${u.role}` }, u.role)),
      h("td", { class: "user-classes" }, u.role === "admin" ? "all (admin)" : u.classes.join(", ") || "—"),
      h("td", {}, u.active ? "Active" : "Deactivated"),
      h("td", { class: "user-school" }, u.email || (u.school_accounts.length ? "" : "—"),
        u.school_accounts.map((issuer) => h("span", { class: "school-account" }, ` ${issuer} `,
          h("button", { class: "btn small ghost", type: "button", "aria-label": `Unbind ${u.username} from ${issuer}`,
            onclick: () => unbind(u, issuer) }, "Unbind")))),
      h("td", {}, new Date(u.created_at).toLocaleDateString()),
      h("td", {}, u.last_save_at ? ago(u.last_save_at) : "—"),
      h("td", { class: "actions" },
        h("button", { class: "btn small", type: "button", "aria-label": `Reset password of ${u.username}`, onclick: () => resetPassword(u) }, "Reset password"),
        u.username === user.username ? null : h("button", {
          class: `btn small ${u.active ? "danger-outline" : ""}`, type: "button",
          "aria-label": `${u.active ? "Deactivate" : "Activate"} ${u.username}`, onclick: () => setActive(u, !u.active),
        }, u.active ? "Deactivate" : "Activate"))))));
}

async function createDialog() {
  const username = h("input", { name: "username", autocomplete: "off", autocapitalize: "none", spellcheck: "false", required: true, autofocus: true });
  const name = h("input", { name: "display_name", autocomplete: "off", required: true });
  const role = h("select", { name: "role" }, ["student", "teacher", "admin"].map((r) => h("option", { value: r, text: r })));
  const problem = h("p", { class: "field-error", role: "alert" });
  await openDialog({
    title: "Create an account",
    body: h("form", { class: "form", onsubmit: (e) => e.preventDefault() },
      h("label", {}, "Username", username, h("span", { class: "hint" }, "Lowercase letters, digits, . _ -")),
      h("label", {}, "Full name", name),
      h("label", {}, "Role", role),
      h("p", { class: "hint" }, "A password is generated and shown once."),
      problem),
    buttons: [
      { label: "Cancel", value: null },
      {
        label: "Create", kind: "primary", id: "create-submit",
        action: async (close) => {
          try {
            const r = await post("/api/admin/users", { username: username.value.trim(), display_name: name.value.trim(), role: role.value });
            close(true);
            loadAccounts();
            await secretDialog(`Account ${r.user.username} created`, `The password of ${r.user.display_name} (${r.user.username}):`, r.password);
          } catch (e) {
            problem.textContent = e.message;
          }
        },
      },
    ],
  });
}

async function resetPassword(u) {
  if (!(await confirmDialog(`Reset the password of ${u.display_name} (${u.username})?`,
    `${u.display_name} gets a new password and is signed out everywhere. The old password stops working.`, { ok: "Reset password" }))) return;
  try {
    const r = await post(`/api/admin/users/${encodeURIComponent(u.username)}/password`);
    await secretDialog(`New password for ${u.username}`, `The new password of ${u.display_name}:`, r.password);
  } catch (e) {
    alertDialog("Could not reset the password", e.message);
  }
}

async function unbind(u, issuer) {
  const ok = await confirmDialog(`Unbind ${u.username} from ${issuer}?`,
    `${u.display_name}'s next sign-in with ${issuer} is matched as a first one is: by a verified school address, `
    + "or it makes a new account if that school account may. Do this when a student got a new school account.",
    { ok: "Unbind", danger: true });
  if (!ok) return;
  try {
    await request("DELETE", `/api/admin/users/${encodeURIComponent(u.username)}/school/${encodeURIComponent(issuer)}`);
    toast(`${u.username} is no longer bound to ${issuer}.`);
  } catch (e) {
    toast(e.message, "error");
  }
  loadAccounts();
}

async function setActive(u, active) {
  {
    const ok = await confirmDialog(`${active ? "Activate" : "Deactivate"} ${u.username}?`,
      active ? `${u.display_name} can sign in again.` : `${u.display_name} is signed out and cannot sign in until the account is activated again. Their files are kept.`,
      { ok: active ? "Activate" : "Deactivate", danger: !active });
    if (!ok) return;
  }
  try {
    await post(`/api/admin/users/${encodeURIComponent(u.username)}/active`, { active });
    toast(`${u.username} is ${active ? "active" : "deactivated"}.`);
    loadAccounts();
  } catch (e) {
    alertDialog("Could not change the account", e.message);
  }
}

// -- import -----------------------------------------------------------------------

const csvText = h("textarea", { id: "csv", rows: "10", spellcheck: "false",
  placeholder: "username,display_name,role,password,class\nada,Ada Lovelace,student,,7B\nalan,Alan Turing,student,,7B\nmrs-k,Mrs K,teacher,,7B" });
const csvFile = h("input", { type: "file", accept: ".csv,text/csv,text/plain", id: "csv-file" });
const importReport = h("div", { id: "import-report", class: "report-area", role: "status", "aria-live": "polite" });
csvFile.addEventListener("change", async () => {
  const file = csvFile.files[0];
  if (file) csvText.value = await file.text();
});
clear($("#import"),
  h("p", {}, "One account per line: ", h("code", {}, "username,display_name,role[,password[,class]]"),
    ". An empty password is generated; a class that does not exist yet is made. Every row is checked first: "
    + "if one is wrong, nothing is created. Usernames that exist already are skipped (and stay in their classes)."),
  h("div", { class: "form" },
    h("label", {}, "Class list (CSV)", csvText),
    h("label", {}, "…or choose a file", csvFile),
    h("div", {}, h("button", { class: "btn primary", type: "button", id: "import-submit", onclick: importCsv }, "Import"))),
  importReport);

async function importCsv() {
  const text = csvText.value.trim();
  if (!text) {
    clear(importReport, h("p", { class: "field-error" }, "Paste a class list or choose a file first."));
    return;
  }
  clear(importReport, h("p", { class: "hint" }, "Importing… (each new password is hashed: about a second for 10 accounts)"));
  try {
    const r = await post("/api/admin/users/import", { csv: text });
    const withPasswords = r.rows.filter((row) => row.password);
    const classes = [...new Set(withPasswords.map((row) => row.class).filter(Boolean))];
    const name = classes.join("-") || "import";
    // Students' slips are handed out in class: a teacher's password never prints among them.
    const students = withPasswords.filter((row) => row.role === "student");
    const staff = withPasswords.filter((row) => row.role !== "student");
    clear(importReport,
      h("p", { class: "ok" }, `${r.created} created, ${r.skipped} skipped.`),
      students.length ? h("section", { class: "sheet-students", "aria-label": "Students' passwords" },
        h("h3", {}, "Students"),
        new PasswordSheet(students, name, r.sign_in_at, { who: staff.length ? "students" : "" }).el) : null,
      staff.length ? h("section", { class: "sheet-staff", "aria-label": "Teachers' and admins' passwords" },
        h("h3", {}, "Teachers and admins"),
        h("p", { class: "hint" }, "Kept apart from the students' slips: give each their own in person."),
        new PasswordSheet(staff, `${name}-teachers`, r.sign_in_at, { who: students.length ? "teachers" : "" }).el) : null,
      h("table", { class: "report" },
        h("thead", {}, h("tr", {}, ["Line", "Name", "Username", "Class", "Outcome", "Password"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, r.rows.map((row) => h("tr", { dataset: { username: row.username } }, h("td", {}, row.line),
          h("td", {}, row.display_name), h("td", {}, h("code", {}, row.username)),
          h("td", {}, row.class || "—"), h("td", {}, row.outcome), h("td", {}, row.password ? h("code", {}, row.password) : "—"))))));
    csvText.value = "";
    loadAccounts();
  } catch (e) {
    if (e instanceof ApiError && e.body.rows) {
      clear(importReport,
        h("p", { class: "field-error" }, e.message),
        h("table", { class: "report" },
          h("thead", {}, h("tr", {}, ["Line", "Username", "Problem"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, e.body.rows.map((row) => h("tr", {}, h("td", {}, row.line), h("td", {}, row.username || "—"), h("td", {}, row.problem))))));
    } else {
      clear(importReport, h("p", { class: "field-error" }, e.message));
    }
  }
}

// -- status -------------------------------------------------------------------------

async function loadStatus() {
  try {
    showStatus($("#status"), await get("/api/status"));
  } catch (e) {
    clear($("#status"), h("p", { class: "field-error" }, e.message));
  }
}

// -- start -----------------------------------------------------------------------------

const first = location.hash.slice(1);
showTab(loaders[first] ? first : "accounts");
document.body.classList.remove("loading");
document.body.dataset.ready = "true";
