// Passwords shown once (an imported class, a class's new passwords, a
// reset): a table, a CSV download and slips to print and hand out. They
// exist only in this page's memory (the server keeps none), so leaving the
// page before they were downloaded or printed asks first. Slips print the
// address the server gives (its PUBLIC_URL), never this page's own: an
// admin working on the server itself would print 127.0.0.1.
import { h, clear } from "./dom.js";

const HEADER = ["username", "display_name", "class", "password"];
let unsaved = 0; // sheets neither downloaded nor printed

window.addEventListener("beforeunload", (e) => {
  if (!unsaved) return;
  e.preventDefault();
  e.returnValue = "";
});

// What shows as nothing before a cell's first sign (server/csv_cells.py's UNSEEN and BLANK).
const UNSEEN = /^[\p{Cc}\p{Cf}\p{Cn}\p{Co}\p{Cs}\p{Mn}\p{Me}\p{Zl}\p{Zp}\p{Zs}\u115f\u1160\u3164\uffa0\u2800]*/u;

/** A CSV field, quoted; one a spreadsheet would run as a formula is kept as
 * text (a display name comes from an imported file): the same rule as the
 * server's CSV (server/csv_cells.py), = + - @ also after what shows as
 * nothing, and in their full-width and small forms (＝ is =). */
function field(value) {
  let text = value === null || value === undefined ? "" : String(value);
  const first = [...text.replace(UNSEEN, "")][0] || "";
  if (/^[\t\r]/.test(text) || /^[=+\-@]/.test(first.normalize("NFKC"))) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function passwordsCsv(rows) {
  return [HEADER, ...rows.map((r) => HEADER.map((k) => r[k]))].map((cells) => cells.map(field).join(",")).join("\r\n") + "\r\n";
}

/** What the page says about the address the slips print ({url, guessed, loopback} from the server). */
function addressNote(signInAt) {
  if (signInAt.loopback) {
    return h("p", { class: "field-error slip-address", role: "alert" }, `The slips say to sign in at ${signInAt.url}, `
      + "an address that works only on the server's own computer: students cannot use it. Ask whoever runs the "
      + "server to set PUBLIC_URL to the address students type (the server says how when it starts), then make the slips again.");
  }
  return h("p", { class: "hint slip-address" }, `The slips say to sign in at ${signInAt.url}`
    + (signInAt.guessed ? " (the server's guess; if students use another address, PUBLIC_URL sets it)." : "."));
}

export class PasswordSheet {
  /** rows: [{username, display_name, class, password}]; name: what they are (for the file name);
   * signInAt: {url, guessed, loopback}, where students sign in (the server's PUBLIC_URL);
   * table: also show the passwords in a table here; who: whose they are ("students", "teachers"),
   * in the buttons' names when a page shows two sheets. */
  constructor(rows, name, signInAt, { table = false, who = "" } = {}) {
    this.rows = rows;
    this.name = name;
    this.signInAt = signInAt;
    this.handed = false;
    unsaved++;
    this.state = h("span", { class: "hint", role: "status" });
    this.el = h("div", { class: "password-sheet" },
      h("p", { class: "warn-note" }, `${rows.length} new password${rows.length === 1 ? "" : "s"}: shown only now. `
        + "Download them or print the slips before you leave this page."),
      addressNote(signInAt),
      h("div", { class: "toolbar" },
        h("button", { class: "btn primary", type: "button", onclick: () => this.download() },
          who ? `Download ${who}' passwords (CSV)` : "Download passwords (CSV)"),
        h("button", { class: "btn", type: "button", onclick: () => this.print() }, who ? `Print ${who}' slips` : "Print slips"),
        this.state),
      table ? h("table", { class: "report passwords-table" },
        h("thead", {}, h("tr", {}, ["Name", "Username", "Class", "Password"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows.map((r) => h("tr", { dataset: { username: r.username } },
          h("td", {}, r.display_name), h("td", {}, h("code", {}, r.username)), h("td", {}, r.class || "—"),
          h("td", {}, h("code", {}, r.password)))))) : null);
  }

  done(how) {
    if (!this.handed) unsaved--;
    this.handed = true;
    this.state.textContent = how;
  }

  download() {
    const url = URL.createObjectURL(new Blob([passwordsCsv(this.rows)], { type: "text/csv;charset=utf-8" }));
    const day = new Date().toISOString().slice(0, 10);
    const a = h("a", { href: url, download: `passwords-${this.name.replace(/[^\w.-]+/g, "-")}-${day}.csv`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    this.done("Downloaded.");
  }

  /** One slip per account, two columns to an A4 page; only they print. */
  print() {
    let slips = document.getElementById("slips");
    if (!slips) {
      slips = h("div", { id: "slips", class: "slips" });
      document.body.append(slips);
    }
    clear(slips, this.rows.map((r) => h("div", { class: "slip" },
      h("div", { class: "slip-head" }, "PyClassroom", r.class ? ` · ${r.class}` : ""),
      h("div", { class: "slip-name" }, r.display_name),
      h("dl", {},
        h("dt", {}, "Sign in at"), h("dd", {}, this.signInAt.url),
        h("dt", {}, "Username"), h("dd", {}, h("code", {}, r.username)),
        h("dt", {}, "Password"), h("dd", {}, h("code", {}, r.password))),
      h("div", { class: "slip-foot" }, "Keep this to yourself. You can change the password once signed in."))));
    document.body.classList.add("printing-slips");
    window.addEventListener("afterprint", () => document.body.classList.remove("printing-slips"), { once: true });
    window.print();
    this.done("Sent to the printer.");
  }
}
