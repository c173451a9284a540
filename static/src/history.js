// The history of the current file: earlier versions, each said as when it
// was ("5 minutes ago", "yesterday 14:05"), what restoring it would change
// in the text now, and Restore. A restore is an ordinary edit, saved like
// any other (If-Match), so the text it replaces becomes a version too and
// the restore can itself be undone from the history.
import { EditorState, Prec } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { h, clear, formatBytes, toast } from "./dom.js";
import { get, areaUrl } from "./api.js";
import { openDialog, alertDialog } from "./dialog.js";
import { commonExtensions } from "./editor.js";

/** The History button: save first (so "now" is what is saved), then the
 * dialog; a chosen version becomes the editor's text and is saved. */
export async function showHistory(doc, saver) {
  if (!doc.readOnly && !(await saver.flush(doc))) {
    toast("Save the file first (see its status).", "warn");
    return;
  }
  const text = await historyDialog(doc);
  if (text === null) return;
  doc.replaceText(text); // Ctrl+Z in the editor brings the text before back too
  saver.changed(doc);
  if (await saver.flush(doc)) {
    toast("The earlier version is back. The text it replaced is in the history, so you can go back to it.", "ok");
  } else if (doc.status !== "conflict") {
    toast("The earlier version is in the editor but not saved yet (see the file's status).", "warn");
  }
}

/** When a version was kept, in words: "5 minutes ago", "yesterday 14:05",
 * "3 days ago". `t` in seconds since 1970, `now` in milliseconds. */
export function whenSaid(t, now = Date.now()) {
  const date = new Date(t * 1000);
  const seconds = Math.max(0, Math.round(now / 1000 - t));
  if (seconds < 10) return "a few seconds ago";
  if (seconds < 60) return `${seconds} seconds ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 2) return "a minute ago";
  if (minutes < 60) return `${minutes} minutes ago`;
  if (minutes < 90) return "an hour ago";
  if (minutes < 4 * 60) return `${Math.round(minutes / 60)} hours ago`;
  const days = calendarDays(date, new Date(now));
  const clock = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  if (days === 0) return `today ${clock}`;
  if (days === 1) return `yesterday ${clock}`;
  if (days < 7) return `${days} days ago`;
  const sameYear = date.getFullYear() === new Date(now).getFullYear();
  return date.toLocaleDateString([], { day: "numeric", month: "long", year: sameYear ? undefined : "numeric" });
}

/** How many midnights lie between two dates (local time). */
function calendarDays(from, to) {
  const midnight = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  return Math.round((midnight(to) - midnight(from)) / 86400000);
}

function exactTime(t) {
  return new Date(t * 1000).toLocaleString([], { weekday: "short", day: "numeric", month: "short",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
}

/** When a version was the file: from when its text was written until it was
 * replaced ("Fri 15 Jan, 07:58:05 to 08:00:10"), so the text of a moment is found. */
function spanSaid(v) {
  if (typeof v.since !== "number" || v.saved - v.since < 1) return exactTime(v.saved);
  const from = new Date(v.since * 1000);
  const to = new Date(v.saved * 1000);
  const sameDay = from.toDateString() === to.toDateString();
  const until = sameDay
    ? to.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })
    : exactTime(v.saved);
  return `${exactTime(v.since)} to ${until}`;
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** Lines a piece of text spans (a final line without its newline counts). */
function lineCount(text) {
  if (!text) return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/** What restoring the version shown in `view` would do to the text now. */
function changeSummary(view, merge, now) {
  const { chunks } = merge.getChunks(view.state);
  if (!chunks.length) return "This version is the same as the file now.";
  let added = 0;
  let removed = 0;
  for (const c of chunks) {
    added += lineCount(view.state.doc.sliceString(c.fromB, c.toB));
    removed += lineCount(now.slice(c.fromA, c.toA));
  }
  const parts = [];
  if (added) parts.push(`bring back ${plural(added, "line")} (green)`);
  if (removed) parts.push(`take out ${plural(removed, "line")} (red)`);
  return `Compared with the file now, restoring this version would ${parts.join(" and ") || "change spaces only"}.`;
}

/** Resolves to the text of the version to restore, or null. */
async function historyDialog(doc) {
  let versions;
  try {
    versions = (await get(areaUrl("history", doc.area, doc.path))).versions;
  } catch (e) {
    await alertDialog("History", e.message);
    return null;
  }
  const now = doc.text();
  const list = h("ul", { class: "versions", role: "listbox", "aria-label": "Earlier versions" });
  const preview = h("div", { class: "version-preview", "aria-live": "polite" },
    h("p", { class: "hint" }, versions.length
      ? "Choose a version to see it."
      : "No earlier versions yet: each save keeps the text it replaces."));
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
      const [data, merge] = await Promise.all([
        get(areaUrl("history", doc.area, doc.path) + `?version=${encodeURIComponent(v.version)}`),
        import("@codemirror/merge")]);
      if (chosen !== v) return;
      if (view) view.destroy();
      view = null;
      clear(preview);
      if (data.content === null) {
        preview.append(h("p", { class: "hint" }, "This version is not text, so it cannot be shown here."));
        return;
      }
      const summary = h("p", { class: "version-summary" });
      const host = h("div", { class: "version-text" });
      const title = v.deleted ? `The file as it was when it was deleted, ${whenSaid(v.saved)}`
        : `The file as it was ${whenSaid(v.saved)}`;
      preview.append(h("p", { class: "version-title" }, title), summary, host);
      view = new EditorView({ parent: host, state: EditorState.create({ doc: data.content, extensions: [
        commonExtensions({ path: doc.path, readOnly: true }),
        merge.unifiedMergeView({ original: now, mergeControls: false, gutter: true,
          collapseUnchanged: { margin: 3, minSize: 6 } }),
        Prec.highest(EditorView.contentAttributes.of({ "aria-label": "This version, compared with the file now" })),
      ] }) });
      summary.textContent = changeSummary(view, merge, now);
      chosenText = data.content;
      restoreButton.disabled = doc.readOnly || chosenText === now;
    } catch (e) {
      if (chosen === v) clear(preview, h("p", { class: "field-error" }, e.message));
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
    h("span", { class: "when" }, whenSaid(v.saved)),
    h("span", { class: "meta" }, [spanSaid(v), v.deleted && "deleted then", formatBytes(v.size)]
      .filter(Boolean).join(" · ")));
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
        action: (close) => { if (chosenText !== null) close(chosenText); },
      },
    ],
    onOpen: (dialog) => {
      restoreButton = dialog.querySelector("#restore-version");
      restoreButton.disabled = true;
      if (list.firstElementChild) list.firstElementChild.click();
    },
  });
  if (view) view.destroy();
  return result ?? null;
}
