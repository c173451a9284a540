// What the page says about its link to the server: the banner while the
// server or the run socket is away (with a countdown and "Retry now"), the
// banner when another tab has taken the run socket ("Use it here"), and the
// dialog when the session has ended.
import { h, $, clear, toast, duration } from "./dom.js";
import { get, connection, session } from "./api.js";
import { openDialog } from "./dialog.js";
import { SESSION_ENDED, OTHER_TAB } from "./run-socket.js";

export class ConnectionBanner {
  /** When the server is back, unsaved files are saved again (saver.retryAll). */
  constructor(socket, saver) {
    this.el = $("#conn-banner");
    this.socket = socket;
    this.saver = saver;
    this.timer = null;
    this.wasDown = false;
    connection.addEventListener("change", () => this.update());
    socket.addEventListener("state", () => this.update());
  }

  update() {
    const { el, socket } = this;
    clearTimeout(this.timer);
    if (socket.state === "parked" && socket.lastClose.code === OTHER_TAB) {
      // Another tab took this IDE's place: no reconnecting on our own, which
      // would only push that tab out in turn.
      clear(el, h("strong", {}, "This IDE is open in other tabs."),
        h("span", {}, " Running programs works in one of them at a time."),
        h("button", { class: "btn small", type: "button", onclick: () => socket.connectNow() }, "Use it here"));
      el.hidden = false;
      this.wasDown = true;
      return;
    }
    const socketDown = socket.state !== "open";
    const down = !connection.online || (socketDown && socket.attempt > 0);
    if (!down) {
      el.hidden = true;
      if (this.wasDown) {
        this.wasDown = false;
        toast("Reconnected to the server.", "ok");
        this.saver.retryAll();
      }
      return;
    }
    this.wasDown = true;
    const restarting = socket.lastClose && socket.lastClose.code === 1012;
    const at = !connection.online ? connection.nextTry : socket.retryAt;
    const wait = Math.max(0, (at - Date.now()) / 1000);
    const unsaved = this.saver.unsaved().length;
    clear(el,
      h("strong", {}, restarting ? "The server is restarting." : "Connection to the server lost."),
      h("span", {}, wait > 0.5 ? ` Reconnecting in ${duration(wait)}…` : " Reconnecting…"),
      unsaved ? h("span", {}, " Your changes are kept in this browser and will be saved when it is back.") : null,
      h("button", { class: "btn small", type: "button", onclick: () => { connection.retryNow(); socket.connectNow(); } },
        "Retry now"));
    el.hidden = false;
    this.timer = setTimeout(() => this.update(), 1000); // the countdown
  }
}

/**
 * The session ended (signed out elsewhere, deactivated, expired): say so
 * once, keep the unsaved text in this browser, and send the user to sign in.
 */
export class SessionWatch {
  constructor(socket) {
    this.ended = false;
    session.addEventListener("expired", () => this.expired());
    socket.addEventListener("closed", (e) => {
      // The server ended the session: a request finds out and says so (401).
      if (e.detail.code === SESSION_ENDED) this.check();
      // Closed again and again while the server answers: maybe the session
      // ended (the socket is then refused with 401).
      else if (socket.attempt >= 2 && connection.online) this.check();
    });
  }

  check() {
    get("/api/me").catch(() => {}); // a 401 fires session "expired"
  }

  expired() {
    if (this.ended) return;
    this.ended = true;
    openDialog({
      title: "Your session has ended",
      body: h("p", {}, "Sign in again to go on. Your unsaved changes are kept in this browser and are saved after you sign in."),
      buttons: [{ label: "Sign in again", value: true, kind: "primary" }],
    }).then(() => {
      location.href = `/?next=${encodeURIComponent(location.pathname)}`;
    });
  }
}
