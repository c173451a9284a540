// The live class socket (/ws/class/<id>): the server sends the whole class
// ("snapshot") and then each student that changed ("update"), either with
// the queue of raised hands ("hands", oldest first) when it changed; this
// keeps the class's students by username and the hands, and says what
// changed. It may follow one student's console (`follow`: the server sends
// "console" messages). Reopened by
// itself with backoff, except when the server ended it for good: the
// session ended (4401), the teacher no longer teaches the class (4403), or
// the view was opened in too many other tabs (4002). In an exam's mode (the
// proctor view) each student's row also has their `exam` fields.
import { backoff, get } from "./api.js";

export const SESSION_ENDED = 4401;
export const NOT_YOUR_CLASS = 4403;
export const OTHER_TAB = 4002;

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export class ClassSocket extends EventTarget {
  /**
   * events: "students" (detail: {saved: usernames whose last save is new,
   * checked: those whose last check of an exercise is new}),
   * "hands" (this.hands changed), "state" (this.state: connecting | live | waiting | ended),
   * "console" (detail: the followed student's console), "refused" (detail: an `error` message).
   */
  constructor(classId, examId = null) {
    super();
    this.classId = classId;
    this.examId = examId;
    this.students = new Map(); // username -> the server's row
    this.hands = []; // the raised hands, oldest first
    this.skew = 0; // server clock minus this browser's, in ms
    this.state = "connecting";
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.following = null; // the username whose console is followed
  }

  /** Now, by the server's clock (ms). */
  now() {
    return Date.now() + this.skew;
  }

  connect() {
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/class/${this.classId}${this.examId ? `?exam=${this.examId}` : ""}`;
    const ws = new WebSocket(url);
    this.ws = ws;
    this.setState("connecting");
    ws.onopen = () => {
      this.attempt = 0;
      if (this.following) this.send({ type: "follow", username: this.following }); // a new socket follows nobody
    };
    ws.onmessage = (e) => this.receive(parsed(e.data));
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if ([SESSION_ENDED, NOT_YOUR_CLASS, OTHER_TAB].includes(e.code) || this.state === "ended") {
        if (e.code === SESSION_ENDED) get("/api/me").catch(() => {}); // its 401 says the session ended
        this.setState("ended", e.code);
        return;
      }
      // Refused again and again: perhaps the session ended (a request finds out).
      if (this.attempt >= 2) get("/api/me").catch(() => {});
      this.setState("waiting");
      this.timer = setTimeout(() => this.connect(), backoff(this.attempt++));
    };
  }

  close() {
    clearTimeout(this.timer);
    this.state = "ended";
    if (this.ws) this.ws.close();
    this.ws = null;
  }

  /** Follow the console of the student `username` (null: nobody), again after each reconnection. */
  follow(username) {
    if (username === this.following) return;
    this.following = username;
    this.send({ type: "follow", username });
  }

  send(msg) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  receive(msg) {
    if (msg?.type === "console" || msg?.type === "error") {
      this.dispatchEvent(new CustomEvent(msg.type === "console" ? "console" : "refused", { detail: msg }));
      return;
    }
    if (!Array.isArray(msg?.students)) return;
    if (msg.now) this.skew = Date.parse(msg.now) - Date.now();
    if (Array.isArray(msg.hands)) {
      this.hands = msg.hands;
      this.dispatchEvent(new Event("hands"));
    }
    const saved = [];
    const checked = [];
    const before = this.students;
    if (msg.type === "snapshot") this.students = new Map();
    for (const s of msg.students) {
      const old = before.get(s.username);
      if (old && old.last_save_at !== s.last_save_at) saved.push(s.username);
      if (old && old.last_check?.at !== s.last_check?.at) checked.push(s.username);
      this.students.set(s.username, s);
    }
    this.setState("live");
    this.dispatchEvent(new CustomEvent("students", { detail: { saved, checked } }));
  }

  setState(state, code = null) {
    if (this.state === state) return;
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: code }));
  }
}
