// Markdown a teacher wrote (an exercise's instructions), shown safely:
// markdown-it with raw HTML off (a <script> or <img onerror> is shown as
// text), its link check on (javascript:, vbscript:, file: and data: other
// than images are not made links), and every link opening in a new tab
// that cannot reach back to this page.
import MarkdownIt from "markdown-it";
import { h } from "./dom.js";

const md = new MarkdownIt({ html: false, linkify: true, typographer: false });
const link = md.renderer.rules.link_open || ((tokens, i, options, env, self) => self.renderToken(tokens, i, options));
md.renderer.rules.link_open = (tokens, i, options, env, self) => {
  tokens[i].attrSet("target", "_blank");
  tokens[i].attrSet("rel", "noopener noreferrer");
  return link(tokens, i, options, env, self);
};

/** A <div class="markdown"> showing `text`. */
export function markdown(text) {
  const el = h("div", { class: "markdown" });
  el.innerHTML = md.render(text || "");
  return el;
}
