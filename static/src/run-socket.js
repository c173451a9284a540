// The run socket (/ws/run, see docs/run-protocol.md): kept open while
// the IDE is, reopened by itself with backoff when it closes (a network
// drop, or code 1012 when the server restarts). Not after the server closed
// it for good: the session ended (4401) or another tab took over (4002).
//
// Every message to the server is made by `ask` (its id, and a check against
// run-messages.json, the server's own table: server/runs/messages.py); every
// answer the server sends because of one names its id as `re`, which is how
// the parts of the page tell their answers apart.
export const SESSION_ENDED = 4401;
export const OTHER_TAB = 4002;
import { backoff, connection } from "./api.js";
import { runMessage } from "./run-messages.js";

export class RunSocket extends EventTarget {
  constructor() {
    super();
    this.ws = null;
    this.state = "connecting"; // connecting | open | waiting | parked (closed for good until asked)
    this.attempt = 0;
    this.timer = null;
    this.retryAt = 0;
    this.lastClose = null;
    this.sent = 0; // messages made: the next one's id (unique on each socket, as they are on all of them)
    connection.addEventListener("change", () => {
      // Requests see the server again: do not wait for the next backoff step.
      if (connection.online && this.state === "waiting") this.connectNow();
    });
  }

  connect() {
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/run`;
    this.setState("connecting");
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.ask("watch"); // news of the files this IDE shows (server/files/changes.py)
      this.setState("open");
      connection.back();
    };
    ws.onmessage = (e) => {
      let msg;
      try {
        msg = JSON.parse(e.data);
      } catch {
        return;
      }
      this.dispatchEvent(new CustomEvent("message", { detail: msg }));
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.lastClose = { code: e.code, reason: e.reason };
      this.dispatchEvent(new CustomEvent("closed", { detail: this.lastClose }));
      if (e.code === SESSION_ENDED || e.code === OTHER_TAB) {
        this.setState("parked");
        return;
      }
      if (e.code === 1006 && this.attempt > 1) connection.lost();
      const delay = e.code === 1012 ? 300 + Math.random() * 700 : backoff(this.attempt);
      this.attempt++;
      this.retryAt = Date.now() + delay;
      this.setState("waiting");
      this.timer = setTimeout(() => this.connect(), delay);
    };
  }

  connectNow() {
    clearTimeout(this.timer);
    if (!this.ws) this.connect();
  }

  setState(state) {
    this.state = state;
    this.dispatchEvent(new Event("state"));
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /** Send the message `type` with `fields`: its id (answers name it as `re`), or null when not connected. */
  ask(type, fields = {}) {
    if (!this.open) return null;
    this.sent += 1;
    const id = String(this.sent);
    this.ws.send(JSON.stringify(runMessage(type, fields, id)));
    return id;
  }
}
