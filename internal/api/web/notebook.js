// notebook.js is the notebook mode: cells run one by one in a session
// (a Python interpreter kept alive by the server), so variables survive
// from cell to cell until a restart. The notebook keeps a list of the
// sessions it opened (a start, a fork, a restore: snapshots.js); cells run
// in the one chosen.
import { createEditor } from "./editor.js";

// nonce is this page's Content-Security-Policy nonce, for the editor's styles.
const nonce = document.querySelector('meta[name="csp-nonce"]').content;
import { describeError, el, renderOutput } from "./render.js";
import { PreviewFrame } from "./preview.js";
import { Snapshots } from "./snapshots.js";

const $ = (id) => document.getElementById(id);

export class Notebook {
  constructor(api, workspaces) {
    this.api = api;
    this.workspaces = workspaces; // the picker: the workspace a new session mounts
    this.sessionWorkspace = ""; // the workspace the session has mounted
    this.preview = new PreviewFrame(api);
    this.session = null; // session id: the one cells run in
    this.open = new Map(); // the sessions of the notebook: id → {workspace}
    this.health = null;
    this.cells = [];
    this.running = null; // the cell running now
    this.nextNumber = 1;
    $("nb-start").addEventListener("click", () => this.startSession());
    $("nb-run-all").addEventListener("click", () => this.runAll());
    $("nb-interrupt").addEventListener("click", () => this.call("interrupt", "Interrupt sent."));
    $("nb-restart").addEventListener("click", () => this.restart());
    $("nb-end").addEventListener("click", () => this.end());
    $("nb-add").addEventListener("click", () => this.addCell("").editor.focus());
    $("nb-upload").addEventListener("change", (e) => this.upload(e.target.files));
    $("nb-sessions").addEventListener("change", (e) => this.switchTo(e.target.value));
    this.snapshots = new Snapshots(api, this);
  }

  show(health) {
    this.health = health;
    this.preview.show(health);
    if (!health.sessions) {
      this.status("This server does not offer sessions, so the notebook is unavailable.");
      $("nb-start").disabled = true;
    } else {
      this.snapshots.refresh();
    }
    if (!this.cells.length) {
      this.addCell("x = 21");
      this.addCell("x * 2");
    }
  }

  status(text) { $("nb-status").textContent = text; }

  setSession(id, workspace = "") {
    if (!id && this.sessionWorkspace) this.workspaces.changed(this.sessionWorkspace); // its changes are committed
    if (id !== this.session) for (const c of this.cells) c.count.textContent = "[ ]"; // counts were the other session's
    this.session = id;
    this.sessionWorkspace = workspace;
    this.preview.setSession(id);
    for (const b of ["nb-run-all", "nb-interrupt", "nb-restart", "nb-end", "nb-upload", "nb-save", "nb-fork"]) $(b).disabled = !id;
    $("nb-start").disabled = !!id;
    $("nb-sessions").disabled = this.open.size < 2;
    if (id) $("nb-sessions").value = id;
  }

  // openSession adds a session to the notebook's list and runs cells in it
  // from now on; the others stay in the list.
  openSession(id, label, workspace = "") {
    this.open.set(id, { workspace });
    $("nb-sessions").append(el("option", { value: id, text: `${id} (${label})` }));
    this.setSession(id, workspace);
  }

  switchTo(id) {
    if (!this.open.has(id) || id === this.session) return;
    this.setSession(id, this.open.get(id).workspace);
    this.status(`Cells now run in session ${id}.`);
  }

  // dropSession takes the current session (ended) off the list and goes
  // on in another one of the notebook, if any.
  dropSession() {
    const id = this.session;
    this.open.delete(id);
    for (const o of $("nb-sessions").options) if (o.value === id) o.remove();
    this.setSession(null);
    const [next] = this.open.keys();
    if (next) this.setSession(next, this.open.get(next).workspace);
  }

  addCell(code) {
    const n = this.nextNumber++;
    const count = el("span", { class: "count", title: "Execution count" }, "[ ]");
    const output = el("div", { class: "cell-output", "aria-live": "polite", "aria-label": `Cell ${n} output` });
    const edBox = el("div", { class: "editor cell-editor" });
    const cell = { n, count, output, editor: null, li: null };
    const run = el("button", { type: "button", class: "cell-run", "aria-label": `Run cell ${n}`, onclick: () => this.runCell(cell) }, "Run");
    const remove = el("button", { type: "button", "aria-label": `Delete cell ${n}`, onclick: () => this.removeCell(cell) }, "Delete");
    cell.li = el("li", { class: "cell", "data-cell": n, "aria-label": `Cell ${n}` },
      el("div", { class: "cell-head" }, count, run, remove), edBox, output);
    $("cells").append(cell.li);
    cell.editor = createEditor(edBox, { doc: code, onRun: () => this.runCell(cell), label: `Cell ${n} code`, nonce });
    this.cells.push(cell);
    return cell;
  }

  removeCell(cell) {
    cell.li.remove();
    this.cells = this.cells.filter((c) => c !== cell);
  }

  async startSession() {
    const body = this.workspaces.config({});
    const py = $("python").value;
    if (py) body.python_version = py;
    const reqs = $("requirements").value.trim();
    if (reqs) body.requirements = reqs;
    this.status("Starting a session…");
    $("nb-start").disabled = true;
    try {
      const s = await this.api.json("POST", "/api/v1/sessions", { json: body });
      this.openSession(s.session_id, "started here", body.workspace);
      this.status(`Session ${s.session_id} is ready.` + (body.workspace ? ` /workspace is ${body.workspace}` +
        (body.workspace_mode === "ro" ? " (read-only)." : "; its changes are kept when the session ends.") : ""));
    } catch (e) {
      $("nb-start").disabled = false;
      this.status("Cannot start a session: " + e.message);
    }
  }

  async runCell(cell) {
    if (!this.session) await this.startSession();
    if (!this.session || this.running) return false;
    this.running = cell;
    cell.count.textContent = "[*]";
    cell.output.replaceChildren();
    cell.editor.markError(0);
    cell.li.classList.add("running");
    const body = { code: cell.editor.value };
    const timeout = Number($("timeout").value);
    if (timeout) body.timeout_seconds = timeout;
    let ok = false;
    try {
      const r = await this.api.json("POST", `/api/v1/sessions/${this.session}/execute`, { json: body });
      cell.count.textContent = `[${r.execution_count ?? " "}]`;
      if (r.stdout) cell.output.append(el("pre", { class: "stream-stdout", text: r.stdout }));
      if (r.stderr) cell.output.append(el("pre", { class: "stream-stderr", text: r.stderr }));
      for (const o of r.outputs || []) cell.output.append(renderOutput(o));
      const err = describeError(r);
      if (err) {
        cell.output.append(el("div", { class: "error", role: "alert", text: err }));
        if (r.error_line) cell.editor.markError(r.error_line);
      }
      ok = !err;
      if (r.session_ended) {
        this.dropSession();
        this.status(this.session ? `The session ended; cells now run in ${this.session}.` : "The session ended; start a new one to go on.");
      }
    } catch (e) {
      cell.count.textContent = "[ ]";
      cell.output.append(el("div", { class: "error", role: "alert", text: e.message }));
      if (e.status === 404 || e.status === 410) this.dropSession();
    } finally {
      cell.li.classList.remove("running");
      this.running = null;
    }
    return ok;
  }

  async runAll() {
    for (const cell of this.cells) {
      if (!(await this.runCell(cell))) break;
    }
  }

  async call(action, done) {
    try {
      await this.api.json("POST", `/api/v1/sessions/${this.session}/${action}`);
      this.status(done);
      return true;
    } catch (e) {
      this.status(`${action} failed: ${e.message}`);
      return false;
    }
  }

  async restart() {
    this.status("Restarting…");
    if (await this.call("restart", "Restarted: variables are gone, files are kept.")) {
      for (const c of this.cells) c.count.textContent = "[ ]";
    }
  }

  async end() {
    try {
      await this.api.json("DELETE", `/api/v1/sessions/${this.session}`);
    } catch (e) {
      this.status("End failed: " + e.message);
    }
    const ended = this.session;
    this.dropSession();
    this.status(this.session ? `Session ${ended} ended; cells now run in ${this.session}.` : "Session ended.");
  }

  async upload(list) {
    for (const f of list) {
      try {
        await this.api.fetch("PUT", `/api/v1/sessions/${this.session}/files/${encodeURIComponent(f.name)}`, { body: f });
        this.status(`Uploaded ${f.name}.`);
      } catch (e) {
        this.status(`Upload of ${f.name} failed: ${e.message}`);
      }
    }
  }
}
