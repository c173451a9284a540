// Reading a traceback: which lines of the student's own files it names
// (`File "/home/student/<path>", line N`) and what the error was. The
// console makes those lines clickable; the editor marks them.

const FRAME = /File "([^"\n]+)", line (\d+)/g;
const SANDBOX_HOME = "/home/student/"; // where the home is inside a sandbox (server/runs/sandbox.py)

/** The path in the home of a file a traceback names, or null (a library's). */
export function homePath(file, username) {
  if (file.startsWith(SANDBOX_HOME)) return file.slice(SANDBOX_HOME.length);
  // The development sandbox ("process") runs in the home's real folder.
  const real = `/home/${username}/`;
  const at = file.lastIndexOf(real);
  return at >= 0 ? file.slice(at + real.length) : null;
}

/** The student's frames in `text`: [{path, line, index, length}] (where the match is). */
export function framesIn(text, username) {
  const frames = [];
  for (const m of text.matchAll(FRAME)) {
    const path = homePath(m[1], username);
    if (path) frames.push({ path, line: Number(m[2]), index: m.index, length: m[0].length });
  }
  return frames;
}

/** What went wrong, from stderr: its last line that says so ("ZeroDivisionError: division by zero"). */
export function errorMessage(text) {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() && !/^\s/.test(l) && !l.startsWith("Traceback"));
  return lines.length ? lines[lines.length - 1].slice(0, 200) : "";
}
