// Builds the browser pages: static/src/ -> static/dist/ (or --outdir DIR).
//
// esbuild bundles one entry per page plus one stylesheet; every output is
// named after a hash of its content (ide.3f9c2a1b.js) so the server can let
// browsers cache it for a year, and manifest.json says which files each page
// needs. Same sources and same package versions give the same bytes: nothing
// here depends on the time, the machine or the folder the build runs in.
import { build } from "esbuild";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const outIndex = args.indexOf("--outdir");
const outdir = path.resolve(outIndex >= 0 ? args[outIndex + 1] : path.join(root, "static", "dist"));

// page name -> its entry module; every page also gets the stylesheet.
const PAGES = { login: "login.js", ide: "ide.js", admin: "admin.js", class: "classroom.js" };
const STYLES = "css/app.css";

const result = await build({
  absWorkingDir: root,
  entryPoints: [...Object.values(PAGES), STYLES].map((f) => `static/src/${f}`),
  outdir: "static/dist", // only names outputs: write is false
  write: false,
  bundle: true,
  splitting: true,
  format: "esm",
  minify: true,
  target: ["chrome100", "firefox100", "safari15"],
  entryNames: "[name].[hash]",
  chunkNames: "chunk.[hash]",
  assetNames: "[name].[hash]",
  legalComments: "eof",
  charset: "utf8",
  metafile: true,
  logLevel: "warning",
});

const rel = (p) => path.relative(path.join(root, "static/dist"), path.resolve(root, p));
const outputs = result.metafile.outputs;
const entryOutput = (entry) =>
  Object.keys(outputs).find((o) => outputs[o].entryPoint === `static/src/${entry}`);

// The chunks a page imports, directly or through other chunks, so the page
// can ask for all of them at once (modulepreload) instead of one by one.
function chunksOf(output, seen = new Set()) {
  for (const imp of outputs[output].imports) {
    if (imp.kind === "import-statement" && !seen.has(imp.path)) {
      seen.add(imp.path);
      chunksOf(imp.path, seen);
    }
  }
  return [...seen].map(rel).sort();
}

const css = rel(entryOutput(STYLES));
const pages = {};
for (const [page, entry] of Object.entries(PAGES)) {
  const out = entryOutput(entry);
  pages[page] = { script: rel(out), preload: chunksOf(out), styles: [css] };
}
const files = {};
for (const file of result.outputFiles) {
  files[path.basename(file.path)] = createHash("sha256").update(file.contents).digest("hex");
}
const manifest = { pages, files: Object.fromEntries(Object.entries(files).sort()) };

await mkdir(outdir, { recursive: true });
for (const old of await readdir(outdir)) {
  await rm(path.join(outdir, old), { recursive: true, force: true });
}
for (const file of result.outputFiles) {
  await writeFile(path.join(outdir, path.basename(file.path)), file.contents);
}
await writeFile(path.join(outdir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
const total = result.outputFiles.reduce((n, f) => n + f.contents.length, 0);
console.log(`built ${result.outputFiles.length} files (${(total / 1024).toFixed(1)} KiB) into ${outdir}`);
