// The conflict view: both versions side by side (CodeMirror's merge view,
// loaded only when needed), the student's own side editable, and three ways
// out, none of which throws a text away unasked.
import { h } from "./dom.js";
import { openDialog } from "./dialog.js";

/**
 * Shows the conflict of `doc` (doc.conflict = {current, mine}); resolves to
 * {choice: "mine"|"theirs"|"both", text} or null if closed undecided.
 */
export async function conflictDialog(doc) {
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
    buttons: [
      { label: "Keep both (save mine as a copy)", value: "both", id: "conflict-both" },
      { label: "Take theirs", value: "theirs", id: "conflict-theirs" },
      { label: "Keep mine", value: "mine", kind: "primary", id: "conflict-mine" },
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
