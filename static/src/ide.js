// The IDE page (/ide for students, /teacher with the class tools): makes the
// pieces and wires them together. Each piece owns its job: workspace.js the
// open files, autosave.js saving, conflicts.js conflicts, run.js running,
// run-errors.js where a run's error is, exercises.js and check.js the
// exercises, connection.js the link to the server, talk.js what the
// teacher says and the student's raised hand, shortcuts.js the keyboard,
// layout.js the panes, sidebar.js the side bar's tabs.
import { $, clear, toast, debounce } from "./dom.js";
import { get, meWhenReachable } from "./api.js";
import { Saver, STATUS_TEXT } from "./autosave.js";
import { Editor } from "./editor.js";
import { Tabs } from "./tabs.js";
import { TabMemory } from "./tab-memory.js";
import { Workspace } from "./workspace.js";
import { SaveStatus } from "./save-status.js";
import { Conflicts } from "./conflicts.js";
import { FileTree } from "./files.js";
import { Console } from "./console.js";
import { RunSocket } from "./run-socket.js";
import { Recorder } from "./recorder.js";
import { RunControl } from "./run.js";
import { RunErrors } from "./run-errors.js";
import { Layout } from "./layout.js";
import { Sidebar } from "./sidebar.js";
import { ExercisesPanel } from "./exercises.js";
import { CheckControl } from "./check.js";
import { ConnectionBanner, SessionWatch } from "./connection.js";
import { installShortcuts, isShortcut } from "./shortcuts.js";
import { settings, settingsDialog } from "./settings.js";
import { helpDialog } from "./help.js";
import { showHistory } from "./history.js";
import { userMenu } from "./account.js";
import { StudentTalk } from "./talk.js";
import { Breakpoints } from "./debug-marks.js";
import { DebugPanel } from "./debugger.js";
import { TypeAhead } from "./typeahead.js";
import { ExamBar } from "./exam.js";
import { helpOff } from "./assist.js";

const typeAhead = new TypeAhead(); // before the first wait: keys typed while the page opens are kept
const user = await meWhenReachable(() => toast("The server cannot be reached: retrying…", "warn", 3000));
if (!user) {
  location.replace(`/?next=${encodeURIComponent(location.pathname)}`);
  throw new Error("not signed in");
}
const staff = user.role === "teacher" || user.role === "admin";
const teacherView = document.body.dataset.view === "teacher" && staff;
if (document.body.dataset.view === "teacher" && !staff) location.replace("/ide");

// -- files and editing --------------------------------------------------------

const layout = new Layout();

const tabs = new Tabs($("#tabs"));
const saver = new Saver(user.username);
const breakpoints = new Breakpoints(user.username);
const editor = new Editor($("#editor"), {
  onChange: () => { if (tabs.current) saver.changed(tabs.current); },
  breakpoints,
});
const home = new FileTree({ area: "home", title: "My files", writable: true });
// One course folder per class (a teacher's: the classes they teach).
const classes = (await get("/api/classes").catch(() => ({ classes: [] }))).classes;
const courses = classes.map((c) => new FileTree({
  area: c.area, title: classes.length > 1 ? `Course: ${c.name}` : "Course", writable: staff,
  extraItems: (entry) => [
    staff ? { label: "Send to students…", action: () => import("./teacher.js").then((m) => m.pushDialog(c.area, entry.path, classes)) } : null,
    entry.kind === "file" ? { label: "Copy to my files", action: () => workspace.copyToHome(c.area, entry.path) } : null,
  ].filter(Boolean),
}));
// A class's exercises as files (checks/<id>), for its teachers to edit.
const checkTrees = classes.filter((c) => c.checks).map((c) => new FileTree({
  area: c.checks, title: classes.length > 1 ? `Exercises: ${c.name}` : "Exercises (teachers only)", writable: true,
}));
// A student's exam (running, or the next): its folder first in the files, from its start; its clock in the bar.
const exam = staff ? null : (await get("/api/exam").catch(() => ({ exam: null }))).exam;
const examTree = exam ? new FileTree({ area: exam.folder, title: `Exam: ${exam.title}`, writable: exam.state === "running" })
  : null;
if (examTree) examTree.el.hidden = exam.state === "upcoming";
// An exam that does not allow their own files: while it runs, its folder alone (the server refuses the others).
let keptToExam = exam?.state === "running" && !exam.allows.own_files;
let examBar = null; // (its clock, made once the page is ready)
const ownTrees = [home, ...courses];
for (const tree of ownTrees) tree.el.hidden = keptToExam;
clear($("#files-panel"), examTree?.el, home.el, courses.map((tree) => tree.el), checkTrees.map((tree) => tree.el));
const sidebar = new Sidebar(teacherView ? ["files", "class", "exercises"] : ["files", "exercises"], teacherView ? "class" : "files");
const roster = teacherView ? (await import("./teacher.js")).classView(classes) : null;

const socket = new RunSocket();
const recorder = new Recorder(socket);
const workspace = new Workspace({
  tabs, editor, saver, staff, recorder,
  trees: () => [examTree, home, ...courses, ...checkTrees, roster?.tree].filter((tree) => tree && !tree.el.hidden),
});
workspace.follow(home);
if (examTree) workspace.follow(examTree);
for (const tree of [...courses, ...checkTrees]) workspace.follow(tree);
roster?.addEventListener("open", (e) => workspace.open(e.detail.area, e.detail.path));
roster?.addEventListener("copy", (e) => workspace.copyToHome(e.detail.area, e.detail.path));
// An exercise written with the form shows in its checks tree; one edited as files, in the class's list.
roster?.addEventListener("exercises", (e) => workspace.reloadSoon(e.detail.area));
// A student's file open here follows their saves.
roster?.addEventListener("saved", (e) => {
  for (const doc of tabs.docs) if (doc.area === `user/${e.detail.username}`) workspace.refresh(doc, false);
});
const tabMemory = new TabMemory(`${user.username}.${teacherView ? "teacher" : "ide"}`, workspace);
const conflicts = new Conflicts({ saver, workspace });
const saveStatus = new SaveStatus({ onConflict: (doc) => conflicts.resolve(doc) });

// -- running ------------------------------------------------------------------

const runErrors = new RunErrors({ workspace, editor, username: user.username });
const output = new Console({ terminalEl: $("#terminal"), plotsEl: $("#plots"), stateEl: $("#run-state"), passKeys: isShortcut,
  username: user.username, openFrame: (path, line) => runErrors.open(path, line) });
const checker = new CheckControl({ socket, saver, workspace });
const runControl = new RunControl({ socket, output, saver, current: () => tabs.current, claims: (msg) => checker.claims(msg) || recorder.claims(msg) });
checker.runControl = runControl;
const debugPanel = new DebugPanel({ socket, runControl, output, workspace, editor, breakpoints,
  username: user.username });
socket.addEventListener("message", (e) => { if (checker.claims(e.detail)) checker.received(e.detail); });
const exercises = new ExercisesPanel({ el: $("#exercises-panel"), checker, workspace, layout, home,
  openLine: (path, line) => runErrors.open(path, line),
  // An exercise of the exam that runs: its file is in the exam's folder (examBar: made below, at the start).
  examArea: (ex) => (examBar?.state === "running" && exam.class_id === ex.class.id && exam.exercises.includes(ex.slug)
    ? exam.folder : null) });
home.addEventListener("loaded", () => exercises.showButtons());
sidebar.addEventListener("shown", (e) => { if (e.detail === "exercises") exercises.load(); }); // a new one shows up
// Files changed elsewhere (another tab, the teacher, a program): the trees and open files follow.
socket.addEventListener("message", (e) => { if (e.detail.type === "files") workspace.changedElsewhere(e.detail); });
// What the student types next goes to the code again, once a run is over or refused.
const backToEditor = () => { if (tabs.current) editor.focus(); };
runControl.addEventListener("starting", () => runErrors.clear());
// Run found the file changed elsewhere since the editor showed it: show that version.
runControl.addEventListener("changed", (e) => workspace.refresh(e.detail, true));
runControl.addEventListener("ended", (e) => {
  if (!home.el.hidden) home.load(); // a program may have written files
  runErrors.show(e.detail.stderr, e.detail.explanation);
  backToEditor();
});
runControl.addEventListener("refused", backToEditor);
// A student's IDE tells which file of theirs is in front of them (their teacher's view opens it).
if (user.role === "student") {
  let told; // the path the server was told last (undefined: nothing on this socket yet)
  const viewing = () => {
    const doc = tabs.current;
    const path = doc && doc.area === "home" ? doc.path : null;
    if (path !== told && socket.ask("viewing", { path })) told = path;
  };
  const viewingSoon = debounce(viewing, 500);
  workspace.addEventListener("shown", viewingSoon);
  workspace.addEventListener("tabs", viewingSoon); // a rename
  socket.addEventListener("state", () => {
    told = undefined; // a new socket: tell it again
    if (socket.state === "open") viewing();
  });
}
new ConnectionBanner(socket, saver);
// A teacher's messages and the hand: students only (teachers see the hands in the Class panel).
const talk = user.role !== "student" ? null : new StudentTalk({ socket, classes, username: user.username, backToEditor,
  open: (area, path) => workspace.open(area, path),
  where: () => (tabs.current ? { file: tabs.current.path, line: editor.cursorLine() } : null) });
new SessionWatch(socket);

// -- what shows which state ---------------------------------------------------

saver.addEventListener("status", (e) => {
  if (e.detail.status === "saved" && e.detail.area.startsWith("checks/")) roster?.exercises.load();
  tabs.render();
  if (e.detail === tabs.current) saveStatus.show(e.detail);
});
workspace.addEventListener("shown", (e) => {
  saveStatus.show(e.detail);
  runControl.render();
  debugPanel.render();
  $("#history-btn").disabled = !e.detail;
});

// -- the rest of the page -------------------------------------------------------

async function saveNow() {
  const doc = tabs.current;
  if (!doc || doc.readOnly) return;
  const ok = await saver.flush(doc);
  if (!ok && doc.status !== "conflict") toast(`Not saved yet: ${doc.message || STATUS_TEXT[doc.status]}`, "warn");
}

function selectNext(step) {
  const next = tabs.next(step);
  if (next) workspace.select(next);
}

installShortcuts({
  run: () => runControl.run(),
  debug: () => debugPanel.start(),
  stop: () => runControl.stop(),
  continue: () => debugPanel.command("continue"),
  stepOver: () => debugPanel.command("step"),
  stepInto: () => debugPanel.command("step_in"),
  stepOut: () => debugPanel.command("step_out"),
  save: saveNow,
  help: helpDialog,
  files: () => {
    if (settings.get("filesHidden")) layout.toggleFiles();
    home.focus();
  },
  toggleFiles: () => layout.toggleFiles(),
  editor: () => editor.focus(),
  console: () => output.focus(),
  nextTab: () => selectNext(1),
  previousTab: () => selectNext(-1),
  bigger: () => settings.bigger(1),
  smaller: () => settings.bigger(-1),
}, () => debugPanel.active);

$("#settings-btn").addEventListener("click", settingsDialog);
$("#help-btn").addEventListener("click", helpDialog);
$("#history-btn").addEventListener("click", () => { if (tabs.current) showHistory(tabs.current, saver); });
userMenu($("#user-btn"), user, teacherView ? "teacher" : "ide");

window.addEventListener("beforeunload", (e) => {
  const unsaved = saver.unsaved();
  if (!unsaved.length) return;
  for (const doc of unsaved) saver.keep(doc);
  e.preventDefault();
  e.returnValue = "";
});
window.addEventListener("focus", () => workspace.refreshAll());

// -- start ----------------------------------------------------------------------

socket.connect();
examBar = exam ? new ExamBar({ el: $("#exam-bar"), exam }) : null;
if (examBar) {
  examBar.addEventListener("started", () => {
    // (Its own files close: the page opens again as the exam has it, and what was not saved yet is kept.)
    if (!exam.allows.own_files) location.reload();
    examTree.el.hidden = false;
    examTree.writable = true;
    examTree.load();
  });
  examBar.addEventListener("over", () => {
    examTree.writable = false;
    workspace.lock(exam.folder).then(() => examTree.load());
    if (keptToExam) {
      keptToExam = false;
      for (const tree of ownTrees) {
        tree.el.hidden = false;
        tree.load();
      }
    }
  });
  examBar.watch($("#editor"));
  examBar.reportOfflineSaves(saver);
  // What the exam does not allow goes quiet while it runs (the server refuses it too).
  const during = () => examBar.state === "running";
  if (!exam.allows.assist) helpOff(during);
  if (!exam.allows.ask && talk) {
    const showHand = () => { talk.button.hidden = during(); };
    for (const event of ["started", "over"]) examBar.addEventListener(event, showHand);
    showHand();
  }
}
await Promise.all([...[...(keptToExam ? [] : ownTrees), ...checkTrees, ...(exam?.state === "running" ? [examTree] : [])]
  .map((tree) => tree.load()), exercises.load()]);
if (keptToExam) {
  workspace.show(null); // (the tabs of its own files wait for the end)
} else if (!(await tabMemory.restore(saver.keptKeys()))) {
  if (!teacherView && home.entries.some((e) => e.path === "hello.py")) await workspace.open("home", "hello.py");
  else workspace.show(null);
}
backToEditor(); // just signed in (or reloaded): typing goes straight into the code
const typedEarly = typeAhead.take();
if (typedEarly && !editor.typeIn(typedEarly)) {
  toast(`What you typed while the page was opening (${typedEarly.length} characters) could not go into a file: `
    + "open or make one, then type it again.", "error", 10000);
}
document.body.classList.remove("loading");
document.body.dataset.ready = "true";
performance.mark("pyc-ready");
