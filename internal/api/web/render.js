// render.js turns results into DOM: console text, MIME bundles (images,
// tables, markdown as text), errors and file lists. HTML from user code is
// never parsed into the page as markup: safeHTML rebuilds it from an
// allowlist of elements and attributes, so no script, handler, style or
// link survives.

// el creates an element with attributes and children.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

const ALLOWED = new Set(["table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "colgroup", "col",
  "div", "span", "p", "br", "hr", "b", "i", "em", "strong", "code", "pre", "small", "sub", "sup",
  "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "dl", "dt", "dd", "blockquote"]);
const ALLOWED_ATTRS = new Set(["colspan", "rowspan", "class", "title", "align"]);
// Their content is dropped with them, not kept as text.
const DROPPED = new Set(["script", "style", "template", "iframe", "object", "embed", "noscript", "svg", "math"]);

// safeHTML parses html inertly (DOMParser runs no script and loads
// nothing) and copies only allowed elements and attributes into a
// fragment of this document; unknown elements keep their text.
export function safeHTML(html) {
  const parsed = new DOMParser().parseFromString(html, "text/html");
  const out = document.createDocumentFragment();
  const copy = (from, to) => {
    for (const n of from.childNodes) {
      if (n.nodeType === Node.TEXT_NODE) {
        to.append(document.createTextNode(n.nodeValue));
      } else if (n.nodeType === Node.ELEMENT_NODE) {
        const tag = n.localName;
        if (DROPPED.has(tag)) continue;
        if (!ALLOWED.has(tag)) { copy(n, to); continue; }
        const e = document.createElement(tag);
        for (const a of n.attributes) {
          if (ALLOWED_ATTRS.has(a.name) && /^[\w\s.:-]*$/.test(a.value)) e.setAttribute(a.name, a.value);
        }
        copy(n, e);
        to.append(e);
      }
    }
  };
  copy(parsed.body, out);
  return out;
}

// textOf is a MIME bundle entry as text (an array of lines is joined).
function textOf(v) { return Array.isArray(v) ? v.join("") : String(v); }

// renderOutput renders one output ({type, data}) by its richest safe type.
export function renderOutput(o) {
  const d = o.data || {};
  const box = el("div", { class: "output output-" + (o.type || "display") });
  if (d["image/png"] || d["image/jpeg"]) {
    const mime = d["image/png"] ? "image/png" : "image/jpeg";
    box.append(el("img", { src: `data:${mime};base64,${textOf(d[mime]).trim()}`, alt: d["text/plain"] ? textOf(d["text/plain"]) : "plot" }));
  } else if (d["image/svg+xml"]) {
    // An SVG as an image runs no script and loads nothing.
    const url = URL.createObjectURL(new Blob([textOf(d["image/svg+xml"])], { type: "image/svg+xml" }));
    box.append(el("img", { src: url, alt: d["text/plain"] ? textOf(d["text/plain"]) : "figure", onload: () => URL.revokeObjectURL(url) }));
  } else if (d["text/html"]) {
    const html = el("div", { class: "html-output" });
    html.append(safeHTML(textOf(d["text/html"])));
    box.append(html);
  } else if (d["text/markdown"] || d["text/latex"] || d["text/plain"] !== undefined) {
    box.append(el("pre", { text: textOf(d["text/markdown"] || d["text/latex"] || d["text/plain"]) }));
  } else if (d["application/json"] !== undefined) {
    box.append(el("pre", { text: JSON.stringify(d["application/json"], null, 2) }));
  }
  return box;
}

// Console is the live stdout/stderr view: text is appended as it arrives.
export class Console {
  constructor(pre) { this.pre = pre; }
  clear() { this.pre.replaceChildren(); }
  append(stream, text) {
    const last = this.pre.lastElementChild;
    if (last && last.dataset.stream === stream) {
      last.textContent += text;
    } else {
      this.pre.append(el("span", { class: "stream-" + stream, "data-stream": stream, text }));
    }
    this.pre.scrollTop = this.pre.scrollHeight;
  }
}

// describeError is the one-line summary of a failed or raising result.
export function describeError(r) {
  if (r.status === "killed") return "Stopped: the run was killed.";
  if (r.status === "failed") return "Failed" + (r.reason ? ` (${r.reason})` : "") + ": " + (r.error || "no reason given");
  if (r.error_type || (r.exit_code && r.exit_code !== 0)) {
    const where = r.error_line ? ` on line ${r.error_line}` : "";
    return `${r.error_type || "Error"}${where}: ${r.error || "exit code " + r.exit_code}`;
  }
  return "";
}

// statusText is the status line of a finished result.
export function statusText(r) {
  const parts = [r.status];
  if (r.exit_code !== undefined) parts.push("exit " + r.exit_code);
  if (r.duration_ms !== undefined) parts.push(r.duration_ms + " ms");
  if (r.python_version) parts.push("Python " + r.python_version);
  return parts.join(" · ");
}
