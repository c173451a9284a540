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
import SCHEMA from "./run-messages.json";

/** Why `value` does not fit `field` of the table, or "". */
function misfit(value, field) {
  if (value === undefined || value === null) return field.required || (value === null && !field.null) ? "is missing" : "";
  switch (field.json) {
    case "string":
      if (typeof value !== "string") return "is not text";
      if (field.max_length !== undefined && value.length > field.max_length) return "is too long";
      if (field.min_length !== undefined && value.length < field.min_length) return "is too short";
      if (field.pattern && !new RegExp(`^(?:${field.pattern})$`).test(value)) return "does not match its pattern";
      if (field.plain && value.includes("\0")) return "holds a NUL";
      return "";
    case "integer":
      return Number.isInteger(value) && value >= field.min && value <= field.max ? "" : "is out of bounds";
    case "array":
      if (!Array.isArray(value) || (field.max_items !== undefined && value.length > field.max_items)) return "is not a short list";
      return field.items && value.some((v) => misfit(v, field.items)) ? "has a bad item" : "";
    case "object":
      return value && typeof value === "object" && !Array.isArray(value)
        && (field.max_items === undefined || Object.keys(value).length <= field.max_items) ? "" : "is not a small object";
    default:
      return "has a type the table does not know";
  }
}

/** The message `type` with `fields` and `id`, as the protocol's table allows; throws (a bug of the page) if not. */
export function runMessage(type, fields, id) {
  const table = SCHEMA.messages[type];
  if (!table) throw new Error(`run socket: no message type ${type}`);
  const msg = { type, id, ...fields };
  const wrong = [["id", SCHEMA.id], ...Object.entries(table)].map(([name, field]) => [name, misfit(msg[name], field)])
    .concat(Object.keys(fields).filter((name) => !(name in table)).map((name) => [name, "is not one of its fields"]))
    .find(([, why]) => why);
  if (wrong) throw new Error(`run socket: the ${type} message's ${wrong[0]} ${wrong[1]}`);
  return msg;
}

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
