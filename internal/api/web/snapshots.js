// snapshots.js is the notebook's snapshots: save the current session's
// state as a snapshot, fork the session into a second one, list the key's
// snapshots, restore one into a new session, delete one. The sessions it
// makes join the notebook's list (Notebook.openSession), so the one they
// came from stays reachable.
import { el } from "./render.js";

const $ = (id) => document.getElementById(id);

// size says n bytes in the unit a reader takes in at a glance.
export function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

// skippedText names what a snapshot left out, or a restore could not
// load, and why; "" when nothing was.
function skippedText(skipped) {
  if (!skipped || !skipped.length) return "";
  return " Not kept: " + skipped.map((v) => `${v.name} (${v.reason})`).join(", ") + ".";
}

export class Snapshots {
  constructor(api, notebook) {
    this.api = api;
    this.notebook = notebook;
    $("nb-save").addEventListener("click", () => this.save());
    $("nb-fork").addEventListener("click", () => this.fork());
    $("nb-snap-refresh").addEventListener("click", () => this.refresh());
  }

  status(text) { this.notebook.status(text); }

  async save() {
    const id = this.notebook.session;
    this.status("Saving a snapshot…");
    try {
      const s = await this.api.json("POST", `/api/v1/sessions/${encodeURIComponent(id)}/snapshot`);
      this.status(`Saved snapshot ${s.snapshot_id} of ${id} (${size(s.bytes)}).` + skippedText(s.skipped));
      await this.refresh();
    } catch (e) {
      this.status("Save failed: " + e.message);
    }
  }

  async fork() {
    const parent = this.notebook.session;
    this.status("Forking…");
    try {
      const s = await this.api.json("POST", `/api/v1/sessions/${encodeURIComponent(parent)}/fork`);
      this.notebook.openSession(s.session_id, `fork of ${parent}`, this.notebook.sessionWorkspace);
      this.status(`Forked ${parent} into ${s.session_id}; cells now run in the fork. ${parent} is still in the session list.` +
        skippedText(s.skipped));
    } catch (e) {
      this.status("Fork failed: " + e.message);
    }
  }

  async restore(snap) {
    this.status(`Restoring ${snap.snapshot_id}…`);
    try {
      const s = await this.api.json("POST", "/api/v1/sessions", { json: { from_snapshot: snap.snapshot_id } });
      this.notebook.openSession(s.session_id, `restored from ${snap.snapshot_id}`);
      this.status(`Restored ${snap.snapshot_id} into session ${s.session_id}.` + skippedText(s.skipped));
    } catch (e) {
      this.status("Restore failed: " + e.message);
    }
  }

  async remove(snap) {
    try {
      await this.api.json("DELETE", `/api/v1/snapshots/${encodeURIComponent(snap.snapshot_id)}`);
      this.status(`Deleted snapshot ${snap.snapshot_id}.`);
    } catch (e) {
      this.status("Delete failed: " + e.message);
    }
    await this.refresh();
  }

  // refresh lists the key's snapshots, newest first, each with Restore
  // and Delete.
  async refresh() {
    const list = $("nb-snap-list");
    let snaps;
    try {
      snaps = (await this.api.json("GET", "/api/v1/snapshots")).snapshots || [];
    } catch (e) {
      list.replaceChildren(el("li", { class: "muted", text: "Snapshots are not available: " + e.message }));
      return;
    }
    snaps.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    if (!snaps.length) {
      list.replaceChildren(el("li", { class: "muted", text: "No snapshot yet: Save snapshot keeps the session's variables and files." }));
      return;
    }
    list.replaceChildren(...snaps.map((s) => el("li", { "data-snapshot": s.snapshot_id },
      el("span", { class: "ws-path", text: s.snapshot_id }),
      el("span", { class: "muted", text: ` ${size(s.bytes)}, ${s.execution_count} cells, of ${s.session_id}, ${new Date(s.created_at).toLocaleString()} ` }),
      el("button", { type: "button", class: "snap-restore", "aria-label": `Restore ${s.snapshot_id}`, onclick: () => this.restore(s) }, "Restore"),
      el("button", { type: "button", class: "snap-delete", "aria-label": `Delete ${s.snapshot_id}`, onclick: () => this.remove(s) }, "Delete"))));
  }
}
