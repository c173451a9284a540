// The sign-in page: clear messages for wrong credentials, throttling (the
// server's sentence, and how long to wait) and deactivated accounts; then
// on to the user's page.
import { $ } from "./dom.js";
import { post, me, homePage, ApiError, NetworkError } from "./api.js";
import { duration } from "./dom.js";

const form = $("#login");
const message = $("#message");
const button = $("#sign-in");
const wait = $("#wait");
let countdown = null;

function say(text, kind = "error") {
  message.textContent = text;
  message.dataset.kind = kind;
}

function destination(user) {
  const next = new URLSearchParams(location.search).get("next");
  const allowed = { student: ["/ide"], teacher: ["/ide", "/teacher"], admin: ["/ide", "/teacher", "/admin"] }[user.role] || [];
  return next && allowed.includes(next) ? next : homePage(user);
}

/** Throttled: the server's own sentence (what happened, what to do) stays;
 * the line under it counts down to when the button works again. */
function waitFor(seconds, serverMessage) {
  clearInterval(countdown);
  const until = Date.now() + seconds * 1000;
  button.disabled = true;
  say(serverMessage || "Too many failed sign-ins. Wait a little, then try again.");
  wait.hidden = false;
  const tick = () => {
    const left = (until - Date.now()) / 1000;
    if (left <= 0) {
      clearInterval(countdown);
      button.disabled = false;
      wait.textContent = "You can try again now.";
      return;
    }
    wait.textContent = `The Sign in button works again in ${duration(left)}.`;
  };
  tick();
  countdown = setInterval(tick, 1000);
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const username = $("#username").value.trim();
  const password = $("#password").value;
  if (!username || !password) {
    say(!username ? "Type your username." : "Type your password.");
    (!username ? $("#username") : $("#password")).focus();
    return;
  }
  button.disabled = true;
  clearInterval(countdown);
  wait.hidden = true;
  say("Signing in…", "info");
  try {
    const { user } = await post("/api/login", { username, password });
    say("Signed in.", "ok");
    location.assign(destination(user));
    return;
  } catch (err) {
    if (err instanceof ApiError && err.status === 429) {
      waitFor(err.retryAfter || 60, err.body.message);
      return;
    }
    if (err instanceof ApiError && err.status === 401) {
      say("Wrong username or password. Check both and try again.");
      $("#password").select();
    } else if (err instanceof ApiError && err.code === "account_deactivated") {
      say(err.message);
    } else if (err instanceof NetworkError) {
      say("The server cannot be reached. Check your connection and try again.");
    } else {
      say(err.message);
    }
    button.disabled = false;
  }
});

// Just signed out: where school accounts are offered, the page says that
// theirs stays signed in (the server wrote the sentence, hidden).
const signedOut = $("#signed-out");
if (sessionStorage.getItem("signedOut")) {
  sessionStorage.removeItem("signedOut");
  if (signedOut) signedOut.hidden = false;
}

// A school sign-in that was refused shows its sentence on this page, at
// the provider's return address: reloading it could only fail again.
if (location.pathname.startsWith("/signin/")) {
  history.replaceState(null, "", "/");
}

// Already signed in: straight on. Asked only when a session cookie came with
// the page (the server says so), so a visit without one logs no 401.
if (document.body.dataset.session) {
  me().then((user) => {
    if (user) location.replace(destination(user));
  }).catch(() => {});
}
