// workspace.js is the workspace picker and file browser: it lists the
// key's workspaces, creates one, and shows the files of the chosen one
// (download, upload, delete) with its version. The chosen workspace and
// its mode go into the next runs (config.workspace) and the next session
// (workspace); the page refreshes the list when a run or a session that
// used it ends, since that is when its changes are committed.
import { el } from "./render.js";

const $ = (id) => document.getElementById(id);
const CHOICE_STORAGE = "pyexec.workspace";

export class WorkspacePanel {
  constructor(api) {
    this.api = api;
    this.on = false; // the server keeps workspaces
    $("ws-pick").addEventListener("change", () => this.choose($("ws-pick").value));
    $("ws-mode").addEventListener("change", () => this.remember());
    $("ws-new-form").addEventListener("submit", (e) => { e.preventDefault(); this.create(); });
    $("ws-refresh").addEventListener("click", () => this.refresh());
    $("ws-upload").addEventListener("change", (e) => this.upload(e.target.files));
  }

  get name() { return this.on ? $("ws-pick").value : ""; }
  get mode() { return $("ws-mode").value; }

  // config adds the chosen workspace to an execution's config or a
  // session's body (the field names are the same).
  config(into) {
    if (!this.name) return into;
    into.workspace = this.name;
    if (this.mode === "ro") into.workspace_mode = "ro";
    return into;
  }

  status(text) { $("ws-status").textContent = text; }

  remember() {
    localStorage.setItem(CHOICE_STORAGE, JSON.stringify({ name: $("ws-pick").value, mode: this.mode }));
  }

  // show is called once the page knows /health: without workspaces the
  // picker stays hidden and runs name none.
  async show(health) {
    this.on = !!(health.workspaces && health.workspaces.state === "ok");
    $("ws-bar").hidden = !this.on;
    if (!this.on) return;
    let saved = {};
    try { saved = JSON.parse(localStorage.getItem(CHOICE_STORAGE) || "{}"); } catch { /* a bad value: none */ }
    if (saved.mode === "ro") $("ws-mode").value = "ro";
    await this.load(saved.name || "");
  }

  // load lists the key's workspaces into the picker and selects want
  // when it is one of them.
  async load(want) {
    let list;
    try {
      ({ workspaces: list } = await this.api.json("GET", "/api/v1/workspaces"));
    } catch (e) {
      this.status("Cannot list workspaces: " + e.message);
      return;
    }
    $("ws-pick").replaceChildren(el("option", { value: "", text: "none" }),
      ...list.map((w) => el("option", { value: w.name, text: w.name })));
    $("ws-pick").value = list.some((w) => w.name === want) ? want : "";
    await this.choose($("ws-pick").value);
  }

  async choose(name) {
    $("ws-pick").value = name;
    this.remember();
    $("ws-browser").hidden = !name;
    if (name) await this.refresh();
    else this.status("");
  }

  async create() {
    const name = $("ws-new").value.trim();
    if (!name) return;
    try {
      await this.api.json("POST", "/api/v1/workspaces", { json: { name } });
    } catch (e) {
      this.status(`Cannot create ${name}: ${e.message}`);
      return;
    }
    $("ws-new").value = "";
    await this.load(name);
  }

  path(rest = "") {
    return `/api/v1/workspaces/${encodeURIComponent(this.name)}${rest}`;
  }

  fileURL(p) {
    return this.path("/files/" + p.split("/").map(encodeURIComponent).join("/"));
  }

  // refresh shows the current version and its files.
  async refresh() {
    const name = this.name;
    if (!name) return;
    try {
      const [info, { files }] = await Promise.all([this.api.json("GET", this.path()), this.api.json("GET", this.path("/files"))]);
      if (name !== this.name) return;
      $("ws-version").textContent = `version ${info.version} · ${info.files} file${info.files === 1 ? "" : "s"} · ${info.bytes} bytes`;
      $("ws-files").replaceChildren(...files.filter((f) => f.type === "file").map((f) => el("li", { "data-path": f.path },
        el("span", { class: "ws-path", text: f.path }), ` ${f.size} bytes `,
        el("button", { type: "button", "aria-label": "Download " + f.path, onclick: () => this.api.download(this.fileURL(f.path), f.path.split("/").pop()) }, "Download"),
        el("button", { type: "button", "aria-label": "Delete " + f.path, onclick: () => this.remove(f.path) }, "Delete"))));
      $("ws-empty").hidden = files.length > 0;
    } catch (e) {
      this.status(`Cannot show ${name}: ${e.message}`);
    }
  }

  // changed is called when a run or session that used the workspace
  // ended: it refreshes the list if that workspace is still shown.
  changed(name) {
    if (name && name === this.name) return this.refresh();
  }

  async upload(list) {
    for (const f of list) {
      try {
        const c = await this.api.json("PUT", this.fileURL(f.name), { body: f });
        this.status(`Uploaded ${f.name}: version ${c.version}.`);
      } catch (e) {
        this.status(`Upload of ${f.name} failed: ${e.message}`);
      }
    }
    $("ws-upload").value = "";
    await this.refresh();
  }

  async remove(p) {
    try {
      const c = await this.api.json("DELETE", this.fileURL(p));
      this.status(`Deleted ${p}: version ${c.version}.`);
    } catch (e) {
      this.status(`Delete of ${p} failed: ${e.message}`);
    }
    await this.refresh();
  }
}
