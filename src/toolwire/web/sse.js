// Incremental Server-Sent Events parser (the WHATWG "event stream" format), with no I/O and no DOM.
//
// EventSource cannot send an Authorization header, so the page reads the stream with fetch and a
// ReadableStream and feeds the decoded text here, chunk by chunk, in whatever pieces the network delivers.
// A chunk may end anywhere: inside a field, between "\r" and "\n", or in the middle of a frame.
// Only the unfinished last line is kept between chunks, so a long stream is parsed in linear time.

/**
 * @typedef {{id: string | null, event: string, data: string}} SSEFrame
 *   `id` is the stream's last event id after this frame (the cursor to resume from), or null if none was set.
 */

export class SSEParser {
  /** @param {(frame: SSEFrame) => void} onFrame called once per dispatched frame */
  constructor(onFrame) {
    this.onFrame = onFrame;
    this.partial = "";        // an unfinished line carried over to the next chunk
    this.skipLF = false;      // the last chunk ended with "\r": a leading "\n" belongs to it
    this.firstChunk = true;
    this.data = [];
    this.hasData = false;
    this.eventType = "";
    this.lastEventId = null;
    /** The reconnection time the server asked for (ms), or null. */
    this.retry = null;
  }

  /** Feed the next piece of decoded text. */
  feed(text) {
    if (this.firstChunk && text.length > 0) {
      this.firstChunk = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    let start = 0;
    if (this.skipLF && text.length > 0) {
      if (text[0] === "\n") start = 1;
      this.skipLF = false;
    }
    const length = text.length;
    while (start < length) {
      let end = start;
      let c = 0;
      while (end < length) {
        c = text.charCodeAt(end);
        if (c === 10 || c === 13) break;
        end += 1;
      }
      if (end === length) {
        this.partial += text.slice(start);
        return;
      }
      const line = this.partial.length > 0 ? this.partial + text.slice(start, end) : text.slice(start, end);
      this.partial = "";
      this.line(line);
      start = end + 1;
      if (c === 13) {
        if (start < length) {
          if (text.charCodeAt(start) === 10) start += 1;
        } else {
          this.skipLF = true;
        }
      }
    }
  }

  /** The stream ended: an unterminated frame is discarded, as the specification says. */
  end() {
    this.partial = "";
    this.data = [];
    this.hasData = false;
    this.eventType = "";
  }

  line(line) {
    if (line.length === 0) {
      this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ":" starts a comment (heartbeats)
    const colon = line.indexOf(":");
    let field = line;
    let value = "";
    if (colon >= 0) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    switch (field) {
      case "data":
        this.data.push(value);
        this.hasData = true;
        break;
      case "event":
        this.eventType = value;
        break;
      case "id":
        if (!value.includes("\0")) this.lastEventId = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break; // unknown fields are ignored
    }
  }

  dispatch() {
    if (!this.hasData) {
      this.eventType = "";
      return;
    }
    const frame = { id: this.lastEventId, event: this.eventType || "message", data: this.data.join("\n") };
    this.data = [];
    this.hasData = false;
    this.eventType = "";
    this.onFrame(frame);
  }
}

/** Parse a whole body at once (tests and small responses). */
export function parseSSE(text) {
  const frames = [];
  const parser = new SSEParser((frame) => frames.push(frame));
  parser.feed(text);
  parser.end();
  return frames;
}
