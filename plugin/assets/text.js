// Plain logic shared by the widget: no DOM here, so it runs (and is tested) in Node too.

/** Query parameter that carries the passage to highlight on the target page. */
export const HL_PARAM = 'anchored-hl';

const WORDS = 6; // words kept from each end of a long passage
const CAP = 60; // characters kept from each end when words are very long (CJK, code)

// Characters that never take part in matching: whitespace (incl. nbsp), permalink
// pilcrows, the " | " the back end puts between table cells, zero-width marks, and the
// control characters and U+FFFD the back end drops from section text.
const SKIP = /[\s¶|\u0000-\u0008\u000e-\u001f\u007f\u00ad\u200b-\u200d\u2060\ufeff\ufffd]/;

/**
 * Append the matching form of `text` to `out` (lower case, SKIP characters dropped).
 * `each(i)` is called once per appended character with the source index it came from.
 */
export function keyChars(text, out, each) {
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (SKIP.test(ch)) continue;
    const low = ch.toLowerCase();
    for (let k = 0; k < low.length; k++) {
      out.push(low[k]);
      if (each) each(i);
    }
  }
  return out;
}

/** The matching key of a string: what the page text and the passage are compared on. */
export function toKey(text) {
  return keyChars(String(text || ''), []).join('');
}

/** Words of a passage as the reader sees them (table separators and pilcrows dropped). */
export function words(text) {
  return String(text || '')
    .replace(/[¶\u00ad\u200b-\u200d\u2060\ufeff]/g, '')
    .split(/[\s|]+/)
    .filter(Boolean);
}

/**
 * A highlight spec for a passage: {start, end?, len?}. Short passages are kept whole;
 * long ones keep their first and last few words plus the matching length, which picks
 * the right pair when the start or end words occur more than once in the section.
 */
export function specFor(text) {
  const w = words(text);
  const whole = w.join(' ');
  if (!whole) return null;
  if (w.length <= 2 * WORDS && whole.length <= 2 * CAP) return { start: whole };
  let start = w.slice(0, WORDS).join(' ');
  let end = w.slice(-WORDS).join(' ');
  if (w.length <= 2 * WORDS || start.length > CAP || end.length > CAP) {
    // Few but long words: cut by characters, never letting the two ends overlap.
    start = whole.slice(0, CAP).trim();
    end = whole.slice(-CAP).trim();
  }
  return { start, end, len: toKey(whole).length };
}

function enc(s) {
  // Keep the link short and readable: ':', '/', ',', '@' are legal in a query string.
  return encodeURIComponent(s)
    .replace(/%20/g, '+')
    .replace(/%(3A|2F|2C|40)/g, (_, h) => String.fromCharCode(parseInt(h, 16)))
    .replace(/~/g, '%7E');
}

function dec(s) {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return '';
  }
}

/** Encode a spec as the value of `?anchored-hl=`: `start`, or `start~end~len`. */
export function encodeSpec(spec) {
  if (!spec || !spec.start) return '';
  if (!spec.end) return enc(spec.start);
  return enc(spec.start) + '~' + enc(spec.end) + (spec.len ? '~' + spec.len : '');
}

/** Decode a raw (still percent-encoded) parameter value; null when unusable. */
export function decodeSpec(raw) {
  if (!raw) return null;
  const [a, b, c] = String(raw).split('~');
  const start = dec(a || '');
  if (!toKey(start)) return null;
  const end = b ? dec(b) : '';
  const len = c && /^\d{1,7}$/.test(c) ? Number(c) : 0;
  return toKey(end) ? { start, end, len } : { start };
}

/** Raw value of the highlight parameter in a query string (`?a=1&anchored-hl=…`). */
export function readParam(search) {
  const m = /[?&]anchored-hl=([^&#]*)/.exec(search || '');
  return m ? m[1] : null;
}

/** The query string without the highlight parameter ('' when nothing is left). */
export function stripParam(search) {
  const rest = String(search || '')
    .replace(/^\?/, '')
    .split('&')
    .filter((p) => p && !p.startsWith(HL_PARAM + '='));
  return rest.length ? '?' + rest.join('&') : '';
}

function positions(hay, needle, from, limit) {
  const out = [];
  for (let i = hay.indexOf(needle, from); i >= 0 && out.length < limit; i = hay.indexOf(needle, i + 1)) {
    out.push(i);
  }
  return out;
}

/**
 * Find a spec in a key string, searching from `from`. Returns [start, end) in key
 * indices, or null. With an end part, the (start, end) pair whose length is closest
 * to `len` wins (the first pair when there is no length).
 */
export function findSpan(key, spec, from = 0) {
  const s = toKey(spec && spec.start);
  if (!s) return null;
  const starts = positions(key, s, from, 64);
  if (!starts.length) return null;
  const e = toKey(spec.end);
  if (!e) return [starts[0], starts[0] + s.length];
  let best = null;
  let bestScore = Infinity;
  for (const i of starts) {
    for (const j of positions(key, e, i + s.length, spec.len ? 64 : 1)) {
      const span = j + e.length - i;
      const score = spec.len ? Math.abs(span - spec.len) : span;
      if (score < bestScore) {
        best = [i, j + e.length];
        bestScore = score;
      }
    }
    if (best && !spec.len) break;
  }
  return best;
}

/**
 * Resolve a citation url (`page/#anchor`, relative to the site root) against the
 * absolute root URL. Only http(s) survives; anything else (javascript:, data:) is null.
 */
export function resolveUrl(url, root) {
  let u;
  try {
    u = new URL(String(url || ''), root);
  } catch {
    return null;
  }
  return u.protocol === 'http:' || u.protocol === 'https:' ? u : null;
}

/** Link to a citation that lands on the section and highlights the passage. */
export function citationHref(citation, root) {
  const u = resolveUrl(citation.url, root);
  if (!u) return null;
  const hl = encodeSpec(specFor(citation.highlight || citation.passage));
  if (hl) u.search = (u.search ? u.search + '&' : '?') + HL_PARAM + '=' + hl;
  return u.href;
}

/** Path of a page URL with `index.html` dropped, for same-page checks. */
export function pagePath(u) {
  return decodeURIComponent(u.pathname).replace(/(^|\/)index\.html$/, '$1');
}

/** Top-level section prefix of a page ("user-guide/config/" → "user-guide/"); "" for the home page. */
export function sectionPrefix(page) {
  const first = String(page || '').replace(/^\/+/, '').split('/')[0];
  return first && !/\.html?$/.test(first) ? first + '/' : '';
}

/** "user-guide/" → "User guide". */
export function prefixLabel(prefix) {
  const s = prefix.replace(/\/$/, '').replace(/[-_]+/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/**
 * "Page › Heading › Sub" for a citation. The API's `heading_path` starts at the page
 * title and ends at the section (`title`); a `title` missing from the path is put first.
 */
export function citationPath(c) {
  const path = (Array.isArray(c.heading_path) ? c.heading_path : []).map(String).filter(Boolean);
  const title = String(c.title || '');
  if (title && !path.includes(title)) path.unshift(title);
  return path.join(' › ');
}

/** The title of the page a citation is on: the first entry of its heading path. */
export function pageTitle(c) {
  const path = Array.isArray(c.heading_path) ? c.heading_path.map(String).filter(Boolean) : [];
  return path[0] || String(c.title || '');
}

/** Citations grouped by page, in order of first citation: [{page, title, items}]. */
export function groupByPage(citations) {
  const groups = new Map();
  for (const c of citations) {
    const page = String(c.url || '').split('#')[0];
    if (!groups.has(page)) groups.set(page, { page, title: pageTitle(c) || page, items: [] });
    groups.get(page).items.push(c);
  }
  return [...groups.values()];
}

/** Plain answer text (no citation markers), as sent back in `history`. */
export function answerText(answer) {
  return (answer || []).map((s) => String(s.text || '').trim()).filter(Boolean).join(' ');
}
