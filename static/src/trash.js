// The trash of an area: what each delete removed (a file, or a folder with
// its files), newest first, each with Restore. Nothing is restored over a
// file that is there now; what cannot come back says why and stays listed.
import { h, clear, ago, formatBytes, toast } from "./dom.js";
import { get, post, areaUrl } from "./api.js";
import { openDialog } from "./dialog.js";
import { icon } from "./icons.js";

/** Opens the Trash view; calls onRestored() after anything came back. */
export async function trashDialog(area, title, onRestored) {
  const list = h("ul", { class: "trash-list", "aria-label": "Deleted files and folders" });
  const note = h("p", { class: "hint", role: "status" });

  async function restore(entry, path, button) {
    button.disabled = true;
    let report;
    try {
      report = await post(areaUrl("trash", area), path ? { id: entry.id, path } : { id: entry.id });
    } catch (e) {
      report = e.body && e.body.skipped ? e.body : { restored: [], skipped: [{ path: path || entry.path, message: e.message }] };
    }
    if (report.restored.length) {
      toast(`Restored ${report.restored.length === 1 ? report.restored[0] : `${report.restored.length} files`}`, "ok");
      onRestored();
    }
    note.textContent = report.skipped.map((s) => `${s.path}: ${s.message}`).join(" ");
    note.classList.toggle("field-error", report.skipped.length > 0);
    await load();
  }

  function row(entry) {
    const folder = entry.kind === "folder";
    const size = entry.files.reduce((n, f) => n + f.size, 0);
    const what = folder ? `${entry.files.length} file${entry.files.length === 1 ? "" : "s"}, ${formatBytes(size)}` : formatBytes(size);
    const item = h("li", { class: "trash-entry", dataset: { path: entry.path } },
      h("div", { class: "trash-head" },
        icon(folder ? "folder" : "file"),
        h("span", { class: "name" }, entry.path),
        h("span", { class: "meta" }, `deleted ${ago(entry.deleted)} · ${what}`),
        h("button", { class: "btn", type: "button", "aria-label": `Restore ${entry.path}`,
          onclick: (e) => restore(entry, null, e.currentTarget) }, "Restore")));
    if (folder && entry.files.length) {
      item.append(h("ul", { class: "trash-files" }, entry.files.map((f) =>
        h("li", { dataset: { path: f.path } },
          h("span", { class: "name" }, f.path.slice(entry.path.length + 1)),
          h("span", { class: "meta" }, formatBytes(f.size)),
          h("button", { class: "btn small", type: "button", "aria-label": `Restore ${f.path}`,
            onclick: (e) => restore(entry, f.path, e.currentTarget) }, "Restore")))));
    }
    return item;
  }

  async function load() {
    let entries;
    try {
      entries = (await get(areaUrl("trash", area))).entries;
    } catch (e) {
      clear(list, h("li", { class: "field-error" }, e.message));
      return;
    }
    clear(list, entries.length ? entries.map(row)
      : h("li", { class: "hint" }, "The trash is empty: deleted files and folders appear here."));
  }

  await load();
  await openDialog({
    title: `Trash of ${title}`,
    wide: true,
    className: "trash-dialog",
    body: h("div", {}, h("p", { class: "hint" },
      "Deleted files keep their last version here until the space is needed."), list, note),
  });
}
