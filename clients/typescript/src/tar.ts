/** A minimal writer of uncompressed USTAR archives, for run and submit. */

const BLOCK = 512;

function writeString(block: Uint8Array, offset: number, length: number, s: Uint8Array): void {
  block.set(s.subarray(0, length), offset);
}

function writeOctal(block: Uint8Array, offset: number, length: number, n: number): void {
  const s = n.toString(8).padStart(length - 1, "0");
  writeString(block, offset, length, new TextEncoder().encode(s + "\0"));
}

/** Splits a path into USTAR's prefix (≤155 bytes) and name (≤100 bytes). */
function splitName(path: string): [Uint8Array, Uint8Array] {
  const enc = new TextEncoder();
  const full = enc.encode(path);
  if (full.length <= 100) return [new Uint8Array(0), full];
  for (let i = path.length - 1; i > 0; i--) {
    if (path[i] !== "/") continue;
    const prefix = enc.encode(path.slice(0, i));
    const name = enc.encode(path.slice(i + 1));
    if (prefix.length <= 155 && name.length <= 100 && name.length > 0) return [prefix, name];
  }
  throw new Error(`tar: path ${JSON.stringify(path)} is too long for a USTAR header`);
}

/** Checks a workspace-relative path: no absolute path, no "..", no empty component. */
export function checkPath(path: string): void {
  if (path === "" || path.startsWith("/") || path.split("/").some((c) => c === "" || c === "." || c === "..")) {
    throw new Error(`unsafe file path ${JSON.stringify(path)}: use a relative path without . or .. components`);
  }
}

/** An uncompressed tar of regular files (mode 0644), in the order given. */
export function tarFromFiles(files: Record<string, string | Uint8Array>): Uint8Array {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const [path, content] of Object.entries(files)) {
    checkPath(path);
    const data = typeof content === "string" ? enc.encode(content) : content;
    const header = new Uint8Array(BLOCK);
    const [prefix, name] = splitName(path);
    writeString(header, 0, 100, name);
    writeOctal(header, 100, 8, 0o644);
    writeOctal(header, 108, 8, 0);
    writeOctal(header, 116, 8, 0);
    writeOctal(header, 124, 12, data.length);
    writeOctal(header, 136, 12, 0);
    header.fill(0x20, 148, 156); // the checksum counts its own field as spaces
    header[156] = 0x30; // "0": a regular file
    writeString(header, 257, 6, enc.encode("ustar\0"));
    writeString(header, 263, 2, enc.encode("00"));
    writeString(header, 345, 155, prefix);
    let sum = 0;
    for (const b of header) sum += b;
    writeString(header, 148, 8, enc.encode(sum.toString(8).padStart(6, "0") + "\0 "));
    parts.push(header, data);
    const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(new Uint8Array(pad));
  }
  parts.push(new Uint8Array(2 * BLOCK));
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** The file to run among paths: main.py, then __main__.py, then the first .py; undefined when none. */
export function detectEntrypoint(paths: string[]): string | undefined {
  for (const want of ["main.py", "__main__.py"]) if (paths.includes(want)) return want;
  return paths.find((p) => p.endsWith(".py"));
}
