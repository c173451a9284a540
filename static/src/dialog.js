// Modal dialogs built on <dialog>: focus is kept inside, Escape cancels, and
// the title names the dialog for screen readers.
import { h } from "./dom.js";
import { icon } from "./icons.js";

let counter = 0;

/**
 * openDialog({title, body, buttons: [{label, value, kind}], wide, onOpen})
 * -> a promise of the value of the button pressed (null for Escape/close).
 * A button may have `action: async (close) => ...` to do work first.
 * `scrolls`: the body may scroll and holds nothing focusable (a long text).
 */
export function openDialog({ title, body, buttons = [{ label: "Close", value: null }], wide = false, onOpen, className = "",
  scrolls = false }) {
  const id = `dialog-title-${++counter}`;
  const previous = document.activeElement;
  return new Promise((resolve) => {
    const footer = h("div", { class: "dialog-buttons" });
    const dialog = h(
      "dialog",
      { class: `dialog ${wide ? "wide" : ""} ${className}`, "aria-labelledby": id },
      h("div", { class: "dialog-head" },
        h("h2", { id, text: title }),
        h("button", { class: "icon-btn", type: "button", "aria-label": "Close", title: "Close (Esc)", onclick: () => close(null) }, icon("close"))),
      // A body with nothing to focus that may scroll (`scrolls`) is itself a stop for Tab, so the
      // arrow keys scroll it (WCAG 2.1.1); it is named after the dialog.
      h("div", { class: "dialog-body", ...(scrolls && { tabindex: "0", role: "region", "aria-label": title }) }, body),
      footer,
    );
    let done = false;
    function close(value) {
      if (done) return;
      done = true;
      dialog.close();
      dialog.remove();
      if (previous && previous.focus) previous.focus();
      resolve(value);
    }
    for (const b of buttons) {
      const button = h("button", { type: b.submit ? "submit" : "button", class: `btn ${b.kind || ""}`, text: b.label });
      if (b.id) button.id = b.id;
      button.addEventListener("click", async (e) => {
        e.preventDefault();
        if (b.action) {
          button.disabled = true;
          try {
            await b.action(close, button);
          } finally {
            button.disabled = false;
          }
        } else {
          close(b.value === undefined ? b.label : b.value);
        }
      });
      footer.append(button);
    }
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      close(null);
    });
    document.body.append(dialog);
    dialog.showModal();
    const focus = dialog.querySelector("[autofocus]") || footer.querySelector(".primary") || footer.querySelector("button");
    if (focus) focus.focus();
    if (onOpen) onOpen(dialog, close);
  });
}

export function alertDialog(title, message) {
  return openDialog({ title, body: h("p", {}, message), buttons: [{ label: "OK", value: true, kind: "primary" }] });
}

export function confirmDialog(title, message, { ok = "OK", danger = false } = {}) {
  return openDialog({
    title,
    body: h("p", {}, message),
    buttons: [
      { label: "Cancel", value: false },
      { label: ok, value: true, kind: danger ? "danger" : "primary" },
    ],
  }).then(Boolean);
}

/** A one-field form; `check(value)` returns a problem sentence or "". */
export function promptDialog(title, label, { value = "", ok = "OK", check = () => "", hint = "", allowEmpty = false } = {}) {
  const input = h("input", { type: "text", value, autofocus: true, spellcheck: "false", autocomplete: "off" });
  const problem = h("p", { class: "field-error", role: "alert" });
  const body = h("form", { class: "form", onsubmit: (e) => { e.preventDefault(); submitBtn.click(); } },
    h("label", {}, label, input),
    hint ? h("p", { class: "hint" }, hint) : null,
    problem);
  let submitBtn;
  const result = openDialog({
    title,
    body,
    buttons: [
      { label: "Cancel", value: null },
      {
        label: ok, kind: "primary",
        action: async (close) => {
          const text = input.value.trim();
          const why = text || allowEmpty ? await check(text) : "Type a name.";
          if (why) {
            problem.textContent = why;
            input.focus();
            return;
          }
          close(text);
        },
      },
    ],
    onOpen: (dialog) => {
      submitBtn = dialog.querySelector(".dialog-buttons .primary");
      // Select the name without its extension, as file managers do.
      const dot = value.lastIndexOf(".");
      input.setSelectionRange(0, dot > 0 ? dot : value.length);
    },
  });
  return result;
}

/** A password or other secret shown once, with a copy button. */
export function secretDialog(title, intro, secret) {
  const code = h("code", { class: "secret", text: secret });
  const copy = h("button", {
    class: "btn", type: "button",
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(secret);
        copy.textContent = "Copied";
      } catch {
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
      }
    },
  }, "Copy");
  return openDialog({
    title,
    body: h("div", {}, h("p", {}, intro), h("div", { class: "secret-row" }, code, copy),
      h("p", { class: "hint" }, "It is shown only this once: write it down or hand it over now.")),
    buttons: [{ label: "Done", value: true, kind: "primary" }],
  });
}
