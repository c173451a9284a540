// The history of the current file: earlier versions, a preview of each,
// and restore (the current text becomes a version too, so nothing is lost).
import { h, clear, ago, formatBytes, toast } from "./dom.js";
import { get, post, areaUrl } from "./api.js";
import { openDialog, alertDialog } from "./dialog.js";
import { viewer } from "./editor.js";

/** The History button: save first (the current text becomes a version
 * too), then the dialog; a restored version is shown in `doc`. */
export async function showHistory(doc, saver) {
  if (!doc.readOnly && !(await saver.flush(doc))) {
    toast("Save the file first (see its status).", "warn");
    return;
  }
  const restored = await historyDialog(doc);
  if (!restored) return;
  doc.showVersion(restored);
  saver.changed(doc);
  toast("The earlier version is back (the one it replaced is in the history too).", "ok");
}

/** Resolves to {etag, content} of the restored version, or null. */
async function historyDialog(doc) {
  let versions;
  try {
    versions = (await get(areaUrl("history", doc.area, doc.path))).versions;
  } catch (e) {
    await alertDialog("History", e.message);
    return null;
  }
  const list = h("ul", { class: "versions", role: "listbox", "aria-label": "Earlier versions" });
  const preview = h("div", { class: "version-preview", "aria-live": "polite" },
    h("p", { class: "hint" }, versions.length ? "Choose a version to see it." : "No earlier versions yet: each save keeps the one before."));
  let chosen = null;
  let chosenText = null;
  let view = null;
  let restoreButton;

  async function choose(v, item) {
    for (const li of list.children) li.setAttribute("aria-selected", String(li === item));
    chosen = v;
    chosenText = null;
    restoreButton.disabled = true;
    clear(preview, h("p", { class: "hint" }, "Loading…"));
    try {
      const data = await get(areaUrl("history", doc.area, doc.path) + `?version=${encodeURIComponent(v.version)}`);
      if (chosen !== v) return;
      if (view) view.destroy();
      clear(preview);
      if (data.content === null) {
        preview.append(h("p", { class: "hint" }, "This version is not text."));
        return;
      }
      chosenText = data.content;
      view = viewer(preview, data.content, doc.path);
      restoreButton.disabled = doc.readOnly;
    } catch (e) {
      clear(preview, h("p", { class: "field-error" }, e.message));
    }
  }

  versions.forEach((v, i) => {
    const item = h("li", {
      role: "option", tabindex: i === 0 ? "0" : "-1", "aria-selected": "false",
      onclick: () => choose(v, item),
      onkeydown: (e) => {
        const items = [...list.children];
        const k = items.indexOf(item);
        const to = e.key === "ArrowDown" ? items[k + 1] : e.key === "ArrowUp" ? items[k - 1] : null;
        if (to) { to.focus(); to.click(); e.preventDefault(); }
        if (e.key === "Enter") { item.click(); e.preventDefault(); }
      },
    },
    h("span", { class: "when" }, new Date(v.saved * 1000).toLocaleString([], { dateStyle: "medium", timeStyle: "medium" })),
    h("span", { class: "meta" }, `${ago(v.saved)} · ${formatBytes(v.size)}`));
    list.append(item);
  });

  const result = await openDialog({
    title: `History of ${doc.path}`,
    wide: true,
    className: "history-dialog",
    body: h("div", { class: "history" }, list, preview),
    buttons: [
      { label: "Close", value: null },
      {
        label: "Restore this version", kind: "primary", id: "restore-version",
        action: async (close) => {
          if (!chosen || chosenText === null) return;
          try {
            const meta = await post(areaUrl("files", doc.area, doc.path), { action: "restore", version: chosen.version });
            close({ etag: meta.etag, content: chosenText });
          } catch (e) {
            clear(preview, h("p", { class: "field-error" }, e.message));
          }
        },
      },
    ],
    onOpen: (dialog) => {
      restoreButton = dialog.querySelector("#restore-version");
      restoreButton.disabled = true;
      if (list.firstElementChild) list.firstElementChild.click();
    },
  });
  if (view) view.destroy();
  return result;
}
