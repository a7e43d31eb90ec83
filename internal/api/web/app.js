// app.js is the playground page: it learns from /health what the server
// offers (interpreters, timeout cap, sessions, whether a key is needed),
// offers the workspace picker when the server keeps workspaces, routes
// between the script view, the notebook and a shared execution
// (#/executions/<id>), and runs scripts with live output.
import { Api, ApiError, tarOf, utf8 } from "./api.js";
import { createEditor } from "./editor.js";

// nonce is this page's Content-Security-Policy nonce, for the editor's styles.
const nonce = document.querySelector('meta[name="csp-nonce"]').content;
import { Console, describeError, el, renderOutput, statusText } from "./render.js";
import { Notebook } from "./notebook.js";
import { WorkspacePanel } from "./workspace.js";

// SOURCE_COPY is where a run keeps a copy of its code, so that a shared
// link can show it: a file the run creates is returned as an artifact.
const SOURCE_COPY = ".playground/main.py";
// LINT_RULES are the ruff rules the editor marks: errors, pyflakes and
// warnings, not every style rule the server may select.
const LINT_RULES = ["E", "F", "W"];
const SAMPLE = `import time

for i in range(3):
    print("step", i, flush=True)
    time.sleep(0.5)

print("done")
`;

const $ = (id) => document.getElementById(id);

class Playground {
  constructor() {
    this.api = new Api((msg) => this.askKey(msg));
    this.health = null;
    this.uploads = new Map(); // name → Uint8Array
    this.running = null; // {id} of the run in progress
    this.lintOn = true;
    this.lintTimer = 0;
    this.console = new Console($("console"));
    this.editor = createEditor($("editor"), {
      doc: localStorage.getItem("pyexec.code") || SAMPLE, onRun: () => this.run(), onChange: () => this.codeChanged(), nonce,
    });
    this.workspaces = new WorkspacePanel(this.api);
    this.notebook = new Notebook(this.api, this.workspaces);
    this.bind();
  }

  bind() {
    $("skip").addEventListener("click", () => this.editor.focus());
    $("run").addEventListener("click", () => this.run());
    $("stop").addEventListener("click", () => this.stop());
    $("upload").addEventListener("change", (e) => this.addUploads(e.target.files));
    $("key-form").addEventListener("submit", (e) => { e.preventDefault(); this.saveKey(); });
    $("key-forget").addEventListener("click", () => { this.api.key = ""; $("key-input").value = ""; this.askKey("Key forgotten."); });
    $("key-change").addEventListener("click", () => this.askKey(""));
    window.addEventListener("hashchange", () => this.route());
  }

  async start() {
    try {
      const resp = await fetch("/health");
      this.health = await resp.json();
    } catch (e) {
      $("status").textContent = "Cannot reach the server: " + e.message;
      return;
    }
    this.fillPickers();
    const h = this.health;
    $("server-info").textContent = `${h.version || ""} · ${h.isolation || ""}${h.unsafe_no_isolation ? " (NO ISOLATION)" : ""}`;
    $("key-change").hidden = !h.auth_required;
    if (h.auth_required && !this.api.key) {
      this.askKey("");
      return;
    }
    this.route();
  }

  fillPickers() {
    const h = this.health;
    const py = $("python");
    py.replaceChildren(el("option", { value: "", text: `default${h.default_python ? " (" + h.default_python + ")" : ""}` }),
      ...(h.python_versions || []).map((v) => el("option", { value: v, text: v })));
    const max = h.max_timeout_seconds || 300;
    const t = $("timeout");
    t.replaceChildren(el("option", { value: "0", text: "default" }),
      ...[5, 10, 30, 60, 120, 300, 600].filter((s) => s <= max).map((s) => el("option", { value: s, text: s + " s" })));
  }

  askKey(message) {
    $("key-panel").hidden = false;
    $("settings").hidden = true;
    $("ws-bar").hidden = true;
    $("script-view").hidden = true;
    $("notebook-view").hidden = true;
    $("key-message").textContent = message;
    $("key-input").focus();
  }

  async saveKey() {
    this.api.key = $("key-input").value.trim();
    try {
      await this.api.fetch("GET", "/api/v1/executions?limit=1");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // askKey shows why
      $("key-message").textContent = e.message;
      return;
    }
    $("key-panel").hidden = true;
    $("key-input").value = "";
    this.route();
  }

  route() {
    if (!$("key-panel").hidden) return;
    const hash = location.hash.replace(/^#/, "") || "/";
    const notebook = hash === "/notebook";
    $("settings").hidden = false;
    this.workspaces.show(this.health);
    $("script-view").hidden = notebook;
    $("notebook-view").hidden = !notebook;
    $("nav-script").toggleAttribute("aria-current", !notebook);
    $("nav-notebook").toggleAttribute("aria-current", notebook);
    if (notebook) {
      this.notebook.show(this.health);
      return;
    }
    const m = hash.match(/^\/executions\/([\w-]+)$/);
    if (m) this.showExecution(m[1]);
    else $("share-banner").hidden = true;
    this.codeChanged();
  }

  codeChanged() {
    localStorage.setItem("pyexec.code", this.editor.value);
    clearTimeout(this.lintTimer);
    if (this.lintOn) this.lintTimer = setTimeout(() => this.lint(), 500);
  }

  // lint asks the server for ruff's diagnostics; a server without ruff
  // answers 400 once and the page stops asking (no markers, no noise).
  async lint() {
    const code = this.editor.value;
    if (!code.trim()) { this.editor.setLint([]); return; }
    try {
      const r = await this.api.json("POST", "/api/v1/lint", { json: { code, select: LINT_RULES } });
      if (code !== this.editor.value) return;
      this.editor.setLint(r.map((d) => ({
        line: d.location.line, column: d.location.column,
        end_line: d.end_location.line, end_column: d.end_location.column, code: d.code, message: `${d.code} ${d.message}`,
      })));
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) this.lintOn = false;
    }
  }

  async addUploads(list) {
    for (const f of list) this.uploads.set(f.name, new Uint8Array(await f.arrayBuffer()));
    this.showUploads();
  }

  showUploads() {
    $("uploads").replaceChildren(...[...this.uploads].map(([name, data]) => el("li", {},
      `${name} (${data.length} bytes) `,
      el("button", { type: "button", "aria-label": "Remove " + name, onclick: () => { this.uploads.delete(name); this.showUploads(); } }, "Remove"))));
  }

  resetResult() {
    this.console.clear();
    $("outputs").replaceChildren();
    $("error").hidden = true;
    $("files").hidden = true;
    $("share").hidden = true;
    $("install").hidden = true;
    $("install-log").textContent = "";
    this.editor.markError(0);
  }

  setRunning(on) {
    $("run").disabled = on;
    $("stop").disabled = !on;
    document.body.classList.toggle("busy", on);
  }

  // follow streams a running execution's events into the result panel,
  // then shows its final record.
  async follow(id, workspace = "") {
    this.running = { id };
    this.setRunning(true);
    $("status").textContent = "Running…";
    try {
      for await (const ev of this.api.events(id)) this.onEvent(ev);
      await this.showResult(await this.api.json("GET", `/api/v1/executions/${id}`), false);
    } catch (e) {
      $("status").textContent = "Error: " + e.message;
    } finally {
      this.running = null;
      this.setRunning(false);
      if (workspace) this.workspaces.changed(workspace);
    }
  }

  async run() {
    if (this.running || $("script-view").hidden) return;
    this.resetResult();
    $("share-banner").hidden = true;
    if (location.hash.startsWith("#/executions/")) history.replaceState(null, "", "#/");
    const files = [{ name: "main.py", data: utf8(this.editor.value) }];
    for (const [name, data] of this.uploads) if (name !== "main.py") files.push({ name, data });
    const meta = { entrypoint: "main.py", pre_commands: [`mkdir -p .playground && cp main.py ${SOURCE_COPY}`] };
    const py = $("python").value;
    if (py) meta.docker_image = "python:" + py;
    const timeout = Number($("timeout").value);
    meta.config = this.workspaces.config(timeout ? { timeout_seconds: timeout } : {});
    const reqs = $("requirements").value.trim();
    if (reqs) meta.requirements_txt = reqs;
    const form = new FormData();
    form.append("metadata", JSON.stringify(meta));
    // Held while submitting, so that a second Ctrl+Enter does nothing.
    this.running = { id: "" };
    this.setRunning(true);
    $("status").textContent = "Submitting…";
    let id;
    try {
      form.append("tar", tarOf(files), "code.tar");
      ({ execution_id: id } = await this.api.json("POST", "/api/v1/exec/async", { body: form }));
    } catch (e) {
      $("status").textContent = "Error: " + e.message;
      this.running = null;
      this.setRunning(false);
      return;
    }
    await this.follow(id, meta.config.workspace);
  }

  onEvent(ev) {
    switch (ev.type) {
      case "stdout":
      case "stderr":
        this.console.append(ev.type, ev.data);
        break;
      case "install":
        $("install").hidden = false;
        $("install").open = true;
        $("install-log").textContent += ev.data.endsWith("\n") ? ev.data : ev.data + "\n";
        $("status").textContent = "Installing packages…";
        break;
      case "display":
        $("outputs").append(renderOutput(JSON.parse(ev.data)));
        break;
      case "status":
        $("status").textContent = ev.data === "running" ? "Running…" : ev.data;
        break;
    }
  }

  async stop() {
    if (!this.running || !this.running.id) return;
    $("status").textContent = "Stopping…";
    try {
      await this.api.json("DELETE", `/api/v1/executions/${this.running.id}`);
    } catch (e) {
      $("status").textContent = "Stop failed: " + e.message;
    }
  }

  // showResult renders a finished execution. The live view already has
  // the output; a shared one (fromRecord) draws it from the record.
  async showResult(r, fromRecord) {
    $("status").textContent = statusText(r);
    if (fromRecord) {
      if (r.stdout) this.console.append("stdout", r.stdout);
      if (r.stderr) this.console.append("stderr", r.stderr);
      for (const o of r.outputs || []) $("outputs").append(renderOutput(o));
    } else if (!$("outputs").childElementCount) {
      for (const o of r.outputs || []) $("outputs").append(renderOutput(o));
    }
    const err = describeError(r);
    if (err) {
      $("error").hidden = false;
      $("error").textContent = err;
      if (r.error_line) this.editor.markError(r.error_line);
    }
    const files = (r.files || []).filter((f) => !f.path.startsWith(".playground/"));
    if (files.length) {
      $("files").hidden = false;
      $("file-list").replaceChildren(...files.map((f) => el("li", {},
        el("button", { type: "button", onclick: () => this.api.download(`/api/v1/executions/${r.execution_id}/files/${f.path}`, f.path.split("/").pop()) },
          "Download " + f.path), ` ${f.size} bytes, ${f.mime || ""}`)));
    }
    const link = `${location.origin}/#/executions/${r.execution_id}`;
    $("share-link").href = link;
    $("share-link").textContent = link;
    $("share").hidden = false;
  }

  // showExecution loads a past execution for #/executions/<id>.
  async showExecution(id) {
    if (this.running) return;
    this.resetResult();
    $("status").textContent = "Loading " + id + "…";
    try {
      const r = await this.api.json("GET", `/api/v1/executions/${id}`);
      let code = "";
      if ((r.files || []).some((f) => f.path === SOURCE_COPY)) {
        code = await (await this.api.fetch("GET", `/api/v1/executions/${id}/files/${SOURCE_COPY}`)).text();
      }
      $("share-banner").hidden = false;
      $("share-banner").textContent = `Execution ${id}` + (code ? "" : " (its code was not sent from the playground, so it is not shown)");
      if (code) this.editor.value = code;
      if (r.status === "pending" || r.status === "running") await this.follow(id);
      else await this.showResult(r, true);
    } catch (e) {
      $("status").textContent = `Cannot show ${id}: ${e.message}`;
    }
  }
}

new Playground().start();
