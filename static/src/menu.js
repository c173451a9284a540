// A pop-up menu (role="menu"): arrow keys move, Enter picks, Escape closes.
import { h } from "./dom.js";

let open = null;

export function closeMenu() {
  if (open) open.close();
}

/** showMenu(anchorElement, [{label, action, danger, disabled}], {x, y}) */
export function showMenu(anchor, items, at = null) {
  closeMenu();
  const previous = document.activeElement;
  const menu = h("div", { class: "menu", role: "menu" });
  for (const item of items) {
    if (item === "-") {
      menu.append(h("div", { class: "menu-sep", role: "separator" }));
      continue;
    }
    menu.append(h("button", {
      type: "button", role: "menuitem", class: item.danger ? "danger" : "", disabled: !!item.disabled,
      tabindex: "-1", text: item.label,
      onclick: () => {
        close();
        item.action();
      },
    }));
  }
  document.body.append(menu);
  const rect = anchor.getBoundingClientRect();
  const x = at ? at.x : rect.left;
  const y = at ? at.y : rect.bottom + 2;
  const width = menu.offsetWidth;
  const height = menu.offsetHeight;
  menu.style.left = `${Math.min(x, innerWidth - width - 8)}px`;
  menu.style.top = `${y + height > innerHeight - 8 ? Math.max(8, y - height) : y}px`;
  const buttons = [...menu.querySelectorAll("button:not([disabled])")];
  buttons[0]?.focus();

  function onKey(e) {
    const i = buttons.indexOf(document.activeElement);
    if (e.key === "ArrowDown") buttons[(i + 1) % buttons.length].focus();
    else if (e.key === "ArrowUp") buttons[(i - 1 + buttons.length) % buttons.length].focus();
    else if (e.key === "Home") buttons[0].focus();
    else if (e.key === "End") buttons[buttons.length - 1].focus();
    else if (e.key === "Escape" || e.key === "Tab") {
      close();
      previous?.focus?.();
    } else return;
    e.preventDefault();
    e.stopPropagation();
  }
  function onPointer(e) {
    if (!menu.contains(e.target)) close();
  }
  function close() {
    menu.remove();
    document.removeEventListener("keydown", onKey, true);
    document.removeEventListener("pointerdown", onPointer, true);
    open = null;
  }
  document.addEventListener("keydown", onKey, true);
  document.addEventListener("pointerdown", onPointer, true);
  open = { close };
}
