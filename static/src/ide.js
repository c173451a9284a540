// The IDE page (/ide for students, /teacher with the class tools): wires
// the file trees, tabs, editor, autosave, console and run socket together.
import { h, $, clear, toast, duration } from "./dom.js";
import { get, request, areaUrl, ApiError, connection, session, meWhenReachable } from "./api.js";
import { Doc, Saver, STATUS_TEXT } from "./autosave.js";
import { Editor } from "./editor.js";
import { Tabs } from "./tabs.js";
import { FileTree } from "./files.js";
import { Console } from "./console.js";
import { RunSocket, SESSION_ENDED, OTHER_TAB } from "./runner.js";
import { settings, settingsDialog } from "./settings.js";
import { helpDialog } from "./help.js";
import { historyDialog } from "./history.js";
import { conflictDialog } from "./conflict.js";
import { openDialog, alertDialog } from "./dialog.js";
import { userMenu } from "./account.js";
import { icon } from "./icons.js";

const user = await meWhenReachable(() => toast("The server cannot be reached: retrying…", "warn", 3000));
if (!user) {
  location.replace(`/?next=${encodeURIComponent(location.pathname)}`);
  throw new Error("not signed in");
}
const staff = user.role === "teacher" || user.role === "admin";
const teacherView = document.body.dataset.view === "teacher" && staff;
if (document.body.dataset.view === "teacher" && !staff) location.replace("/ide");

// -- pieces ---------------------------------------------------------------

const tabs = new Tabs($("#tabs"));
const saver = new Saver(user.username, { onConflict: (doc) => resolveConflict(doc) });
const editor = new Editor($("#editor"), {
  onChange: () => { if (tabs.current) saver.changed(tabs.current); },
});
const socket = new RunSocket();
const output = new Console({
  terminalEl: $("#terminal"), plotsEl: $("#plots"), stateEl: $("#run-state"),
  send: (msg) => socket.send(msg),
  passKeys: (e) => isShortcut(e),
});

const trees = {
  home: new FileTree({ area: "home", title: "My files", writable: true }),
  course: new FileTree({
    area: "course", title: "Course", writable: staff,
    extraItems: (entry) => [
      staff ? { label: "Send to students…", action: () => import("./teacher.js").then((m) => m.pushDialog(entry.path)) } : null,
      entry.kind === "file" ? { label: "Copy to my files", action: () => copyToHome("course", entry.path) } : null,
    ].filter(Boolean),
  }),
};
clear($("#files-panel"), trees.home.el, trees.course.el);
for (const tree of Object.values(trees)) wireTree(tree);

function wireTree(tree) {
  tree.addEventListener("open", (e) => openFile(e.detail.area, e.detail.path));
  tree.addEventListener("moved", (e) => {
    const { area, from, to } = e.detail;
    for (const doc of tabs.docs) {
      if (doc.area !== area) continue;
      if (doc.path === from) saver.rename(doc, to);
      else if (doc.path.startsWith(from + "/")) saver.rename(doc, to + doc.path.slice(from.length));
    }
    tabs.render();
    showDoc(tabs.current);
    rememberTabs();
  });
  tree.addEventListener("deleted", (e) => {
    const { area, path } = e.detail;
    for (const doc of [...tabs.docs]) {
      if (doc.area === area && (doc.path === path || doc.path.startsWith(path + "/"))) {
        saver.forget(doc);
        closeDoc(doc, { force: true });
      }
    }
  });
  tree.addEventListener("replaced", (e) => {
    for (const p of e.detail.paths) {
      const doc = tabs.find(`${e.detail.area}:${p}`);
      if (doc) refreshDoc(doc, true);
    }
  });
}

// -- opening and showing files -----------------------------------------------

function readOnlyArea(area) {
  return !(area === "home" || (area === "course" && staff));
}

async function openFile(area, path, { activate = true, quiet = false } = {}) {
  const key = `${area}:${path}`;
  let doc = tabs.find(key);
  if (!doc) {
    let data;
    try {
      data = await get(areaUrl("files", area, path));
    } catch (e) {
      if (!quiet) alertDialog(`Cannot open ${path}`, e.message);
      return null;
    }
    if (data.content === null || data.content === undefined) {
      if (!quiet) alertDialog(`Cannot show ${path}`, "This file is not text, or too large to edit here. Use Download from its menu.");
      return null;
    }
    doc = tabs.find(key); // opened meanwhile
    if (!doc) {
      doc = new Doc({ area, path, etag: data.etag, text: data.content, readOnly: readOnlyArea(area) });
      doc.state = editor.createState(data.content, path, doc.readOnly);
      tabs.add(doc);
      saver.add(doc);
      recoverKept(doc, data);
    }
  }
  if (activate) await selectDoc(doc);
  rememberTabs();
  return doc;
}

/** Unsaved text kept in this browser from an earlier visit: put it back. */
function recoverKept(doc, data) {
  const kept = saver.kept(doc.key);
  if (!kept || doc.readOnly) return;
  if (kept.text === data.content) {
    saver.forget(doc);
    return;
  }
  doc.state = doc.state.update({ changes: { from: 0, to: doc.state.doc.length, insert: kept.text } }).state;
  if (kept.etag === data.etag) {
    toast(`Recovered your unsaved changes to ${doc.path}; saving them now.`);
    saver.changed(doc);
    saver.save(doc);
  } else {
    // Edited from an older version that has changed since: the student chooses.
    doc.conflict = { current: { etag: data.etag, content: data.content }, mine: kept.text };
    saver.setStatus(doc, "conflict", "This file was changed somewhere else.");
    setTimeout(() => resolveConflict(doc), 0);
  }
}

async function selectDoc(doc) {
  const previous = tabs.current;
  if (previous && previous !== doc) saver.flush(previous); // saves on tab switch
  tabs.activate(doc);
  showDoc(doc);
  rememberTabs();
}

function showDoc(doc) {
  const has = !!doc;
  $("#empty").hidden = has;
  $("#editor").hidden = !has;
  $("#history-btn").disabled = !has;
  for (const tree of allTrees()) tree.setActive(doc && doc.area === tree.area ? doc.path : null);
  if (has) {
    editor.show(doc);
    banner(doc);
  } else {
    $("#doc-banner").hidden = true;
  }
  updateStatus();
  updateRunButtons();
  document.title = `${doc ? doc.name + " — " : ""}PyClassroom`;
}

function banner(doc) {
  const el = $("#doc-banner");
  if (!doc.readOnly) {
    el.hidden = true;
    return;
  }
  const whose = doc.area === "course" ? "the course folder" : `${doc.area.slice(5)}'s files`;
  clear(el, icon("lock"), h("span", {}, `Read-only: this file is in ${whose}.`),
    doc.area === "course" && !staff ? h("button", { class: "btn small", type: "button",
      onclick: () => copyToHome(doc.area, doc.path) }, "Copy to my files") : null,
    h("button", { class: "btn small ghost", type: "button", onclick: () => refreshDoc(doc, true) }, "Reload"));
  el.hidden = false;
}

async function closeDoc(doc, { force = false } = {}) {
  if (!force && !doc.readOnly && (doc.dirty || doc.status !== "saved")) {
    const saved = await saver.flush(doc);
    if (!saved) {
      const choice = await openDialog({
        title: `${doc.name} is not saved`,
        body: h("p", {}, `${STATUS_TEXT[doc.status]}${doc.message ? ": " + doc.message : ""}. `
          + "If you close it, your changes stay in this browser and come back when you open the file again."),
        buttons: [{ label: "Keep it open", value: false }, { label: "Close anyway", value: true, kind: "danger" }],
      });
      if (!choice) return;
    }
  }
  saver.remove(doc);
  const next = tabs.remove(doc);
  if (tabs.current === null) {
    if (next) selectDoc(next);
    else showDoc(null);
  }
  rememberTabs();
}

async function refreshDoc(doc, announce) {
  if (doc.dirty || doc.inflight) return;
  try {
    const data = await get(areaUrl("files", doc.area, doc.path));
    if (data.etag === doc.etag || doc.dirty || data.content === null) return;
    doc.etag = data.etag;
    doc.savedText = data.content;
    if (tabs.current === doc) editor.replaceText(data.content);
    else doc.state = doc.state.update({ changes: { from: 0, to: doc.state.doc.length, insert: data.content } }).state;
    if (announce) toast(`${doc.path} was changed elsewhere: showing the new version.`);
  } catch {
    // shown by the status of the next save
  }
}

async function copyToHome(area, path) {
  let data;
  try {
    data = await get(areaUrl("files", area, path));
  } catch (e) {
    alertDialog("Cannot copy", e.message);
    return;
  }
  const name = await createFree(path, data.content);
  if (!name) return;
  await trees.home.load();
  toast(`Copied to My files: ${name}`);
  openFile("home", name);
}

/** Create `path` in home (or path-2, path-3, ... when taken); returns the path used. */
async function createFree(path, text, suffix = "", area = "home") {
  const base = path.replace(/(\.[^./]*)?$/, (ext) => `${suffix}${ext}`);
  let name = base;
  for (let n = 2; n < 100; n++) {
    try {
      await request("PUT", areaUrl("files", area, name), { body: text, headers: { "Content-Type": "text/plain" } });
      return name;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409)) {
        alertDialog("Could not save a copy", e.message);
        return null;
      }
      name = base.replace(/(\.[^./]*)?$/, (ext) => `-${n}${ext}`);
    }
  }
  return null;
}

// -- which tabs were open (reopened after a reload) --------------------------

const TABS_KEY = `pyc.tabs.${user.username}.${teacherView ? "teacher" : "ide"}`;

function rememberTabs() {
  try {
    localStorage.setItem(TABS_KEY, JSON.stringify({
      open: tabs.docs.map((d) => d.key), active: tabs.current ? tabs.current.key : null,
    }));
  } catch {
    // not remembered
  }
}

async function reopenTabs() {
  let saved = { open: [], active: null };
  try {
    saved = JSON.parse(localStorage.getItem(TABS_KEY) || "null") || saved;
  } catch {
    // start empty
  }
  const keys = [...new Set([...saved.open, ...saver.keptKeys()])];
  for (const key of keys) {
    const i = key.indexOf(":");
    await openFile(key.slice(0, i), key.slice(i + 1), { activate: false, quiet: true });
  }
  const active = tabs.find(saved.active) || tabs.docs[0];
  if (active) await selectDoc(active);
  else if (!teacherView && trees.home.entries.some((e) => e.path === "hello.py")) await openFile("home", "hello.py");
  else showDoc(null);
}

// -- saving status and conflicts ----------------------------------------------

saver.addEventListener("status", (e) => {
  tabs.render();
  if (e.detail === tabs.current) updateStatus();
});

let announced = "saved";

/** Screen readers hear about problems and their end, not every save. */
function announce(doc) {
  const status = doc.readOnly ? "saved" : doc.status;
  const serious = ["offline", "conflict", "error"];
  if (serious.includes(status) && status !== announced) {
    $("#announcer").textContent = `${doc.name}: ${STATUS_TEXT[status]}${doc.message ? ". " + doc.message : ""}`;
  } else if (status === "saved" && serious.includes(announced)) {
    $("#announcer").textContent = `${doc.name}: saved`;
  }
  if (status === "saved" || serious.includes(status)) announced = status;
}

function updateStatus() {
  const el = $("#save-status");
  const doc = tabs.current;
  if (doc) announce(doc);
  if (!doc) {
    el.dataset.status = "none";
    clear(el);
    return;
  }
  const status = doc.readOnly ? "readonly" : doc.status;
  el.dataset.status = status;
  const words = doc.readOnly ? "Read-only" : STATUS_TEXT[doc.status];
  if (status === "conflict") {
    clear(el, h("button", { class: "btn small warn", type: "button", onclick: () => resolveConflict(doc) }, "Conflict — choose a version"));
  } else {
    clear(el, h("span", { class: "dot", "aria-hidden": "true" }), h("span", { title: doc.message || "" }, words),
      status === "error" && doc.message ? h("span", { class: "status-detail" }, `: ${doc.message}`) : null);
  }
}

let conflictOpen = false;

async function resolveConflict(doc) {
  if (conflictOpen || !doc.conflict) return;
  conflictOpen = true;
  try {
    if (tabs.current !== doc) await selectDoc(doc);
    const answer = await conflictDialog(doc);
    if (!answer || !doc.conflict) return;
    const theirs = doc.conflict.current.content;
    if (answer.choice === "both") {
      const copy = await saveCopy(doc, answer.text);
      if (!copy) return;
      setText(doc, theirs);
    } else {
      setText(doc, answer.text);
    }
    const ok = await saver.resolve(doc);
    if (ok) toast(answer.choice === "theirs" ? "Now showing the saved version." : "Saved.");
  } finally {
    conflictOpen = false;
  }
}

function setText(doc, text) {
  if (tabs.current === doc) editor.replaceText(text);
  else doc.state = doc.state.update({ changes: { from: 0, to: doc.state.doc.length, insert: text } }).state;
}

/** Save `text` next to the doc as "name-mine.py" (or -mine-2, ...); returns the path. */
async function saveCopy(doc, text) {
  const name = await createFree(doc.path, text, "-mine", doc.area);
  if (!name) return null;
  toast(`Your version is saved as ${name}.`);
  trees[doc.area]?.load();
  openFile(doc.area, name, { activate: false, quiet: true });
  return name;
}

// -- running ------------------------------------------------------------------

let runStarting = false;

function updateRunButtons() {
  const doc = tabs.current;
  const running = output.running || runStarting;
  const runnable = doc && doc.area === "home" && /\.pyw?$/i.test(doc.path);
  $("#run").disabled = running || !runnable;
  $("#run").title = !doc ? "Open a file to run it" : doc.area !== "home"
    ? "Only your own files can be run: copy it to My files first" : "Run the current file (F5 or Ctrl+Enter)";
  $("#stop").disabled = !running;
  document.body.classList.toggle("running", running);
}

async function run() {
  const doc = tabs.current;
  if (!doc || output.running || runStarting) return;
  if (doc.area !== "home") {
    toast("Only your own files can be run: copy this one to My files first.", "warn");
    return;
  }
  runStarting = true;
  updateRunButtons();
  try {
    const saved = await saver.flush(doc);
    if (!saved) {
      output.starting(doc.path);
      output.running = false;
      const why = doc.status === "conflict" ? "resolve the conflict first" : doc.message || STATUS_TEXT[doc.status];
      output.note(`Not run: the file could not be saved (${why}).`, "\x1b[31m");
      output.setState("error", "Not run: the file is not saved.");
      return;
    }
    if (!socket.open) {
      output.starting(doc.path);
      output.running = false;
      output.note("Not connected to the server: reconnecting… Press Run again in a moment.", "\x1b[33m");
      output.setState("error", "Not connected.");
      socket.connectNow();
      return;
    }
    output.starting(doc.path);
    socket.send({ type: "run", path: doc.path, ...output.size() });
  } finally {
    runStarting = false;
    updateRunButtons();
  }
}

function stop() {
  if (output.running) socket.send({ type: "kill" });
}

socket.addEventListener("message", (e) => {
  output.message(e.detail);
  if (e.detail.type === "exit" || e.detail.type === "error") {
    trees.home.load(); // a program may have written files
  }
  updateRunButtons();
});
socket.addEventListener("closed", (e) => {
  output.lost();
  updateRunButtons();
  // The server ended the session (logout elsewhere, deactivation): say so.
  if (e.detail.code === SESSION_ENDED) get("/api/me").catch(() => {});
  // Closed again and again while the server answers: maybe the session ended
  // (the socket is then refused with 401); a request finds out and says so.
  if (socket.attempt >= 2 && connection.online) get("/api/me").catch(() => {});
});

// -- connection ---------------------------------------------------------------

let bannerTimer = null;
let wasDown = false;

function updateBanner() {
  const el = $("#conn-banner");
  clearTimeout(bannerTimer);
  if (socket.state === "parked" && socket.lastClose.code === OTHER_TAB) {
    // Another tab took this IDE's place: no reconnecting on our own, which
    // would only push that tab out in turn.
    clear(el, h("strong", {}, "This IDE is open in other tabs."),
      h("span", {}, " Running programs works in one of them at a time."),
      h("button", { class: "btn small", type: "button", onclick: () => socket.connectNow() }, "Use it here"));
    el.hidden = false;
    wasDown = true;
    return;
  }
  const socketDown = socket.state !== "open";
  const down = !connection.online || (socketDown && socket.attempt > 0);
  if (!down) {
    el.hidden = true;
    if (wasDown) {
      wasDown = false;
      toast("Reconnected to the server.", "ok");
      saver.retryAll();
    }
    return;
  }
  wasDown = true;
  const restarting = socket.lastClose && socket.lastClose.code === 1012;
  const at = !connection.online ? connection.nextTry : socket.retryAt;
  const wait = Math.max(0, (at - Date.now()) / 1000);
  const unsaved = saver.unsaved().length;
  clear(el,
    h("strong", {}, restarting ? "The server is restarting." : "Connection to the server lost."),
    h("span", {}, wait > 0.5 ? ` Reconnecting in ${duration(wait)}…` : " Reconnecting…"),
    unsaved ? h("span", {}, ` Your changes are kept in this browser and will be saved when it is back.`) : null,
    h("button", { class: "btn small", type: "button", onclick: () => { connection.retryNow(); socket.connectNow(); } }, "Retry now"));
  el.hidden = false;
  bannerTimer = setTimeout(updateBanner, 1000);
}
connection.addEventListener("change", updateBanner);
socket.addEventListener("state", updateBanner);

let sessionEnded = false;
session.addEventListener("expired", () => {
  if (sessionEnded) return;
  sessionEnded = true;
  openDialog({
    title: "Your session has ended",
    body: h("p", {}, "Sign in again to go on. Your unsaved changes are kept in this browser and are saved after you sign in."),
    buttons: [{ label: "Sign in again", value: true, kind: "primary" }],
  }).then(() => {
    location.href = `/?next=${encodeURIComponent(location.pathname)}`;
  });
});

// -- keyboard -----------------------------------------------------------------

function isShortcut(e) {
  const mod = e.ctrlKey || e.metaKey;
  return e.key === "F5" || e.key === "F1" || (mod && e.key === "Enter") || (mod && e.key.toLowerCase() === "s")
    || (e.altKey && ["1", "2", "3", "PageUp", "PageDown"].includes(e.key)) || (mod && e.altKey && ["=", "+", "-"].includes(e.key));
}

function typingTarget(t) {
  return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}

window.addEventListener("keydown", (e) => {
  if (document.querySelector("dialog[open]")) return;
  const mod = e.ctrlKey || e.metaKey;
  let done = true;
  if (e.key === "F5" || (mod && !e.shiftKey && e.key === "Enter")) run();
  else if (mod && e.shiftKey && e.key === "Enter") stop();
  else if (mod && !e.altKey && e.key.toLowerCase() === "s") saveNow();
  else if (e.key === "F1" || (e.key === "?" && !typingTarget(e.target))) helpDialog();
  else if (e.altKey && e.key === "1") (trees.home.focus());
  else if (e.altKey && e.key === "2") editor.focus();
  else if (e.altKey && e.key === "3") output.focus();
  else if (e.altKey && (e.key === "PageDown" || e.key === "PageUp")) {
    const next = tabs.next(e.key === "PageDown" ? 1 : -1);
    if (next) selectDoc(next);
  } else if (mod && e.altKey && (e.key === "=" || e.key === "+")) settings.bigger(1);
  else if (mod && e.altKey && e.key === "-") settings.bigger(-1);
  else done = false;
  if (done) {
    e.preventDefault();
    e.stopPropagation();
  }
}, true);

async function saveNow() {
  const doc = tabs.current;
  if (!doc || doc.readOnly) return;
  const ok = await saver.flush(doc);
  if (!ok && doc.status !== "conflict") toast(`Not saved yet: ${doc.message || STATUS_TEXT[doc.status]}`, "warn");
}

// -- the rest of the page -------------------------------------------------------

$("#run").addEventListener("click", run);
$("#stop").addEventListener("click", stop);
$("#clear-console").addEventListener("click", () => output.clearAll());
$("#settings-btn").addEventListener("click", settingsDialog);
$("#help-btn").addEventListener("click", helpDialog);
$("#history-btn").addEventListener("click", async () => {
  const doc = tabs.current;
  if (!doc) return;
  if (!doc.readOnly && !(await saver.flush(doc))) {
    toast("Save the file first (see its status).", "warn");
    return;
  }
  const restored = await historyDialog(doc);
  if (!restored || tabs.current !== doc) return;
  doc.etag = restored.etag;
  doc.savedText = restored.content;
  editor.replaceText(restored.content);
  saver.changed(doc);
  toast("The earlier version is back (the one it replaced is in the history too).", "ok");
});
userMenu($("#user-btn"), user, teacherView ? "teacher" : "ide");

tabs.addEventListener("select", (e) => selectDoc(e.detail));
tabs.addEventListener("close", (e) => closeDoc(e.detail));

window.addEventListener("beforeunload", (e) => {
  const unsaved = saver.unsaved();
  if (!unsaved.length) return;
  for (const doc of unsaved) saver.keep(doc);
  e.preventDefault();
  e.returnValue = "";
});

// Coming back to the tab: show what changed elsewhere meanwhile.
let lastRefresh = 0;
window.addEventListener("focus", () => {
  if (Date.now() - lastRefresh < 5000) return;
  lastRefresh = Date.now();
  for (const tree of allTrees()) tree.load();
  if (tabs.current) refreshDoc(tabs.current, true);
});

function allTrees() {
  return roster && roster.tree ? [...Object.values(trees), roster.tree] : Object.values(trees);
}

// -- teacher view -------------------------------------------------------------

let roster = null;
if (teacherView) {
  const { Roster } = await import("./teacher.js");
  roster = new Roster($("#class-panel"));
  roster.addEventListener("open", (e) => openFile(e.detail.area, e.detail.path));
  $("#sidebar-tabs").hidden = false;
  const showPanel = (which) => {
    $("#tab-files").setAttribute("aria-selected", String(which === "files"));
    $("#tab-class").setAttribute("aria-selected", String(which === "class"));
    $("#files-panel").hidden = which !== "files";
    $("#class-panel").hidden = which !== "class";
    if (which === "class") roster.load();
  };
  $("#tab-files").addEventListener("click", () => showPanel("files"));
  $("#tab-class").addEventListener("click", () => showPanel("class"));
  showPanel("class");
}

// -- start ----------------------------------------------------------------------

socket.connect();
await Promise.all(Object.values(trees).map((t) => t.load()));
await reopenTabs();
document.body.classList.remove("loading");
document.body.dataset.ready = "true";
performance.mark("pyc-ready");
