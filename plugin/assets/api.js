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

/**
 * POST JSON and return the parsed reply. `signal` cancels (kind "aborted"); after
 * `timeout` ms the call fails with kind "timeout".
 */
export async function postJSON(url, body, { signal, timeout = 30000 } = {}) {
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
  let res;
  let data = null;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    data = await res.json().catch(() => null);
  } catch {
    if (timedOut) throw new ApiError('timeout', 'The docs assistant took too long to answer.');
    if (signal && signal.aborted) throw new ApiError('aborted', 'Cancelled.');
    throw new ApiError('network', 'The docs assistant cannot be reached right now.');
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
  if (!res.ok) {
    const detail = data && data.error && typeof data.error.message === 'string' ? data.error.message : '';
    if (res.status === 429) {
      const wait = parseInt(res.headers.get('Retry-After') || '', 10) || 0;
      throw new ApiError('rate', 'Too many questions right now.', 429, wait, detail);
    }
    if (res.status >= 400 && res.status < 500 && res.status !== 408) {
      throw new ApiError('bad', detail || 'The question could not be handled.', res.status);
    }
    throw new ApiError(res.status === 408 || res.status === 504 ? 'timeout' : 'server',
      'The docs assistant is unavailable right now.', res.status, 0, detail);
  }
  if (!data || typeof data !== 'object') throw new ApiError('server', 'The docs assistant sent an unreadable reply.', res.status);
  return data;
}

const str = (v) => (v == null ? '' : String(v));

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
    }));
  const known = new Set(citations.map((c) => c.n));
  return {
    id: str(data.id),
    answer: data.answer
      .filter((s) => s && typeof s === 'object')
      .map((s) => ({
        text: str(s.text),
        citations: (Array.isArray(s.citations) ? s.citations : []).filter((n) => known.has(n)),
      })),
    citations,
    abstained: data.abstained === true,
    mode: data.mode === 'extractive' ? 'extractive' : 'llm',
    passages_considered: Number.isInteger(data.passages_considered) ? data.passages_considered : 0,
  };
}
