// The admin page's Classes tab: make and rename classes, and put teachers
// and students in them (search, add one or all shown, take out).
import { h, clear, debounce, toast } from "./dom.js";
import { get, post } from "./api.js";
import { promptDialog, alertDialog } from "./dialog.js";

export class ClassesTab {
  constructor(el) {
    this.el = el;
    this.classes = [];
    this.chosen = null;
    this.table = h("table", { class: "users", id: "classes-table" });
    this.detail = h("div", { class: "class-detail" });
    clear(el,
      h("p", {}, "Teachers see, and push starter files to, the students of the classes they teach; each class has "
        + "its own course folder. Accounts in no class are in the default class."),
      h("div", { class: "toolbar" }, h("div", { class: "spacer" }),
        h("button", { class: "btn primary", type: "button", id: "create-class", onclick: () => this.create() }, "New class")),
      h("div", { class: "table-wrap" }, this.table), this.detail);
  }

  async load() {
    try {
      this.classes = (await get("/api/classes")).classes;
    } catch (e) {
      clear(this.table, h("caption", { class: "field-error" }, e.message));
      return;
    }
    clear(this.table,
      h("thead", {}, h("tr", {}, ["Class", "Teachers", "Active students", ""].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, this.classes.map((c) => h("tr", { dataset: { classId: String(c.id) }, class: c.id === this.chosen ? "chosen" : "" },
        h("td", {}, c.name, c.default ? h("span", { class: "hint" }, " (default: everyone in no other class)") : null),
        h("td", {}, c.teachers.join(", ") || "—"),
        h("td", {}, String(c.students)),
        h("td", { class: "actions" }, h("button", { class: "btn small", type: "button", "aria-label": `Members of ${c.name}`,
          onclick: () => this.choose(c.id) }, "Members"))))));
    if (this.chosen !== null) await this.showMembers();
  }

  async create() {
    const name = await promptDialog("New class", "Name", { ok: "Create", hint: "For example: 7B Python, Tuesday" });
    if (!name) return;
    try {
      const made = (await post("/api/classes", { name })).class;
      toast(`Class ${made.name} created.`);
      this.chosen = made.id;
      await this.load();
    } catch (e) {
      alertDialog("Could not create the class", e.message);
    }
  }

  async choose(id) {
    this.chosen = id;
    await this.load();
  }

  async showMembers() {
    const c = this.classes.find((x) => x.id === this.chosen);
    if (!c) return clear(this.detail);
    let members;
    try {
      members = (await get(`/api/classes/${c.id}/members`)).members;
    } catch (e) {
      return clear(this.detail, h("p", { class: "field-error" }, e.message));
    }
    const search = h("input", { type: "search", id: "member-search", placeholder: "Find people to add (name or username)",
      "aria-label": "Find people to add" });
    const found = h("div", { class: "member-found", "aria-live": "polite" });
    const inClass = new Set(members.filter((m) => m.assigned || !c.default).map((m) => m.username));
    search.addEventListener("input", debounce(() => this.find(c, search.value.trim(), inClass, found), 250));
    clear(this.detail,
      h("div", { class: "class-title" }, h("h3", {}, c.name),
        h("button", { class: "btn small", type: "button", onclick: () => this.rename(c) }, "Rename")),
      h("table", { class: "users", id: "members" },
        h("thead", {}, h("tr", {}, ["Username", "Name", "Role", ""].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, members.map((m) => h("tr", { dataset: { username: m.username }, class: m.active ? "" : "inactive" },
          h("td", {}, h("code", {}, m.username)), h("td", {}, m.display_name),
          h("td", {}, h("span", { class: `role ${m.role}` }, m.role)),
          h("td", { class: "actions" }, m.assigned
            ? h("button", { class: "btn small danger-outline", type: "button", "aria-label": `Take ${m.username} out of ${c.name}`,
              onclick: () => this.change(c, { remove: [m.username] }) }, "Take out")
            : h("span", { class: "hint" }, "in no class")))))),
      h("h4", {}, `Add teachers and students to ${c.name}`), search, found);
  }

  async find(c, q, inClass, el) {
    if (!q) return clear(el);
    let users;
    try {
      users = (await get(`/api/admin/users?${new URLSearchParams({ q })}`)).users.filter((u) => u.role !== "admin" && !inClass.has(u.username));
    } catch (e) {
      return clear(el, h("p", { class: "field-error" }, e.message));
    }
    clear(el,
      users.length ? h("button", { class: "btn small", type: "button", id: "add-all",
        onclick: () => this.change(c, { add: users.map((u) => u.username) }) }, `Add all ${users.length} shown`) : h("p", { class: "hint" }, "Nobody else matches."),
      h("ul", { class: "member-list" }, users.map((u) => h("li", {},
        h("button", { class: "btn small", type: "button", "aria-label": `Add ${u.username} to ${c.name}`,
          onclick: () => this.change(c, { add: [u.username] }) }, "Add"),
        ` ${u.display_name} (${u.username}, ${u.role})`))));
  }

  async change(c, body) {
    try {
      const r = await post(`/api/classes/${c.id}/members`, body);
      toast(r.added ? `${r.added} added to ${c.name}.` : `${r.removed} taken out of ${c.name}.`);
    } catch (e) {
      alertDialog("Could not change the class", e.message);
    }
    await this.load();
  }

  async rename(c) {
    const name = await promptDialog(`Rename ${c.name}`, "Name", { value: c.name, ok: "Rename" });
    if (!name || name === c.name) return;
    try {
      await post(`/api/classes/${c.id}`, { name });
    } catch (e) {
      alertDialog("Could not rename the class", e.message);
    }
    await this.load();
  }
}
