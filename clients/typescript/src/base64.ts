/** Base64 and data URLs without Node's Buffer, so browsers share the code. */

/** The bytes of a base64 string (standard alphabet, padding optional). */
export function decodeBase64(s: string): Uint8Array {
  const bin = atob(s.replace(/\s+/g, ""));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The base64 of bytes. */
export function encodeBase64(bytes: Uint8Array): string {
  let bin = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    bin += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(bin);
}

/** A data: URL of bytes with a media type. */
export function dataURL(mimeType: string, bytes: Uint8Array): string {
  return `data:${mimeType};base64,${encodeBase64(bytes)}`;
}
