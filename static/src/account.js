// The user menu in the top bar: change password, other views, sign out.
import { h } from "./dom.js";
import { post, logout } from "./api.js";
import { openDialog } from "./dialog.js";
import { showMenu } from "./menu.js";
import { icon } from "./icons.js";

export function userMenu(button, user, here) {
  button.replaceChildren(icon("user"), h("span", {}, user.display_name));
  button.setAttribute("aria-label", `Account: ${user.display_name} (${user.username}, ${user.role})`);
  button.addEventListener("click", () => {
    const items = [{ label: `Signed in as ${user.username} (${user.role})`, disabled: true, action: () => {} }, "-"];
    if (user.role !== "student") {
      if (here !== "teacher") items.push({ label: "Teacher view", action: () => { location.href = "/teacher"; } });
      if (here !== "ide") items.push({ label: "My files (IDE)", action: () => { location.href = "/ide"; } });
    }
    if (user.role === "admin" && here !== "admin") items.push({ label: "Administration", action: () => { location.href = "/admin"; } });
    items.push({ label: "Change password…", action: passwordDialog });
    items.push("-", { label: "Sign out", action: logout });
    showMenu(button, items);
  });
}

function passwordDialog() {
  const old = h("input", { type: "password", autocomplete: "current-password", autofocus: true });
  const fresh = h("input", { type: "password", autocomplete: "new-password", minlength: "8" });
  const again = h("input", { type: "password", autocomplete: "new-password" });
  const problem = h("p", { class: "field-error", role: "alert" });
  return openDialog({
    title: "Change password",
    body: h("form", { class: "form", onsubmit: (e) => e.preventDefault() },
      h("label", {}, "Current password", old),
      h("label", {}, "New password", fresh),
      h("label", {}, "New password again", again),
      problem),
    buttons: [
      { label: "Cancel", value: null },
      {
        label: "Change password", kind: "primary",
        action: async (close) => {
          if (fresh.value !== again.value) {
            problem.textContent = "The two new passwords are not the same.";
            return;
          }
          try {
            await post("/api/password", { old_password: old.value, new_password: fresh.value });
            close(true);
          } catch (e) {
            problem.textContent = e.message;
          }
        },
      },
    ],
  });
}
