// A conflict: the file changed elsewhere since the student's text was
// edited from it. The view shows both versions side by side (CodeMirror's
// merge view, loaded only when needed), the student's own side editable, and
// three ways out, none of which throws a text away unasked.
import { h, toast } from "./dom.js";
import { openDialog } from "./dialog.js";

/** Settles the conflicts the saver finds, one at a time. */
export class Conflicts {
  constructor({ saver, workspace }) {
    this.saver = saver;
    this.workspace = workspace;
    this.open = false; // the dialog is open
    saver.addEventListener("conflict", (e) => this.resolve(e.detail));
  }

  /** Show the conflict of `doc` and save what the student chooses. */
  async resolve(doc) {
    if (this.open || !doc.conflict) return;
    this.open = true;
    try {
      if (this.workspace.current !== doc) await this.workspace.select(doc);
      const answer = await conflictDialog(doc);
      if (!answer || !doc.conflict) return;
      const theirs = doc.conflict.current.content;
      if (answer.choice === "both") {
        const copy = await this.workspace.saveCopy(doc.area, doc.path, answer.text, "-mine");
        if (!copy) return;
        toast(`Your version is saved as ${copy}.`);
        doc.replaceText(theirs);
      } else {
        doc.replaceText(answer.text);
      }
      const ok = await this.saver.resolve(doc);
      if (ok) toast(answer.choice === "theirs" ? "Now showing the saved version." : "Saved.");
    } finally {
      this.open = false;
    }
  }
}

/**
 * Shows the conflict of `doc` (doc.conflict = {current, mine}); resolves to
 * {choice: "mine"|"theirs"|"both", text} or null if closed undecided.
 */
async function conflictDialog(doc) {
  const [{ MergeView }, { commonExtensions }, { EditorView }] = await Promise.all([
    import("@codemirror/merge"), import("./editor.js"), import("@codemirror/view")]);
  const theirs = doc.conflict.current.content;
  const mine = doc.text();
  const host = h("div", { class: "merge-host" });
  let merge = null;
  const body = h("div", { class: "conflict" },
    h("p", {}, `“${doc.path}” was changed somewhere else (another tab, another computer or your teacher) ` +
      "after you opened it. Your text is safe. Choose which version to keep:"),
    h("div", { class: "merge-labels", "aria-hidden": "true" },
      h("span", {}, "Your version (you can edit it here)"), h("span", {}, "The saved version")),
    theirs === undefined
      ? h("p", { class: "hint" }, "The saved version is not text, or too large to show.")
      : host);
  const choice = await openDialog({
    title: "Conflict: this file changed somewhere else",
    wide: true,
    className: "conflict-dialog",
    body,
    // The default (Enter) keeps both: neither text is lost by a reflex.
    buttons: [
      { label: "Keep mine (replace the saved one)", value: "mine", id: "conflict-mine" },
      { label: "Take the saved one", value: "theirs", id: "conflict-theirs" },
      { label: "Keep both (save mine as a copy)", value: "both", kind: "primary", id: "conflict-both" },
    ],
    onOpen: () => {
      if (theirs === undefined) return;
      merge = new MergeView({
        parent: host,
        a: { doc: mine, extensions: [...commonExtensions({ path: doc.path }),
          EditorView.contentAttributes.of({ "aria-label": "Your version" })] },
        b: { doc: theirs, extensions: [...commonExtensions({ path: doc.path, readOnly: true }),
          EditorView.contentAttributes.of({ "aria-label": "The saved version" })] },
        revertControls: "b-to-a",
        highlightChanges: true,
        gutter: true,
      });
    },
  });
  const edited = merge ? merge.a.state.doc.toString() : mine;
  if (merge) merge.destroy();
  if (!choice) return null;
  return { choice, text: choice === "theirs" ? theirs : edited };
}
