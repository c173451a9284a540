// Small DOM helpers: build elements without a framework.

/** h("button", {class: "btn", onclick: fn, "aria-label": "Run"}, "Run") */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "text") {
      el.textContent = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key in el && !key.includes("-") && typeof value !== "string") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** "3 min ago", "yesterday at 14:05", ... for a Date, an ISO string or epoch seconds. */
export function ago(when) {
  if (when === null || when === undefined) return "never";
  const date = typeof when === "number" ? new Date(when * 1000) : new Date(when);
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return date.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** "4 s", "2 min", "1 h 5 min": how long to wait, said plainly. */
export function duration(seconds) {
  seconds = Math.max(1, Math.ceil(seconds));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

/** A short message at the bottom of the screen, read out by screen readers. */
export function toast(message, kind = "info", ms = 4000) {
  let host = document.getElementById("toasts");
  if (!host) {
    host = h("div", { id: "toasts", class: "toasts", role: "status", "aria-live": "polite" });
    document.body.append(host);
  }
  const item = h("div", { class: `toast ${kind}` }, message);
  host.append(item);
  setTimeout(() => item.remove(), ms);
}

/** "due Friday 16:00", "due tomorrow 09:00", "due 3 Mar 2027, 16:00"; "was due …" once past. */
export function dueWords(due) {
  if (!due) return "no due date";
  const date = new Date(due);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  if (date <= new Date()) return `was due ${date.toLocaleDateString([], { dateStyle: "medium" })}, ${time}`;
  const dayOf = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((dayOf(date) - dayOf(new Date())) / 86400000);
  if (days === 0) return `due today ${time}`;
  if (days === 1) return `due tomorrow ${time}`;
  if (days < 7) return `due ${date.toLocaleDateString([], { weekday: "long" })} ${time}`;
  return `due ${date.toLocaleDateString([], { dateStyle: "medium" })}, ${time}`;
}
