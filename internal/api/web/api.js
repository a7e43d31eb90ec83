// api.js talks to the pyexec API of the page's own origin: JSON calls
// with the API key, live events (SSE over fetch, since EventSource cannot
// send a key), downloads, and the tar a multipart run needs.

const KEY_STORAGE = "pyexec.apiKey";

// ApiError is a non-2xx answer: the status and the server's message.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  // onUnauthorized is called on every 401, so the page can ask for a key.
  constructor(onUnauthorized) {
    this.onUnauthorized = onUnauthorized;
  }

  get key() { return localStorage.getItem(KEY_STORAGE) || ""; }
  set key(value) {
    if (value) localStorage.setItem(KEY_STORAGE, value);
    else localStorage.removeItem(KEY_STORAGE);
  }

  headers(extra = {}) {
    const h = { ...extra };
    if (this.key) h.Authorization = "Bearer " + this.key;
    return h;
  }

  // fetch sends a request and throws an ApiError for any non-2xx answer.
  async fetch(method, path, { json, body, headers = {} } = {}) {
    const init = { method, headers: this.headers(headers) };
    if (json !== undefined) {
      init.body = JSON.stringify(json);
      init.headers["Content-Type"] = "application/json";
    } else if (body !== undefined) {
      init.body = body;
    }
    const resp = await fetch(path, init);
    if (!resp.ok) {
      let message = resp.statusText || "HTTP " + resp.status;
      try {
        const e = await resp.json();
        if (e && e.error) message = e.error;
      } catch { /* not JSON: keep the status text */ }
      if (resp.status === 401) this.onUnauthorized(message);
      throw new ApiError(resp.status, message);
    }
    return resp;
  }

  async json(method, path, opts) {
    const resp = await this.fetch(method, path, opts);
    return resp.status === 204 ? null : resp.json();
  }

  // events yields the live events of an execution ({seq, type, data})
  // until its final status; it resumes after the last seq when the stream
  // breaks off, up to a few times.
  async *events(id) {
    let after = 0;
    for (let attempt = 1; ; attempt++) {
      const resp = await this.fetch("GET", `/api/v1/executions/${encodeURIComponent(id)}/events?after=${after}`,
        { headers: { Accept: "text/event-stream" } });
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (e) {
          if (attempt >= 5) throw e;
          break; // the connection dropped: resume
        }
        if (chunk.done) {
          if (attempt >= 5) return;
          break;
        }
        buf += chunk.value;
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data) continue; // a heartbeat comment
          const ev = JSON.parse(data);
          after = ev.seq;
          yield ev;
          if (ev.type === "status" && ["completed", "failed", "killed"].includes(ev.data)) return;
        }
      }
    }
  }

  // download saves a file the API serves, sending the key.
  async download(path, name) {
    const resp = await this.fetch("GET", path);
    const url = URL.createObjectURL(await resp.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
}

const encoder = new TextEncoder();

// tarOf builds an uncompressed USTAR archive of files ({name, data:
// Uint8Array}); names longer than 100 bytes are refused.
export function tarOf(files) {
  const blocks = [];
  for (const f of files) {
    const name = encoder.encode(f.name);
    if (name.length > 100) throw new Error(`file name too long for the archive: ${f.name}`);
    const h = new Uint8Array(512);
    const put = (off, text) => h.set(encoder.encode(text), off);
    h.set(name, 0);
    put(100, "0000644\0");
    put(108, "0000000\0");
    put(116, "0000000\0");
    put(124, f.data.length.toString(8).padStart(11, "0") + "\0");
    put(136, Math.floor(Date.now() / 1000).toString(8).padStart(11, "0") + "\0");
    put(148, "        ");
    put(156, "0");
    put(257, "ustar\0");
    put(263, "00");
    let sum = 0;
    for (const b of h) sum += b;
    put(148, sum.toString(8).padStart(6, "0") + "\0 ");
    blocks.push(h, f.data, new Uint8Array((512 - (f.data.length % 512)) % 512));
  }
  blocks.push(new Uint8Array(1024));
  return new Blob(blocks, { type: "application/x-tar" });
}

export function utf8(text) { return encoder.encode(text); }
