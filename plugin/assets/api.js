// HTTP client for the Anchored API v1 (/v1/ask, /v1/feedback). No DOM here.

/** A failed call, with a `kind` the UI turns into a message: network, timeout, aborted, rate, server, bad. */
export class ApiError extends Error {
  constructor(kind, message, status = 0, retryAfter = 0, detail = '') {
    super(message);
    this.kind = kind;
    this.status = status;
    this.retryAfter = retryAfter;
    this.detail = detail; // the server's own `error.message`, shown as plain text
  }
}

/** Absolute URL of an API route: endpoint "" means this site's origin. */
export function apiUrl(endpoint, route, base = location.href) {
  const root = endpoint ? new URL(endpoint, base) : new URL('/', base);
  if (!root.pathname.endsWith('/')) root.pathname += '/';
  return new URL(route.replace(/^\//, ''), root).href;
}

// A non-2xx reply (`data`: its parsed JSON body, or null) → the ApiError to show.
function httpError(res, data) {
  const detail = data && data.error && typeof data.error.message === 'string' ? data.error.message : '';
  if (res.status === 429) {
    const wait = parseInt(res.headers.get('Retry-After') || '', 10) || 0;
    return new ApiError('rate', 'Too many questions right now.', 429, wait, detail);
  }
  if (res.status >= 400 && res.status < 500 && res.status !== 408) {
    return new ApiError('bad', detail || 'The question could not be handled.', res.status);
  }
  return new ApiError(res.status === 408 || res.status === 504 ? 'timeout' : 'server',
    'The docs assistant is unavailable right now.', res.status, 0, detail);
}

/**
 * A Server-Sent Events parser (the WHATWG event-stream format): push() text as it
 * arrives, cut anywhere; `onEvent(name, data)` gets each complete event (name "message"
 * when none is given, data lines joined by "\n"). Lines end in LF, CRLF or CR; comments
 * and fields other than event/data are skipped; an event the stream ends before its
 * blank line is dropped, as the format says.
 */
export function sseParser(onEvent) {
  let buf = '';
  let start = true;
  let name = '';
  let data = [];
  const line = (l) => {
    if (l === '') {
      if (data.length) onEvent(name || 'message', data.join('\n'));
      name = '';
      data = [];
    } else if (l[0] !== ':') {
      const i = l.indexOf(':');
      const field = i < 0 ? l : l.slice(0, i);
      const value = i < 0 ? '' : l.slice(l[i + 1] === ' ' ? i + 2 : i + 1);
      if (field === 'event') name = value;
      else if (field === 'data') data.push(value);
    }
  };
  const lines = (last) => {
    let from = 0;
    for (let i = 0; i < buf.length; i++) {
      const c = buf[i];
      if (c !== '\n' && c !== '\r') continue;
      if (c === '\r' && i + 1 === buf.length && !last) break; // maybe the first half of CRLF
      line(buf.slice(from, i));
      if (c === '\r' && buf[i + 1] === '\n') i++;
      from = i + 1;
    }
    buf = buf.slice(from);
  };
  return {
    push(text) {
      buf += text;
      if (start && buf) {
        if (buf[0] === '\uFEFF') buf = buf.slice(1);
        start = false;
      }
      lines(false);
    },
    end() {
      lines(true);
      buf = '';
      data = [];
    },
  };
}

// The stream's `error` event → the ApiError the UI shows for the same failure unstreamed.
function streamError(data) {
  const e = (data && data.error) || {};
  const detail = typeof e.message === 'string' ? e.message : '';
  const code = String(e.code || '');
  if (/rate|too_many/.test(code)) return new ApiError('rate', 'Too many questions right now.', 429, 0, detail);
  if (/timeout|deadline/.test(code)) return new ApiError('timeout', 'The docs assistant took too long to answer.', 0, 0, detail);
  return new ApiError('server', 'The docs assistant is unavailable right now.', 0, 0, detail);
}

const unreadable = (res) => new ApiError('server', 'The docs assistant sent an unreadable reply.', res.status);

/**
 * POST JSON and return the parsed reply. `signal` cancels (kind "aborted"); after
 * `timeout` ms the call fails with kind "timeout"; both abort the request.
 *
 * With `onEvent`, the call asks for a stream (`Accept: text/event-stream`, the /v1/ask
 * protocol in the HTTP API reference): `onEvent(name, data)` gets each event but the last
 * as it arrives, and the reply is the `final` event's data, exactly the buffered JSON; an
 * `error` event fails the call. A reply that is not an event stream (an older query
 * function, a proxy that buffers) is read as buffered JSON. The timeout covers the stream.
 */
export async function postJSON(url, body, { signal, timeout = 30000, onEvent = null } = {}) {
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, timeout);
  const onAbort = () => ctl.abort();
  if (signal) {
    if (signal.aborted) ctl.abort();
    signal.addEventListener('abort', onAbort);
  }
  // A failed fetch or read: why, as the UI names it.
  const failure = () => {
    if (timedOut) return new ApiError('timeout', 'The docs assistant took too long to answer.');
    if (signal && signal.aborted) return new ApiError('aborted', 'Cancelled.');
    return new ApiError('network', 'The docs assistant cannot be reached right now.');
  };
  try {
    let res;
    let data = null;
    let stream = false;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: onEvent ? 'text/event-stream' : 'application/json' },
        body: JSON.stringify(body),
        signal: ctl.signal,
      });
      stream = !!onEvent && res.ok && !!res.body && /^text\/event-stream\b/i.test(res.headers.get('Content-Type') || '');
      if (!stream) data = await res.json().catch(() => null);
      if (ctl.signal.aborted) throw failure();
    } catch {
      throw failure();
    }
    if (!res.ok) throw httpError(res, data);
    if (!stream) {
      if (!data || typeof data !== 'object') throw unreadable(res);
      return data;
    }
    // The event stream: each read's events are handed on after it, outside its try.
    const events = [];
    const parser = sseParser((name, raw) => events.push([name, raw]));
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch {
        throw failure();
      }
      parser.push(decoder.decode(chunk.value || new Uint8Array(), { stream: !chunk.done }));
      if (chunk.done) parser.end();
      for (const [name, raw] of events.splice(0)) {
        // Cancelled while the rest of the reply was already here: nothing more is shown.
        if (ctl.signal.aborted) throw failure();
        let event;
        try {
          event = JSON.parse(raw);
        } catch {
          continue; // an event that cannot be read is skipped; `final` is what counts
        }
        if (!event || typeof event !== 'object') continue;
        // The function ends the stream after either (the rest, if any, is left unread).
        if (name === 'error') throw streamError(event);
        if (name === 'final') return event;
        onEvent(name, event);
      }
      if (chunk.done) throw new ApiError('server', 'The answer stopped before it was finished.', res.status);
    }
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

const str = (v) => (v == null ? '' : String(v));
// An answer item's own cited spans (`answer[i].spans`, see the HTTP API page): n → the text its chip highlights.
const spansOf = (list, known) =>
  Object.fromEntries((Array.isArray(list) ? list : []).filter((x) => x && known.has(x.n) && typeof x.highlight === 'string' && x.highlight).map((x) => [x.n, x.highlight]));

/** Check and normalise an /v1/ask reply so the UI only ever sees the fields it expects. */
export function readAnswer(data) {
  if (!Array.isArray(data.answer) || !Array.isArray(data.citations)) {
    throw new ApiError('server', 'The docs assistant sent an unreadable reply.');
  }
  const citations = data.citations
    .filter((c) => c && Number.isInteger(c.n))
    .map((c) => ({
      n: c.n,
      chunk_id: str(c.chunk_id),
      url: str(c.url),
      title: str(c.title),
      heading_path: Array.isArray(c.heading_path) ? c.heading_path.map(str) : [],
      passage: str(c.passage),
      highlight: str(c.highlight || c.passage),
      lang: str(c.lang), // the cited page's language ("" when the index records none)
    }));
  const known = new Set(citations.map((c) => c.n));
  return {
    id: str(data.id),
    answer: data.answer
      .filter((s) => s && typeof s === 'object')
      .map((s) => ({
        text: str(s.text),
        citations: (Array.isArray(s.citations) ? s.citations : []).filter((n) => known.has(n)),
        spans: spansOf(s.spans, known),
        ...flagsOf(s),
      })),
    citations,
    abstained: data.abstained === true,
    mode: data.mode === 'extractive' ? 'extractive' : 'llm',
    tentative: data.tentative === true, // extractive: the closest passage, not a sure answer
    coverage: ['full', 'partial', 'none'].includes(data.coverage) ? data.coverage : data.abstained === true ? 'none' : 'full',
    passages_considered: Number.isInteger(data.passages_considered) ? data.passages_considered : 0,
    note: str(data.note), // multilingual docs: the answer comes from another language's pages
    other_language: data.other_language === true,
    version: str(data.version), // versioned docs: the version the answer is from ("" when none)
  };
}

/** A stream's `sources` event → the passages the model reads, shaped like citations (no passage text yet). */
export function readSources(data) {
  return (Array.isArray(data.sources) ? data.sources : [])
    .filter((c) => c && Number.isInteger(c.n))
    .map((c) => ({ n: c.n, url: str(c.url), title: str(c.title), heading_path: Array.isArray(c.heading_path) ? c.heading_path.map(str) : [], passage: '', highlight: '' }));
}

/** A stream's `sentence` event → {index, text, citations} (citations in the sources' numbering); null if unusable. */
export function readSentence(data) {
  const item = data.item;
  if (!item || typeof item !== 'object' || !Number.isInteger(data.index)) return null;
  return { index: data.index, text: str(item.text), citations: (Array.isArray(item.citations) ? item.citations : []).filter(Number.isInteger), ...flagsOf(item) };
}

/** An answer item's marks: `verified: false` (shown, not confirmed), `note` (what the docs do not cover). */
function flagsOf(item) {
  return { ...(item.verified === false ? { verified: false } : {}), ...(item.note === true ? { note: true } : {}) };
}
