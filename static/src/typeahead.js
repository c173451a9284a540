// Keys typed while the IDE is still opening (its file on its way from the
// server) go nowhere in a browser: nothing has the focus yet. A student who
// starts typing at once would lose them without a word. They are kept here
// instead, and typed into the file once it is shown (ide.js).

export class TypeAhead {
  constructor() {
    this.text = "";
    this.onKey = (e) => this.key(e);
    window.addEventListener("keydown", this.onKey, true);
  }

  key(e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    const at = document.activeElement;
    if (at && at !== document.body && at !== document.documentElement) return; // typed into something
    if (e.key.length === 1) this.text += e.key;
    else if (e.key === "Enter") this.text += "\n";
    else if (e.key === "Backspace") this.text = this.text.slice(0, -1);
    else return;
    e.preventDefault();
  }

  /** Stop keeping keys; what was typed. */
  take() {
    window.removeEventListener("keydown", this.onKey, true);
    const text = this.text;
    this.text = "";
    return text;
  }
}
