// Copies into one's own files under a free name: "Copy to my files" of a
// student's or a course file (the IDE, the full-screen class view), and
// the copies the IDE saves beside a file.
import { get, request, areaUrl, ApiError } from "./api.js";
import { alertDialog } from "./dialog.js";

/** Copy the file `path` of `area` into My files: at the same path, or for a
 * student's file under a folder named after them (path-2 ... when taken).
 * Resolves to the path used, or null (the teacher was told why). */
export async function copyToHome(area, path) {
  let data;
  try {
    data = await get(areaUrl("files", area, path));
  } catch (e) {
    alertDialog("Cannot copy", e.message);
    return null;
  }
  const target = area.startsWith("user/") ? `${area.slice(5)}/${path}` : path;
  return createFree("home", target, data.content, "");
}

/** Create `path` (with `suffix` before its extension) in `area`, or
 * path-2, path-3, ... when taken; resolves to the path used, or null. */
export async function createFree(area, path, text, suffix) {
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
