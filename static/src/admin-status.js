// The admin page's Server status: /api/status said in words and units
// ("3 programs running", "median 4.2 ms"), never as the API's keys.
import { h, clear, duration } from "./dom.js";

const number = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString());
const plural = (n, one, many = `${one}s`) => `${number(n)} ${n === 1 ? one : many}`;
const ms = (v) => (v === null || v === undefined ? "—" : `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`);
const yes = (v) => (v ? "yes" : "no");

// What each of the sandbox's defences means, and how its value reads.
const DEFENCES = {
  seccomp: ["System-call filter (seccomp)", (v) => (v ? "on" : "off")],
  cgroup: ["Resource limits (cgroup)", (v) => v || "none: limits are per process"],
  own_uid: ["Each student's programs run as a user of their own", yes],
  namespaces: ["Own namespaces (no network, own processes)", yes],
  user_namespaces: ["New user namespaces inside the sandbox", (v) => v],
  host_paths_hidden: ["The server's files are hidden from programs", yes],
};

/** The status page's content for a /api/status answer `s`. */
export function statusView(s) {
  const c = s.counts || {};
  const runs = s.runs || {};
  const latency = (s.requests || {}).latency_ms || {};
  const workers = s.worker_pids || [];
  const help = s.editing_help || {};
  return [
    h("div", { class: "cards" },
      card("Process mode", s.processes === 1 ? "One process" : `${s.processes} worker processes`,
        `process ids ${workers.join(", ") || "—"}; this page was answered by ${s.answered_by}`),
      card("Up for", duration(s.uptime_seconds || 0), "since the server started"),
      card("Online in the IDE", plural(c.online, "person", "people"), "with the IDE open right now"),
      card("Signed in", plural(c.signed_in, "person", "people"), `${plural(c.sessions, "session")} not yet ended or expired`),
      card("Accounts", number(c.accounts), `${number(c.deactivated)} of them deactivated; ${plural(c.classes, "class", "classes")}`),
      card("Programs running", number(runs.active_runs), `${plural(runs.queued_runs, "program")} waiting for a place`),
      card("Open IDE connections", number(runs.connected_ides), "run sockets, on every worker"),
      card("Editing help", help.on ? "On, walled in" : "Off",
        help.on ? `${plural(help.processes, "process", "processes")} per worker (${number(help.ready)} ready), `
          + `as ${help.user}; it sees no student's files but the one it answers` : help.why),
      card("Response time", `median ${ms(latency.p50)}`,
        `95% of requests within ${ms(latency.p95)}, 99% within ${ms(latency.p99)}; ${plural((s.requests || {}).count, "request")} since the start`)),
    table(`Sandbox: ${s.sandbox}`, Object.entries(s.defences || {}).map(([k, v]) =>
      DEFENCES[k] ? [DEFENCES[k][0], DEFENCES[k][1](v)] : [k, String(v)])),
    table("Versions", Object.entries(s.versions || {})),
    table("Settings in force (secrets masked)", Object.entries(s.settings || {}), "settings"),
  ];
}

function card(title, value, sub) {
  return h("div", { class: "card" }, h("div", { class: "card-title" }, title),
    h("div", { class: "card-value" }, value), sub ? h("div", { class: "card-sub" }, sub) : null);
}

function table(title, rows, kind = "") {
  return h("section", { class: "kv" }, h("h3", {}, title),
    h("table", { class: `kv-table ${kind}` }, h("tbody", {}, rows.map(([k, v]) =>
      h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, v === null || v === undefined || v === "" ? "—" : String(v)))))));
}

export function showStatus(el, s) {
  clear(el, statusView(s), h("p", { class: "hint" }, `Updated ${new Date().toLocaleTimeString()} · refreshes every 5 s`));
}
