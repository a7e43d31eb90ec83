/**
 * A text/event-stream parser over a fetch body, as the WHATWG HTML
 * specification describes it: lines end in LF, CRLF or CR; a line starting
 * with ":" is a comment (heartbeats); data lines of one event are joined
 * with LF; a blank line dispatches the event, and one without data is
 * dropped; an event cut off by the end of the stream is dropped too.
 */

/** One dispatched Server-Sent Event. */
export interface SSEMessage {
  id: string;
  event: string;
  data: string;
}

/**
 * Yields the events of an SSE body. Leaving the loop early (break, throw)
 * cancels the body, which closes the connection.
 */
export async function* parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  let buf = "";
  let first = true;
  let id = "";
  let event = "";
  let data: string[] = [];
  // A CR at the end of a chunk may be the first half of a CRLF.
  let pendingCR = false;
  const dispatch = (line: string): SSEMessage | undefined => {
    if (line === "") {
      const msg = data.length > 0 ? { id, event, data: data.join("\n") } : undefined;
      event = "";
      data = [];
      return msg;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\0")) id = value;
    return undefined;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      if (first && buf.length > 0) {
        if (buf.charCodeAt(0) === 0xfeff) buf = buf.slice(1);
        first = false;
      }
      if (pendingCR && buf.startsWith("\n")) buf = buf.slice(1);
      pendingCR = false;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        if (m === null) break;
        if (m[0] === "\r" && m.index === buf.length - 1) pendingCR = true;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        const msg = dispatch(line);
        if (msg !== undefined) yield msg;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
