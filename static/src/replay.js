// Replay of how a file was written (server/replay/), for the teacher: its
// recorded edits in time order in a read-only editor, with a timeline to
// move along, play at a chosen speed (long pauses shortened if one likes),
// and pasted text highlighted as long as it stays (and listed, to jump to).
// Each stream (one page's socket) replays from its own starting text, so
// two devices or a reloaded page interleave by time; a stream whose rows do
// not follow on (a worker that stopped before writing) resumes at its next
// starting text.
import { EditorView, Decoration } from "@codemirror/view";
import { EditorState, StateField, StateEffect, ChangeSet, Text } from "@codemirror/state";
import { h, clear } from "./dom.js";
import { get, areaUrl } from "./api.js";
import { openDialog } from "./dialog.js";
import { commonExtensions } from "./editor.js";

const MAX_STEPS = 200_000; // a longer history is shown up to there
const PAUSE_MS = 2000; // with "Shorten pauses", a longer pause between edits plays as this long
const SPEEDS = [1, 2, 5, 10, 50, 200];
const PASTES_LISTED = 100;

const pasted = Decoration.mark({ class: "cm-pasted", attributes: { title: "Pasted" } });
const setMarks = StateEffect.define();
const marks = StateField.define({
  create: () => Decoration.none,
  update(value, tr) {
    for (const e of tr.effects) if (e.is(setMarks)) return e.value;
    return value.map(tr.changes);
  },
  provide: (field) => EditorView.decorations.from(field),
});

const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const day = (ms) => new Date(ms).toLocaleDateString([], { dateStyle: "medium" });

/** Every row of the file's replay, a page at a time: {chunks, truncated}. */
async function load(area, path) {
  const chunks = [];
  let after = 0;
  for (;;) {
    const page = await get(`${areaUrl("replay", area, path)}?after=${after}`);
    chunks.push(...page.chunks);
    if (!page.more || !page.chunks.length) return { chunks, truncated: false };
    if (chunks.reduce((n, c) => n + c.edits.length, 0) > MAX_STEPS) return { chunks, truncated: true };
    after = page.chunks[page.chunks.length - 1].id;
  }
}

/**
 * The edits of `chunks` in time order: {at (ms), before, text: the text before and after it,
 * marks: the pasted ranges then, changes, flag, inserted}; `start`: the
 * text before the first. A chunk that does not follow on from its stream is
 * skipped until the stream starts again from a text of its own.
 */
export function replaySteps(chunks) {
  const streams = new Map(); // stream -> {text, marks}
  const steps = [];
  let start = null;
  for (const chunk of chunks) {
    let s = streams.get(chunk.stream);
    if (chunk.base !== null && chunk.base !== undefined) {
      s = { text: Text.of(chunk.base.split("\n")), marks: Decoration.none };
      if (start === null) start = s.text;
    }
    if (!s || s.text.length !== chunk.length) {
      streams.delete(chunk.stream);
      continue;
    }
    const at = Date.parse(chunk.at);
    for (const [ms, json, flag] of chunk.edits) {
      let changes;
      try {
        changes = ChangeSet.fromJSON(json);
      } catch {
        changes = null;
      }
      if (!changes || changes.length !== s.text.length) {
        s = null;
        break;
      }
      let inserted = 0;
      const added = [];
      changes.iterChanges((fromA, toA, fromB, toB) => {
        inserted += toB - fromB;
        if ((flag === "p" || flag === "d") && toB > fromB) added.push(pasted.range(fromB, toB));
      });
      const before = s.text;
      s = { text: changes.apply(s.text), marks: s.marks.map(changes).update({ add: added, sort: true }) };
      steps.push({ at: at + ms, stream: chunk.stream, before, changes, flag, inserted, ...s });
    }
    if (s) streams.set(chunk.stream, s);
    else streams.delete(chunk.stream);
  }
  steps.sort((a, b) => a.at - b.at); // (stable: a stream's own edits keep their order)
  return { start: start || Text.empty, steps: steps.slice(0, MAX_STEPS) };
}

/** The replay of `path` of `area` (a student's files: user/<name>, exams/<id>/<name>), in a dialog. */
export async function replayDialog(area, path, whose = "") {
  let found;
  try {
    found = await load(area, path);
  } catch (e) {
    await openDialog({ title: `Cannot replay ${path}`, body: h("p", {}, e.message) });
    return;
  }
  const { start, steps } = replaySteps(found.chunks);
  const title = `Replay of ${path}${whose ? ` (${whose})` : ""}`;
  if (!steps.length) {
    await openDialog({ title, body: h("p", {}, "Nothing was recorded for this file: recording starts when its "
      + "student types in it in the IDE (files uploaded, pushed or saved otherwise have no replay).") });
    return;
  }
  const player = new Player(start, steps, path, found.truncated);
  await openDialog({ title, body: player.el, wide: true, className: "replay-dialog", onOpen: () => player.seek(0) });
  player.stop();
}

class Player {
  constructor(start, steps, path, truncated) {
    this.start = start;
    this.steps = steps;
    this.at = 0; // edits applied: 0 .. steps.length
    this.shown = start; // the text shown (as a step has it)
    this.playing = false;
    this.frame = null;
    // Where each edit comes on the played timeline (its pauses shortened or not), ms from the first.
    this.timeline = () => {
      const times = [0];
      for (let i = 1; i < steps.length; i++) {
        const pause = steps[i].at - steps[i - 1].at;
        times.push(times[i - 1] + (this.shorten.checked ? Math.min(pause, PAUSE_MS) : pause));
      }
      return times;
    };
    this.view = new EditorView({ state: EditorState.create({ doc: start,
      extensions: [commonExtensions({ path, readOnly: true }), marks] }) });
    this.view.dom.classList.add("replay-editor");
    const last = steps.length;
    this.range = h("input", { type: "range", min: "0", max: String(last), value: "0", step: "1",
      "aria-label": "Place in the replay (edits)", oninput: () => { this.pause(); this.seek(Number(this.range.value)); } });
    this.playBtn = h("button", { type: "button", class: "btn small primary", onclick: () => (this.playing ? this.pause() : this.play()) }, "Play");
    this.speed = h("select", { id: "replay-speed", onchange: () => this.restartClock() },
      SPEEDS.map((s) => h("option", { value: String(s), selected: s === 10 }, `${s}×`)));
    this.shorten = h("input", { type: "checkbox", id: "replay-shorten", checked: true, onchange: () => { this.times = this.timeline(); this.restartClock(); } });
    this.times = this.timeline();
    this.where = h("p", { class: "replay-where" });
    const pastes = steps.map((s, i) => ({ s, i })).filter(({ s }) => s.flag === "p" || s.flag === "d");
    const first = steps[0].at;
    const typed = steps.reduce((n, s) => n + (s.flag === "" ? s.inserted : 0), 0);
    const pastedChars = pastes.reduce((n, { s }) => n + s.inserted, 0);
    this.el = h("div", { class: "replay" },
      h("p", { class: "replay-summary" }, `${last} edits from ${day(first)} ${clock(first)} to ${clock(steps[last - 1].at)}: `
        + `${typed} characters typed, ${pastes.length} paste${pastes.length === 1 ? "" : "s"} (${pastedChars} characters, `
        + "highlighted while they stay)."
        + (truncated ? " This file has a longer history: the first part is shown." : "")),
      this.view.dom,
      h("div", { class: "replay-controls" },
        this.playBtn,
        h("div", { class: "replay-track" }, this.range,
          h("div", { class: "replay-marks", "aria-hidden": "true" },
            pastes.map(({ i }) => h("span", { style: `left:${(100 * (i + 1)) / last}%` })))), // (where the slider is after it)
        h("label", { for: "replay-speed" }, "Speed"), this.speed,
        h("label", { class: "replay-shorten" }, this.shorten, " Shorten pauses")),
      this.where,
      pastes.length ? h("details", { class: "replay-pastes" },
        h("summary", {}, `Pastes (${pastes.length})`),
        h("ul", {}, pastes.slice(0, PASTES_LISTED).map(({ s, i }) => h("li", {},
          h("button", { type: "button", class: "btn small ghost", onclick: () => { this.pause(); this.seek(i + 1); } },
            `${clock(s.at)}: ${s.inserted} characters ${s.flag === "d" ? "dropped" : "pasted"}`))))) : null);
  }

  /** Show the text after `k` edits, the last change in view. */
  seek(k) {
    const step = this.steps[k - 1];
    const next = step && k === this.at + 1 && this.shown === step.before; // (else the whole text, perhaps another stream's)
    this.view.dispatch(next
      ? { changes: step.changes, effects: setMarks.of(step.marks) }
      : { changes: { from: 0, to: this.view.state.doc.length, insert: step ? step.text : this.start },
        effects: setMarks.of(step ? step.marks : Decoration.none) });
    this.at = k;
    this.shown = step ? step.text : this.start;
    this.range.value = String(k);
    if (step) {
      let pos = 0;
      step.changes.iterChangedRanges((fromA, toA, fromB, toB) => { pos = toB; });
      this.view.dispatch({ effects: EditorView.scrollIntoView(Math.min(pos, this.view.state.doc.length), { y: "center" }) });
    }
    clear(this.where, step ? `${clock(step.at)} — edit ${k} of ${this.steps.length}` : `Before the first edit (of ${this.steps.length})`);
  }

  play() {
    if (this.at >= this.steps.length) this.seek(0);
    this.playing = true;
    this.playBtn.textContent = "Pause";
    this.restartClock();
    const tick = (now) => {
      if (!this.playing) return;
      const played = this.from + (now - this.since) * Number(this.speed.value);
      let k = this.at;
      while (k < this.steps.length && this.times[k] <= played) k++;
      if (k !== this.at) this.seek(k);
      if (k >= this.steps.length) {
        this.pause();
        return;
      }
      this.frame = requestAnimationFrame(tick);
    };
    this.frame = requestAnimationFrame(tick);
  }

  /** Play on from where it is at the speed chosen now. */
  restartClock() {
    this.since = performance.now();
    this.from = this.at ? this.times[this.at - 1] : -1;
  }

  pause() {
    this.playing = false;
    cancelAnimationFrame(this.frame);
    this.playBtn.textContent = "Play";
  }

  stop() {
    this.pause();
    this.view.destroy();
  }
}
