// The user's display settings, remembered in this browser (localStorage).
import { h } from "./dom.js";
import { openDialog } from "./dialog.js";

const KEY = "pyc.settings";
// Also the panes' sizes (layout.js) and whether long lines wrap (editor.js).
const DEFAULTS = { theme: "light", fontSize: 15, screenReader: false, wrap: false,
  filesWidth: 230, consoleWidth: 440, teacherFilesWidth: 290, teacherConsoleWidth: 480, filesHidden: false };
export const FONT_SIZES = [12, 13, 14, 15, 16, 18, 20, 22, 24];

class Settings extends EventTarget {
  constructor() {
    super();
    let saved = {};
    try {
      saved = JSON.parse(localStorage.getItem(KEY) || "{}") || {};
    } catch {
      saved = {};
    }
    if (!saved.theme && window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches) {
      saved.theme = "dark";
    }
    this.values = { ...DEFAULTS, ...saved };
    this.apply();
  }

  get(name) {
    return this.values[name];
  }

  set(name, value) {
    if (this.values[name] === value) return;
    this.values[name] = value;
    try {
      localStorage.setItem(KEY, JSON.stringify(this.values));
    } catch {
      // private mode: the setting lasts for this page only
    }
    this.apply();
    this.dispatchEvent(new CustomEvent("change", { detail: { name, value } }));
  }

  apply() {
    document.documentElement.dataset.theme = this.values.theme;
    document.documentElement.style.setProperty("--code-size", `${this.values.fontSize}px`);
  }

  bigger(step) {
    const i = FONT_SIZES.indexOf(this.values.fontSize);
    const next = FONT_SIZES[Math.max(0, Math.min(FONT_SIZES.length - 1, (i < 0 ? 3 : i) + step))];
    this.set("fontSize", next);
  }
}

export const settings = new Settings();

export function settingsDialog() {
  const theme = h("select", { id: "setting-theme" },
    h("option", { value: "light", text: "Light" }),
    h("option", { value: "dark", text: "Dark" }));
  theme.value = settings.get("theme");
  theme.addEventListener("change", () => settings.set("theme", theme.value));
  const size = h("select", { id: "setting-font-size" },
    FONT_SIZES.map((n) => h("option", { value: String(n), text: `${n} px` })));
  size.value = String(settings.get("fontSize"));
  size.addEventListener("change", () => settings.set("fontSize", Number(size.value)));
  const reader = h("input", { type: "checkbox", id: "setting-screen-reader", checked: settings.get("screenReader") });
  reader.addEventListener("change", () => settings.set("screenReader", reader.checked));
  const wrap = h("input", { type: "checkbox", id: "setting-wrap", checked: settings.get("wrap") });
  wrap.addEventListener("change", () => settings.set("wrap", wrap.checked));
  return openDialog({
    title: "Settings",
    body: h("div", { class: "form" },
      h("label", {}, "Theme", theme),
      h("label", {}, "Code font size", size),
      h("label", { class: "check" }, wrap, "Wrap long lines in the editor"),
      h("label", { class: "check" }, reader, "Screen reader mode for the console"),
      h("p", { class: "hint" }, "Settings are remembered in this browser.")),
    buttons: [{ label: "Done", value: true, kind: "primary" }],
  });
}
