// preview.js is the notebook's preview frame: it shares a port of the
// session (POST …/ports/{port}/share) and shows the app there in a frame,
// with a link to open it in a tab and a button that revokes the URL. A
// preview on the API's own origin (isolation "sandbox") is framed without
// allow-same-origin, as the server's Content-Security-Policy: sandbox
// serves it, so its script runs in an opaque origin and can neither read
// this page's storage (the API key) nor call the API as this origin. On a
// preview host the app has an origin other than this page's, so it keeps
// its own (its cookies and storage work).
const $ = (id) => document.getElementById(id);

// SANDBOX is what a framed app may do, whatever its origin.
const SANDBOX = "allow-scripts allow-forms allow-popups allow-modals allow-downloads";

// validPort is the spelling the server accepts: 1–65535, digits only, no
// leading zero (anything else is its 400).
export function validPort(text) {
  return /^[1-9][0-9]{0,4}$/.test(text) && Number(text) <= 65535;
}

export class PreviewFrame {
  constructor(api) {
    this.api = api;
    this.on = false; // the server has --preview
    this.session = null;
    this.shared = null; // {port, url} of the preview shown
    $("nb-preview-form").addEventListener("submit", (e) => { e.preventDefault(); this.open($("nb-port").value.trim()); });
    $("nb-preview-revoke").addEventListener("click", () => this.revoke());
  }

  show(health) {
    this.on = !!health.previews;
    this.sync();
  }

  // setSession follows the notebook's session: the preview goes with it.
  setSession(id) {
    if (id !== this.session) this.clear("");
    this.session = id;
    this.sync();
  }

  sync() { $("nb-preview").hidden = !(this.on && this.session); }

  status(text) { $("nb-preview-status").textContent = text; }

  clear(text) {
    this.shared = null;
    const frame = $("nb-preview-frame");
    frame.removeAttribute("src");
    frame.hidden = true;
    $("nb-preview-link").hidden = true;
    $("nb-preview-revoke").hidden = true;
    this.status(text);
  }

  async open(port) {
    if (!this.session) return;
    if (!validPort(port)) {
      this.status(`"${port}" is not a port: want 1 to 65535, digits only.`);
      return;
    }
    if (this.shared) await this.revoke();
    this.status(`Sharing port ${port}…`);
    let sh;
    try {
      sh = await this.api.json("POST", `/api/v1/sessions/${this.session}/ports/${port}/share`);
    } catch (e) {
      this.status(`Cannot share port ${port}: ${e.message}`);
      return;
    }
    const url = new URL(sh.url, location.origin).href;
    this.shared = { port, url };
    const frame = $("nb-preview-frame");
    // The sandbox is set before the frame loads anything.
    frame.setAttribute("sandbox", sh.isolation === "sandbox" ? SANDBOX : SANDBOX + " allow-same-origin");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.src = url;
    frame.hidden = false;
    const link = $("nb-preview-link");
    link.href = url;
    link.hidden = false;
    $("nb-preview-revoke").hidden = false;
    this.status(`Port ${port}, ${sh.isolation === "sandbox" ? "sandboxed on this origin" : "on the preview host"}; ` +
      `the link works without the key until ${new Date(sh.expires_at).toLocaleTimeString()}.`);
  }

  async revoke() {
    if (!this.shared || !this.session) return;
    const { port } = this.shared;
    try {
      await this.api.json("DELETE", `/api/v1/sessions/${this.session}/ports/${port}/share`);
      this.clear(`The preview of port ${port} is revoked.`);
    } catch (e) {
      this.status(`Revoke failed: ${e.message}`);
    }
  }
}
