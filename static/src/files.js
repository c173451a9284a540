// The file tree of one area (My files, Course, a student's files): browse,
// open, create, rename, move (drag or menu), delete, upload, download.
import { h, clear, formatBytes, ago } from "./dom.js";
import { get, post, request, areaUrl, ApiError } from "./api.js";
import { openDialog, promptDialog, confirmDialog, alertDialog } from "./dialog.js";
import { showMenu } from "./menu.js";
import { toast } from "./dom.js";
import { icon } from "./icons.js";
import { trashDialog } from "./trash.js";

// What a program may leave that the IDE cannot open: a FIFO, a socket, a
// device, or a name that is not UTF-8 (shown escaped).
const OTHER = "Not a file the IDE can open: a pipe, socket or device a program made, or a name that is not UTF-8.";

const parentOf = (path) => (path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "");
const join = (folder, name) => (folder ? `${folder}/${name}` : name);
const baseName = (path) => path.split("/").pop();

function nameProblem(name) {
  if (name.includes("/")) return "A name cannot contain “/”.";
  if (name === "." || name === "..") return "Choose another name.";
  if (name.length > 255) return "That name is too long.";
  return "";
}

export class FileTree extends EventTarget {
  /**
   * area: "home" | "course" | "user/<name>"; writable: may change it.
   * events: "open" {area, path}, "moved" {area, from, to}, "deleted" {area, path}, "loaded"
   */
  constructor({ area, title, writable, extraItems = () => [] }) {
    super();
    this.area = area;
    this.title = title;
    this.writable = writable;
    this.extraItems = extraItems;
    this.expanded = new Set();
    this.entries = [];
    this.activePath = null;
    this.selected = null;
    this.collapsed = false;
    this.loads = 0; // loads asked for so far: only the newest one's answer is shown
    this.el = h("section", { class: "tree-section", "aria-label": title, dataset: { area } });
    this.upload = h("input", { type: "file", multiple: true, hidden: true, onchange: () => this.uploadChosen() });
    this.render();
  }

  async load() {
    // Loads overlap (a change's news reloads the tree while the tree's own
    // action does): an older answer arriving last would show a stale tree.
    const seq = ++this.loads;
    try {
      const data = await get(areaUrl("files", this.area) + "?tree=1");
      if (seq !== this.loads) return;
      this.entries = data.entries;
      this.truncated = data.truncated;
      this.error = null;
    } catch (e) {
      if (seq !== this.loads) return;
      this.error = e.message;
    }
    this.render();
    this.dispatchEvent(new Event("loaded"));
  }

  /** Mark the file shown in the editor. */
  setActive(path) {
    this.activePath = path;
    for (const row of this.el.querySelectorAll(".tree-row")) {
      row.classList.toggle("active", row.dataset.path === path);
    }
  }

  // -- rendering -------------------------------------------------------------

  render() {
    // Chromium ends a drag whose row left the page: a redraw waits for the drop.
    if (this.dragging) { this.redrawAfterDrag = true; return; }
    // A redraw (a refresh, a change made elsewhere) keeps the keyboard where it was.
    const had = this.el.contains(document.activeElement) ? document.activeElement : null;
    const focusedPath = had?.closest(".tree-row")?.dataset.path;
    const titleId = `tree-title-${this.area.replace(/\W/g, "-")}`;
    const header = h("div", { class: "tree-header" },
      h("button", {
        class: "tree-title", type: "button", id: titleId, "aria-expanded": String(!this.collapsed),
        onclick: () => { this.collapsed = !this.collapsed; this.render(); },
      }, h("span", { class: "chevron", "aria-hidden": "true" }, this.collapsed ? "▸" : "▾"), this.title),
      h("div", { class: "tree-tools" },
        this.writable ? [
          h("button", { class: "icon-btn", type: "button", title: "New file", "aria-label": `New file in ${this.title}`,
            onclick: () => this.newFile("") }, icon("newFile")),
          h("button", { class: "icon-btn", type: "button", title: "New folder", "aria-label": `New folder in ${this.title}`,
            onclick: () => this.newFolder("") }, icon("newFolder")),
          h("button", { class: "icon-btn", type: "button", title: "Upload files", "aria-label": `Upload files to ${this.title}`,
            onclick: () => this.chooseUpload("") }, icon("upload")),
        ] : null,
        h("button", { class: "icon-btn", type: "button", title: "Download all as a zip", "aria-label": `Download ${this.title} as a zip`,
          onclick: () => download(areaUrl("zip", this.area)) }, icon("download")),
        h("button", { class: "icon-btn", type: "button", title: "Refresh", "aria-label": `Refresh ${this.title}`,
          onclick: () => this.load() }, icon("refresh"))),
    );
    // A tree must hold tree items: an empty or failed listing is a plain list with its note.
    const hasRows = !this.error && this.entries.length > 0;
    const list = h("ul", { class: "tree", role: hasRows ? "tree" : null, "aria-labelledby": titleId });
    if (this.writable) this.dropTarget(list, "");
    if (this.error) list.append(h("li", { class: "tree-note error" }, this.error));
    else if (!this.entries.length) list.append(h("li", { class: "tree-note" }, this.writable ? "No files yet: use “New file” above." : "No files."));
    else this.renderLevel(list, "", 1);
    if (this.truncated) list.append(h("li", { class: "tree-note", role: "none" }, "Some files are not shown: too many, or in folders nested too deep."));
    const trash = this.writable && !this.collapsed ? h("button", {
      class: "tree-trash", type: "button", title: "Restore deleted files and folders", "aria-label": `Trash of ${this.title}`,
      onclick: () => trashDialog(this.area, this.title, () => this.load()) }, icon("trash"), "Trash") : null;
    clear(this.el, header, this.collapsed ? null : list, trash, this.upload);
    const rows = [...this.el.querySelectorAll(".tree-row")];
    const focusable = rows.find((r) => r.dataset.path === this.selected) || rows[0];
    if (focusable) focusable.tabIndex = 0;
    if (focusedPath !== undefined) this.focusRow(focusedPath);
    else if (had?.classList.contains("tree-title")) this.el.querySelector(".tree-title").focus();
  }

  renderLevel(parent, folder, level) {
    const children = this.entries.filter((e) => parentOf(e.path) === folder);
    children.sort((a, b) => (a.kind === b.kind ? a.path.localeCompare(b.path) : a.kind === "folder" ? -1 : 1));
    for (const entry of children) {
      const isFolder = entry.kind === "folder";
      const other = entry.kind === "other";
      const open = this.expanded.has(entry.path);
      const row = h("div", {
        class: `tree-row ${entry.path === this.activePath ? "active" : ""} ${other ? "other" : ""}`, role: "treeitem",
        tabindex: "-1", "aria-level": String(level), "aria-selected": String(entry.path === this.selected),
        "aria-expanded": isFolder ? String(open) : null, dataset: { path: entry.path, kind: entry.kind },
        title: isFolder ? entry.path : other ? `${entry.path} — ${OTHER}` : `${entry.path} — ${formatBytes(entry.size)}, changed ${ago(entry.modified)}`,
        style: `--level: ${level - 1}`,
        onclick: () => this.activate(entry),
        onkeydown: (e) => this.onKey(e, entry, row),
        oncontextmenu: (e) => { e.preventDefault(); this.menu(entry, row, { x: e.clientX, y: e.clientY }); },
      },
      h("span", { class: "twisty", "aria-hidden": "true" }, isFolder ? (open ? "▾" : "▸") : ""),
      icon(isFolder ? (open ? "folderOpen" : "folder") : /\.pyw?$/i.test(entry.path) ? "python" : "file"),
      h("span", { class: "name" }, baseName(entry.path)),
      h("button", { class: "row-menu", type: "button", tabindex: "-1", "aria-label": `Actions for ${baseName(entry.path)}`,
        onclick: (e) => { e.stopPropagation(); this.menu(entry, e.currentTarget); } }, icon("more")));
      if (this.writable && !other) {
        row.draggable = true;
        row.addEventListener("dragstart", (e) => {
          e.dataTransfer.setData("application/x-pyclassroom-path", JSON.stringify({ area: this.area, path: entry.path }));
          e.dataTransfer.effectAllowed = "move";
          this.dragging = true;
        });
        row.addEventListener("dragend", () => {
          this.dragging = false;
          if (this.redrawAfterDrag) { this.redrawAfterDrag = false; this.render(); }
        });
        if (isFolder) this.dropTarget(row, entry.path);
      }
      const li = h("li", { role: "none" }, row);
      parent.append(li);
      if (isFolder && open) {
        const group = h("ul", { role: "group" });
        li.append(group);
        this.renderLevel(group, entry.path, level + 1);
      }
    }
  }

  dropTarget(el, folder) {
    el.addEventListener("dragover", (e) => {
      if (!e.dataTransfer.types.includes("application/x-pyclassroom-path") && !e.dataTransfer.types.includes("Files")) return;
      e.preventDefault();
      e.stopPropagation();
      el.classList.add("drop");
    });
    el.addEventListener("dragleave", () => el.classList.remove("drop"));
    el.addEventListener("drop", (e) => {
      e.preventDefault();
      e.stopPropagation();
      el.classList.remove("drop");
      if (e.dataTransfer.files.length) {
        this.uploadFiles([...e.dataTransfer.files], folder);
        return;
      }
      const raw = e.dataTransfer.getData("application/x-pyclassroom-path");
      if (!raw) return;
      const { area, path } = JSON.parse(raw);
      if (area !== this.area || parentOf(path) === folder || path === folder) return;
      this.move(path, join(folder, baseName(path)));
    });
  }

  chooseUpload(folder) {
    this.uploadFolder = folder;
    this.upload.click();
  }

  activate(entry) {
    this.selected = entry.path;
    if (entry.kind === "other") {
      toast(`${entry.path}: ${OTHER}`, "warn", 6000);
    } else if (entry.kind === "folder") {
      if (this.expanded.has(entry.path)) this.expanded.delete(entry.path);
      else this.expanded.add(entry.path);
      this.render();
      this.focusRow(entry.path);
    } else {
      this.dispatchEvent(new CustomEvent("open", { detail: { area: this.area, path: entry.path } }));
    }
  }

  focusRow(path) {
    const row = [...this.el.querySelectorAll(".tree-row")].find((r) => r.dataset.path === path);
    if (!row) return;
    for (const r of this.el.querySelectorAll(".tree-row")) r.tabIndex = -1;
    row.tabIndex = 0;
    row.focus();
  }

  focus() {
    const row = this.el.querySelector('.tree-row[tabindex="0"]') || this.el.querySelector(".tree-title");
    row?.focus();
  }

  onKey(e, entry, row) {
    const rows = [...this.el.querySelectorAll(".tree-row")];
    const i = rows.indexOf(row);
    const go = (r) => { if (r) { this.selected = r.dataset.path; this.focusRow(r.dataset.path); } };
    switch (e.key) {
      case "ArrowDown": go(rows[i + 1]); break;
      case "ArrowUp": go(rows[i - 1]); break;
      case "Home": go(rows[0]); break;
      case "End": go(rows[rows.length - 1]); break;
      case "ArrowRight":
        if (entry.kind === "folder" && !this.expanded.has(entry.path)) this.activate(entry);
        else go(rows[i + 1]);
        break;
      case "ArrowLeft":
        if (entry.kind === "folder" && this.expanded.has(entry.path)) this.activate(entry);
        else go(rows.find((r) => r.dataset.path === parentOf(entry.path)));
        break;
      case "Enter": case " ": this.activate(entry); break;
      case "F2": if (this.writable) this.rename(entry); break;
      case "Delete": if (this.writable) this.remove(entry); break;
      case "ContextMenu": this.menu(entry, row); break;
      default:
        if (e.key === "F10" && e.shiftKey) this.menu(entry, row);
        else return;
    }
    e.preventDefault();
  }

  menu(entry, anchor, at) {
    this.selected = entry.path;
    const isFile = entry.kind === "file";
    const items = [];
    if (entry.kind === "other") {
      if (this.writable) items.push({ label: "Delete…", danger: true, action: () => this.remove(entry) });
      else items.push({ label: OTHER, action: () => {} });
      showMenu(anchor, items, at);
      return;
    }
    if (isFile) items.push({ label: "Open", action: () => this.activate(entry) });
    if (this.writable) {
      if (!isFile) {
        items.push({ label: "New file here…", action: () => this.newFile(entry.path) });
        items.push({ label: "New folder here…", action: () => this.newFolder(entry.path) });
        items.push({ label: "Upload files here…", action: () => this.chooseUpload(entry.path) });
      }
      items.push({ label: "Rename…", action: () => this.rename(entry) });
      items.push({ label: "Move to folder…", action: () => this.moveTo(entry) });
    }
    items.push({ label: isFile ? "Download" : "Download as zip",
      action: () => download(isFile ? areaUrl("files", this.area, entry.path) + "?download=1" : areaUrl("zip", this.area, entry.path)) });
    items.push(...this.extraItems(entry, this));
    if (this.writable) items.push("-", { label: "Delete…", danger: true, action: () => this.remove(entry) });
    showMenu(anchor, items, at);
  }

  // -- changes ---------------------------------------------------------------

  async newFile(folder) {
    const where = folder ? ` in ${folder}` : "";
    const path = await promptDialog(`New file${where}`, "File name", {
      value: "untitled.py", ok: "Create",
      hint: "Names without an extension get “.py”.",
      check: async (name) => {
        const problem = nameProblem(name);
        if (problem) return problem;
        const full = join(folder, name.includes(".") ? name : `${name}.py`);
        try {
          await request("PUT", areaUrl("files", this.area, full), { body: "", headers: { "Content-Type": "text/plain" } });
          return "";
        } catch (e) {
          return e instanceof ApiError && e.status === 409 ? "A file with this name already exists." : e.message;
        }
      },
    });
    if (!path) return;
    const full = join(folder, path.includes(".") ? path : `${path}.py`);
    if (folder) this.expanded.add(folder);
    this.selected = full;
    await this.load();
    this.dispatchEvent(new CustomEvent("open", { detail: { area: this.area, path: full } }));
  }

  async newFolder(folder) {
    const name = await promptDialog(folder ? `New folder in ${folder}` : "New folder", "Folder name", {
      value: "", ok: "Create",
      check: async (n) => {
        const problem = nameProblem(n);
        if (problem) return problem;
        try {
          await post(areaUrl("files", this.area, join(folder, n)), { action: "mkdir" });
          return "";
        } catch (e) {
          return e.message;
        }
      },
    });
    if (!name) return;
    if (folder) this.expanded.add(folder);
    this.expanded.add(join(folder, name));
    this.load();
  }

  async rename(entry) {
    const old = baseName(entry.path);
    await promptDialog(`Rename ${old}`, "New name", {
      value: old, ok: "Rename",
      check: async (name) => {
        if (name === old) return "";
        return nameProblem(name) || (await this.move(entry.path, join(parentOf(entry.path), name), true));
      },
    });
  }

  /** "Move to folder…": the folders it can go to, to click; or, when
   * there is none, why, and a way to make one. */
  async moveTo(entry) {
    const name = baseName(entry.path);
    const here = parentOf(entry.path);
    const inside = (p) => entry.kind === "folder" && (p === entry.path || p.startsWith(entry.path + "/"));
    const targets = ["", ...this.entries.filter((e) => e.kind === "folder").map((e) => e.path).sort()]
      .filter((p) => !inside(p));
    const selfNote = entry.kind === "folder" ? `A folder cannot go inside itself, so ${name} and the folders in it are not listed.` : "";
    if (!targets.some((p) => p !== here)) {
      const choice = await openDialog({
        title: `Move ${name}`,
        body: h("div", {},
          h("p", {}, `There is no other folder to move ${name} to yet. Make a new folder, and ${name} goes into it.`),
          selfNote ? h("p", { class: "hint" }, selfNote) : null),
        buttons: [{ label: "Cancel", value: null }, { label: "New folder…", value: "new", kind: "primary" }],
      });
      if (choice === "new") await this.moveToNewFolder(entry);
      return;
    }
    const problem = h("p", { class: "field-error", role: "alert" });
    let closeDialog = () => {};
    const pick = async (folder) => {
      const why = this.moveProblem(entry, folder) || (await this.move(entry.path, join(folder, name), true));
      if (why) problem.textContent = why;
      else closeDialog(true);
    };
    const list = h("ul", { class: "folder-choices", "aria-label": "Folders" }, targets.map((folder) => {
      const label = folder ? folder : `${this.title} (the top level)`;
      return h("li", {}, h("button", {
        type: "button", class: "folder-choice", disabled: folder === here, dataset: { folder },
        style: `--level: ${folder ? folder.split("/").length : 0}`, onclick: () => pick(folder),
      }, icon("folder"), h("span", {}, label), folder === here ? h("span", { class: "hint" }, " (it is here now)") : null));
    }));
    const choice = await openDialog({
      title: `Move ${name}`,
      body: h("div", {}, h("p", {}, `Click the folder to move ${name} to:`), list, problem,
        selfNote ? h("p", { class: "hint" }, selfNote) : null),
      buttons: [{ label: "New folder…", value: "new" }, { label: "Cancel", value: null }],
      onOpen: (dialog, close) => {
        closeDialog = close;
        dialog.querySelector(".folder-choice:not([disabled])")?.focus();
      },
    });
    if (choice === "new") await this.moveToNewFolder(entry);
  }

  /** Why `entry` cannot go into `folder`, from what the tree shows ("" when it can). */
  moveProblem(entry, folder) {
    const name = baseName(entry.path);
    const taken = this.entries.find((e) => e.path === join(folder, name));
    if (!taken) return "";
    const where = folder ? `The folder ${folder}` : `The top level of ${this.title}`;
    return `${where} already has a ${taken.kind === "folder" ? "folder" : "file"} called ${name}. `
      + "Rename one of them first, then move it.";
  }

  /** Make a folder (at the top level) and move `entry` into it. */
  async moveToNewFolder(entry) {
    const name = baseName(entry.path);
    await promptDialog(`Move ${name} to a new folder`, "Name of the new folder", {
      ok: "Make it and move",
      hint: `The folder is made at the top level of ${this.title}, and ${name} goes into it.`,
      check: async (folder) => {
        const problem = nameProblem(folder);
        if (problem) return problem;
        if (this.entries.some((e) => e.path === folder)) return `${folder} already exists: pick it from the list in “Move to folder…”, or choose another name.`;
        try {
          await post(areaUrl("files", this.area, folder), { action: "mkdir" });
        } catch (e) {
          return e.message;
        }
        return this.move(entry.path, join(folder, name), true);
      },
    });
  }

  /** Returns "" or the problem (with `quiet`, for a dialog to show). */
  async move(from, to, quiet = false) {
    if (from === to) return "";
    try {
      await post(areaUrl("files", this.area, from), { action: "move", to });
    } catch (e) {
      if (quiet) return e.message;
      alertDialog("Could not move", e.message);
      return e.message;
    }
    if (parentOf(to)) this.expanded.add(parentOf(to));
    this.selected = to;
    this.dispatchEvent(new CustomEvent("moved", { detail: { area: this.area, from, to } }));
    await this.load();
    toast(parentOf(from) === parentOf(to) ? `Renamed to ${baseName(to)}` : `Moved to ${to}`);
    return "";
  }

  async remove(entry) {
    const folder = entry.kind === "folder";
    const ok = await confirmDialog(`Delete ${baseName(entry.path)}?`,
      folder ? `The folder “${entry.path}” and everything in it will be deleted. Its files can be restored from the Trash.`
        : entry.kind === "other" ? `“${entry.path}” will be deleted. ${OTHER}`
          : `“${entry.path}” will be deleted. It can be restored from the Trash, and its earlier versions stay in its history.`,
      { ok: "Delete", danger: true });
    if (!ok) return;
    try {
      await request("DELETE", areaUrl("files", this.area, entry.path));
    } catch (e) {
      alertDialog("Could not delete", e.message);
      return;
    }
    this.dispatchEvent(new CustomEvent("deleted", { detail: { area: this.area, path: entry.path, folder } }));
    toast(`Deleted ${entry.path}`);
    this.load();
  }

  uploadChosen() {
    const files = [...this.upload.files];
    this.upload.value = "";
    if (files.length) this.uploadFiles(files, this.uploadFolder || "");
  }

  async uploadFiles(files, folder, overwrite = false) {
    const form = new FormData();
    for (const f of files) form.append("files", f, f.name);
    let report;
    try {
      report = await request("POST", areaUrl("upload", this.area, folder) + (overwrite ? "?overwrite=1" : ""), { body: form });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409 && e.body.refused)) {
        alertDialog("Upload failed", e.message);
        return;
      }
      report = e.body;
    }
    const exists = report.refused.filter((r) => r.error === "conflict");
    if (report.saved.length) toast(`Uploaded ${report.saved.length} file${report.saved.length > 1 ? "s" : ""}`);
    if (folder) this.expanded.add(folder);
    await this.load();
    const others = report.refused.filter((r) => r.error !== "conflict");
    if (others.length) alertDialog("Some files were not uploaded", others.map((r) => `${r.path}: ${r.message}`).join("\n"));
    if (exists.length && !overwrite) {
      const names = exists.map((r) => r.path);
      if (await confirmDialog("Replace existing files?", `Already there: ${names.join(", ")}. Replace them with the uploaded ones?`, { ok: "Replace" })) {
        const again = files.filter((f) => names.includes(join(folder, f.name)));
        await this.uploadFiles(again, folder, true);
        this.dispatchEvent(new CustomEvent("replaced", { detail: { area: this.area, paths: names } }));
      }
    }
  }
}

export function download(url) {
  const a = h("a", { href: url, download: "" });
  document.body.append(a);
  a.click();
  a.remove();
}
