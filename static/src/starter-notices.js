// A starter the teacher sent again while the student had changed their own
// copy: the push kept theirs ("starter" on the run socket, and GET /api/talk
// for an IDE opened later), and this notice says so, with the difference
// between theirs and the new version, and a way to take the new one as a
// new file beside theirs (server/teaching/starters.py). The student's file
// is never changed from here.
import { EditorState, Prec } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { h, toast } from "./dom.js";
import { get, post, areaUrl } from "./api.js";
import { openDialog } from "./dialog.js";
import { commonExtensions } from "./editor.js";
import { icon } from "./icons.js";

export class StarterNotices {
  /** el: where notices go (the talk notices' live region); open(area, path): show a file in the editor;
   * backToEditor(): give the focus back to the code; several: the student is in more than one class. */
  constructor({ el, open, backToEditor, several }) {
    Object.assign(this, { el, open, backToEditor, several });
    this.shown = new Map(); // "class:path" -> its notice
  }

  show(s) {
    const key = `${s.class}:${s.path}`;
    const notice = h("div", { class: "talk-notice starter-notice", dataset: { path: s.path } },
      h("span", { class: "talk-icon" }, icon("announce")),
      h("div", { class: "talk-body" },
        h("p", { class: "talk-from" }, h("strong", {}, `Your teacher sent a new version of ${s.path}`),
          this.several ? h("span", { class: "talk-when" }, ` · ${s.class_name}`) : null),
        h("p", { class: "talk-text" }, "You had changed yours, so yours was kept as it is. "
          + "See what is different, or take the new version as a new file beside yours."),
        h("div", { class: "talk-actions" },
          h("button", { class: "btn small", type: "button", onclick: () => this.compare(s) }, "Show the difference"),
          h("button", { class: "btn small primary", type: "button", onclick: () => this.take(s) }, "Take it as a new file"),
          h("button", { class: "btn small ghost", type: "button", "aria-label": `Not now: keep only my ${s.path}`,
            onclick: () => this.aside(s) }, "Not now"))));
    this.shown.get(key)?.replaceWith(notice) ?? this.el.append(notice);
    this.shown.set(key, notice);
  }

  done(s) {
    const key = `${s.class}:${s.path}`;
    const notice = this.shown.get(key);
    const hadFocus = notice?.contains(document.activeElement);
    notice?.remove();
    this.shown.delete(key);
    if (hadFocus) this.backToEditor();
  }

  async take(s) {
    try {
      const saved = await post(`/api/classes/${s.class}/starters/take`, { path: s.path });
      this.done(s);
      toast(`The new version is in your files as ${saved.path}; yours is as it was.`, "ok", 8000);
      await this.open("home", saved.path);
    } catch (e) {
      toast(e.message, "error", 8000);
    }
  }

  async aside(s) {
    try {
      await post(`/api/classes/${s.class}/starters/aside`, { path: s.path });
    } catch (e) {
      if (e.code !== "no_such_starter") {
        toast(e.message, "error", 8000);
        return;
      }
    }
    this.done(s);
  }

  /** Theirs beside the new version: lines only in the new one are added, lines only in theirs removed. */
  async compare(s) {
    let theirs, starter, merge;
    try {
      [starter, merge] = await Promise.all([get(areaUrl("files", s.area, s.path)), import("@codemirror/merge")]);
      theirs = await get(areaUrl("files", "home", s.path)).catch((e) => {
        if (e.code === "not_found") return { content: "" };
        throw e;
      });
    } catch (e) {
      toast(e.message, "error", 8000);
      return;
    }
    if (starter.content === null || theirs.content === null) {
      toast("This file is not text, so the difference cannot be shown here.", "warn");
      return;
    }
    const host = h("div", { class: "version-text starter-diff" });
    const view = new EditorView({ parent: host, state: EditorState.create({ doc: starter.content, extensions: [
      commonExtensions({ path: s.path, readOnly: true }),
      merge.unifiedMergeView({ original: theirs.content, mergeControls: false, gutter: true }),
      Prec.highest(EditorView.contentAttributes.of({ "aria-label": `The new version of ${s.path}, compared with yours` })),
    ] }) });
    const choice = await openDialog({
      title: `${s.path}: yours and the new version`,
      wide: true,
      body: h("div", {},
        h("p", { class: "version-summary" }, "Lines marked in red are only in yours; lines in green only in the "
          + "new version. Yours stays as it is whatever you choose."), host),
      buttons: [{ label: "Take it as a new file", value: "take", kind: "primary" }, { label: "Close", value: null }],
    });
    view.destroy();
    if (choice === "take") await this.take(s);
  }
}
