// Which files were open, and which one was shown, so that a reload (or the
// next visit, in this browser) opens them again.
export class TabMemory {
  /** `name`: whose and which page ("ada.ide"); `workspace`: whose tabs. */
  constructor(name, workspace) {
    this.key = `pyc.tabs.${name}`;
    this.workspace = workspace;
    workspace.addEventListener("tabs", () => this.remember());
  }

  remember() {
    const { tabs } = this.workspace;
    try {
      localStorage.setItem(this.key, JSON.stringify({
        open: tabs.docs.map((d) => d.key), active: tabs.current ? tabs.current.key : null,
      }));
    } catch {
      // not remembered
    }
  }

  /** Open again what was open, and `more` (keys such as "home:a.py"); show
   * the one shown last time, or the first. Resolves to whether one is shown. */
  async restore(more) {
    let saved = { open: [], active: null };
    try {
      saved = JSON.parse(localStorage.getItem(this.key) || "null") || saved;
    } catch {
      // start empty
    }
    const { workspace } = this;
    for (const key of new Set([...saved.open, ...more])) {
      const i = key.indexOf(":");
      await workspace.open(key.slice(0, i), key.slice(i + 1), { activate: false, quiet: true });
    }
    const active = workspace.tabs.find(saved.active) || workspace.tabs.docs[0];
    if (!active) return false;
    await workspace.select(active);
    return true;
  }
}
