// The JSON API: every request goes through here. Writes echo the _xsrf
// cookie in X-XSRFToken; errors become ApiError with the server's
// {"error", "message"}; a request that cannot reach the server becomes
// NetworkError and marks the connection offline until /healthz answers again.

export class ApiError extends Error {
  constructor(status, body, headers) {
    super((body && body.message) || `The server answered ${status}.`);
    this.status = status;
    this.code = (body && body.error) || "http_" + status;
    this.body = body || {};
    const retry = headers && headers.get("Retry-After");
    this.retryAfter = retry && /^\d+$/.test(retry) ? Number(retry) : null;
  }

  /** The server or a proxy in front of it is restarting or busy: try again. */
  get temporary() {
    return this.status === 502 || this.status === 503 || this.status === 504;
  }
}

export class NetworkError extends Error {
  constructor() {
    super("The server cannot be reached.");
    this.temporary = true;
  }
}

/** Online/offline state of the server, as seen by requests and the run socket. */
class Connection extends EventTarget {
  constructor() {
    super();
    this.online = true;
    this.attempt = 0;
    this.timer = null;
    this.nextTry = 0;
  }

  lost() {
    if (!this.online) return;
    this.online = false;
    this.attempt = 0;
    this.dispatchEvent(new Event("change"));
    this._probeLater();
  }

  back() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.online) return;
    this.online = true;
    this.dispatchEvent(new Event("change"));
  }

  /** Probe now (the "Retry now" button). */
  retryNow() {
    clearTimeout(this.timer);
    this._probe();
  }

  _probeLater() {
    const delay = backoff(this.attempt++);
    this.nextTry = Date.now() + delay;
    this.dispatchEvent(new Event("change"));
    this.timer = setTimeout(() => this._probe(), delay);
  }

  async _probe() {
    try {
      const r = await fetch("/healthz", { cache: "no-store" });
      if (r.ok) return this.back();
    } catch {
      // still down
    }
    this._probeLater();
  }
}

export const connection = new Connection();

/** 0.5 s, 1 s, 2 s, 4 s, 8 s, then every 10 s, each with some jitter so
 * sixty browsers do not all come back in the same millisecond. */
export function backoff(attempt) {
  const base = Math.min(10000, 500 * 2 ** attempt);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

function xsrfCookie() {
  const m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : "";
}

async function ensureXsrf() {
  if (!xsrfCookie()) await fetch("/api/me", { credentials: "same-origin" }).catch(() => {});
  return xsrfCookie();
}

/** The session ended (401 on a request that needed one): the page decides what to do. */
export const session = new EventTarget();

/**
 * request("PUT", "/api/files/home/a.py", {body: "text", headers: {"If-Match": ...}})
 * -> the parsed JSON answer; throws ApiError or NetworkError.
 */
export async function request(method, url, { json, body, headers = {}, raw = false, signal } = {}) {
  const init = { method, headers: { ...headers }, credentials: "same-origin", cache: "no-store", signal };
  if (method !== "GET" && method !== "HEAD") init.headers["X-XSRFToken"] = await ensureXsrf();
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.body = body;
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    connection.lost();
    throw new NetworkError();
  }
  if (response.status === 502 || response.status === 504) connection.lost();
  else connection.back();
  if (raw && response.ok) return response;
  let data = null;
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("application/json")) data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new ApiError(response.status, data, response.headers);
    if (response.status === 401 && !url.startsWith("/api/login")) {
      session.dispatchEvent(new CustomEvent("expired", { detail: error }));
    }
    throw error;
  }
  return data;
}

export const get = (url, opts) => request("GET", url, opts);
export const post = (url, json, opts = {}) => request("POST", url, { ...opts, json });

/** "/api/files/home/a%20b/c.py" for area "home" and path "a b/c.py". */
export function areaUrl(kind, area, path = "") {
  const encoded = path ? "/" + path.split("/").map(encodeURIComponent).join("/") : "";
  const areaPart = area.split("/").map(encodeURIComponent).join("/");
  return `/api/${kind}/${areaPart}${encoded}`;
}

/** The course folder of a class: `course` (the default class) or `class/<id>`. */
export const isCourse = (area) => area === "course" || area.startsWith("class/");

/** Files of these areas run (and can be debugged): one's own, and a course folder's (as a read-only copy). */
export const isExam = (area) => /^exam\/\d+$/.test(area);
export const runsHere = (area) => area === "home" || isCourse(area) || isExam(area);

export async function me() {
  try {
    return (await get("/api/me")).user;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return null;
    throw e;
  }
}

/** me(), waiting out a server that is down or restarting (the page stays
 * and says so instead of sending the user to the sign-in page). */
export async function meWhenReachable(onWaiting) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await me();
    } catch (e) {
      if (!e.temporary) throw e;
      onWaiting(attempt);
      await new Promise((resolve) => setTimeout(resolve, backoff(Math.min(attempt, 5))));
    }
  }
}

/** Where a user lands after signing in. */
export function homePage(user) {
  return { student: "/ide", teacher: "/teacher", admin: "/admin" }[user.role] || "/ide";
}

export async function logout() {
  try {
    await post("/api/logout");
  } finally {
    // The sign-in page then says that a school account stays signed in.
    sessionStorage.setItem("signedOut", "1");
    location.href = "/";
  }
}
