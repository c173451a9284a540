// The class's mistakes at a glance: the students' current errors grouped by
// what they are (kind, message with what varies between runs taken out,
// file and line), biggest group first. Pure functions of the roster, so that
// they are tested without a page and no server keeps state for them.

const ADDRESS = /\b0x[0-9a-f]{4,}\b/gi; // "<object at 0x7f3a...>": differs on every run
const UNDEFINED = /^name '(\w{1,80})' is not defined/;

/** The student's error now (a failed last run, not running again), or null. */
export function currentError(s) {
  if (s.running || s.last_run?.outcome !== "error") return null;
  return s.last_run.error || { text: null, kind: null, message: null, file: null, line: null };
}

/** `message` with what varies between runs of the same mistake replaced. */
export function normalise(message) {
  return (message || "").replace(ADDRESS, "0x…").replace(/\s+/g, " ").trim();
}

/** The short name of an error: `lenght` for an unknown name, else its message. */
function what(error) {
  const message = normalise(error.message);
  const unknown = UNDEFINED.exec(message);
  if (unknown) return `\`${unknown[1]}\``;
  return message;
}

/**
 * Groups of the students' current errors: [{key, kind, what, file, line,
 * usernames}], biggest first (then by kind, file and line, for a steady order).
 */
export function errorGroups(students) {
  const groups = new Map();
  for (const s of students) {
    const error = currentError(s);
    if (!error) continue;
    const kind = error.kind || "";
    const message = error.kind ? normalise(error.message) : normalise(error.text);
    const key = JSON.stringify([kind, message, error.file || "", error.line || 0]);
    let group = groups.get(key);
    if (!group) {
      group = { key, kind: error.kind, what: error.kind ? what(error) : message, file: error.file,
        line: error.line, usernames: [] };
      groups.set(key, group);
    }
    group.usernames.push(s.username);
  }
  const order = (g) => `${g.kind || "~"}\u0000${g.file || ""}\u0000${String(g.line || 0).padStart(9, "0")}\u0000${g.what}`;
  return [...groups.values()].sort((a, b) => b.usernames.length - a.usernames.length || order(a).localeCompare(order(b)));
}

/** "14 students: NameError `lenght` at line 4 of lesson2.py" */
export function describeGroup(group) {
  const n = group.usernames.length;
  const who = `${n} ${n === 1 ? "student" : "students"}`;
  const where = group.file ? ` at line ${group.line} of ${group.file}` : "";
  if (!group.kind) return `${who}: ${group.what || "stopped with an error, saying nothing"}${where}`;
  const what = !group.what ? "" : group.what.startsWith("`") ? ` ${group.what}` : `: ${group.what}`;
  return `${who}: ${group.kind}${what}${where}`;
}
