// The Markdown subset of answer text, parsed into plain objects (no DOM here, so it runs
// and is tested in Node too); answer.js draws them as elements and text nodes. Loaded with
// the dialog, not with every page.
import { citationPath, resolveUrl } from './text.js';

// Inline: `code`, **bold**, *italic*, [text](link to this site), backslash escapes.
// Blocks, one per answer item: an item starting with ``` (or ~~~) is a fenced code block,
// a `| a | b |` line, a `|---|---|` rule and rows is a table, one starting with "- " /
// "* " / "1. " is a list item, anything else is paragraph prose.
// Nothing here ever produces HTML: the result is a tree of plain objects holding strings.

const FENCE = /^(`{3,}|~{3,})[ \t]*([^\n]*)\n?([\s\S]*)$/;
const LIST_ITEM = /^[ \t]*(?:([-*+])|(\d{1,9})[.)])[ \t]+(?=\S)/;
const MAX_DEPTH = 6; // links nested deeper than this stay text

const TABLE_RULE = /^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?$/;

/** The cells of one table line (`| a | b |`); `\|` is a pipe inside a cell. */
function tableCells(line) {
  const s = line.trim().replace(/^\|/, '').replace(/(^|[^\\])\|$/, '$1');
  const cells = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && s[i + 1] === '|') {
      cur += '|';
      i++;
    } else if (s[i] === '|') {
      cells.push(cur.trim());
      cur = '';
    } else cur += s[i];
  }
  cells.push(cur.trim());
  return cells;
}

/** A table item (a header line, a `|---|` rule, rows) → {header, rows}; null when not one. */
export function parseTable(text) {
  const lines = String(text || '').trim().split('\n');
  if (lines.length < 3 || !TABLE_RULE.test(lines[1].trim())) return null;
  if (!lines.every((l) => l.trim().startsWith('|'))) return null;
  const header = tableCells(lines[0]);
  const fit = (cells) => header.map((_, k) => cells[k] || '');
  return { header, rows: lines.slice(2).map((l) => fit(tableCells(l))) };
}

/** A fenced code block item → {lang, title, code}; null when `text` is not one. The info
 * string may carry the block's title as themes show it: ```yaml title="mkdocs.yml". */
export function parseFence(text) {
  const m = FENCE.exec(String(text || '').trim());
  if (!m) return null;
  const lang = (m[2].trim().split(/\s+/)[0] || '').replace(/^\{?\.?/, '').replace(/\}$/, '');
  const title = (/\btitle="([^"]*)"/.exec(m[2]) || [])[1] || '';
  let code = m[3];
  const close = new RegExp('\\n?[ \\t]*' + (m[1][0] === '`' ? '`' : '~') + '{' + m[1].length + ',}[ \\t]*$');
  code = code.replace(close, '');
  return { lang: /^[\w+#.-]{1,32}$/.test(lang) ? lang.toLowerCase() : '', title: title.slice(0, 120), code };
}

/** A list item → {ordered, n, text} (marker removed); null when `text` is not one. */
export function parseListItem(text) {
  const m = LIST_ITEM.exec(String(text || ''));
  if (!m) return null;
  return { ordered: !m[1], n: m[2] ? Number(m[2]) : 0, text: String(text).slice(m[0].length) };
}

/**
 * A link target from answer text, resolved against the site root; null unless it stays on
 * the site (same origin and under the root path, http(s) only).
 */
export function siteLink(href, root) {
  const raw = String(href || '').trim();
  if (!raw || /[\s\u0000-\u001f\\]/.test(raw)) return null;
  const u = resolveUrl(raw, root);
  if (!u) return null;
  const base = new URL(root);
  if (u.origin !== base.origin) return null;
  try {
    return decodeURIComponent(u.pathname).startsWith(decodeURIComponent(base.pathname)) ? u : null;
  } catch {
    return null; // a malformed escape (`/%zz`): the link stays text
  }
}

function runAt(s, i, ch) {
  let j = i;
  while (s[j] === ch) j++;
  return j - i;
}

function findCodeClose(s, from, n) {
  for (let j = s.indexOf('`', from); j >= 0; j = s.indexOf('`', j)) {
    const len = runAt(s, j, '`');
    if (len === n) return j;
    j += len;
  }
  return -1;
}

// `[label](href)` at i → {label, href, end}; null when the brackets do not form a link.
function linkAt(s, i) {
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    if (s[j] === '\\') j++;
    else if (s[j] === '`') {
      const len = runAt(s, j, '`');
      const end = findCodeClose(s, j + len, len);
      j = end < 0 ? j + len - 1 : end + len - 1;
    } else if (s[j] === '[') depth++;
    else if (s[j] === ']' && --depth === 0) break;
  }
  if (depth !== 0 || s[j + 1] !== '(') return null;
  let close = -1;
  for (let k = j + 2, open = 0; k < s.length && close < 0; k++) {
    if (s[k] === '(') open++;
    else if (s[k] === ')' && open-- === 0) close = k;
  }
  if (close < 0) return null;
  let href = s.slice(j + 2, close).trim();
  if (/^<.*>$/.test(href)) href = href.slice(1, -1);
  return { label: s.slice(i + 1, j), href, end: close + 1 };
}

// Pair `*` runs into emphasis, CommonMark's delimiter-stack way (each closer takes the
// nearest opener before it): `nodes` mixes finished nodes and {t:'delim', n, open, close}.
function pairEmphasis(nodes) {
  const list = nodes.slice();
  for (let ci = 0; ci < list.length; ci++) {
    const closer = list[ci];
    if (closer.t !== 'delim' || !closer.close) continue;
    while (closer.n > 0) {
      let oi = ci - 1;
      while (oi >= 0 && !(list[oi].t === 'delim' && list[oi].open && list[oi].n > 0)) oi--;
      if (oi < 0) break;
      const opener = list[oi];
      const use = opener.n >= 2 && closer.n >= 2 ? 2 : 1;
      const kids = list.slice(oi + 1, ci).map((k) => (k.t === 'delim' ? { t: 'text', v: '*'.repeat(k.n) } : k));
      const node = { t: use === 2 ? 'strong' : 'em', kids: mergeText(kids) };
      opener.n -= use;
      closer.n -= use;
      list.splice(oi + 1, ci - oi - 1, node);
      ci = oi + 2;
      if (opener.n === 0) {
        list.splice(oi, 1);
        ci--;
      }
    }
  }
  return mergeText(list.map((k) => (k.t === 'delim' ? { t: 'text', v: '*'.repeat(k.n) } : k)).filter((k) => k.t !== 'text' || k.v));
}

function mergeText(nodes) {
  const out = [];
  for (const k of nodes) {
    const prev = out[out.length - 1];
    if (k.t === 'text' && prev && prev.t === 'text') prev.v += k.v;
    else out.push(k.t === 'text' ? { t: 'text', v: k.v } : k);
  }
  return out;
}

/**
 * Inline Markdown → nodes: {t:'text', v} | {t:'code', v} | {t:'strong'|'em', kids} |
 * {t:'link', href, src, kids} (href still unchecked: the renderer keeps only site links).
 */
export function parseInline(text, depth = 0) {
  const s = String(text || '');
  const out = [];
  let buf = '';
  const flush = () => {
    if (buf) out.push({ t: 'text', v: buf });
    buf = '';
  };
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === '\\' && i + 1 < s.length && /[!-/:-@[-`{-~]/.test(s[i + 1])) {
      buf += s[++i];
      continue;
    }
    if (ch === '`') {
      const n = runAt(s, i, '`');
      const end = findCodeClose(s, i + n, n);
      if (end < 0) {
        buf += s.slice(i, i + n);
        i += n - 1;
        continue;
      }
      let code = s.slice(i + n, end).replace(/\n/g, ' ');
      if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
      flush();
      out.push({ t: 'code', v: code });
      i = end + n - 1;
      continue;
    }
    if (ch === '*') {
      const n = runAt(s, i, '*');
      const open = !/\s/.test(s[i + n] || ' ');
      const close = i > 0 && !/\s/.test(s[i - 1]);
      flush();
      out.push({ t: 'delim', n, open, close });
      i += n - 1;
      continue;
    }
    if (ch === '[' && depth < MAX_DEPTH) {
      const link = linkAt(s, i);
      if (link && link.label.trim()) {
        flush();
        out.push({ t: 'link', href: link.href, src: s.slice(i, link.end), kids: parseInline(link.label, depth + 1) });
        i = link.end - 1;
        continue;
      }
    }
    buf += ch;
  }
  flush();
  return pairEmphasis(out);
}

/** The text a reader sees for inline nodes (links to other sites show their Markdown). */
export function inlineText(nodes, isSafe = () => true) {
  return nodes
    .map((n) => (n.t === 'text' || n.t === 'code' ? n.v : n.t === 'link' && !isSafe(n.href) ? n.src : inlineText(n.kids, isSafe)))
    .join('');
}

/**
 * Answer items → blocks: {type:'p', items} | {type:'list', ordered, start, items} |
 * {type:'code', lang, code, item}. Each entry of `items` is {item, nodes}: the answer item
 * (with its citations) and its parsed inline text.
 */
export function answerBlocks(answer) {
  const blocks = [];
  let last = null;
  for (const item of answer || []) {
    const text = String((item && item.text) || '').trim();
    if (!text) continue;
    const fence = parseFence(text);
    if (fence && /^(`{3,}|~{3,})/.test(text)) {
      blocks.push({ type: 'code', lang: fence.lang, title: fence.title, code: fence.code, item });
      last = null;
      continue;
    }
    const table = parseTable(text);
    if (table) {
      const cells = (row) => row.map((c) => parseInline(c));
      blocks.push({ type: 'table', header: cells(table.header), rows: table.rows.map(cells), item });
      last = null;
      continue;
    }
    const li = parseListItem(text);
    if (li) {
      if (!last || last.type !== 'list' || last.ordered !== li.ordered) {
        last = { type: 'list', ordered: li.ordered, start: li.n || 1, items: [] };
        blocks.push(last);
      }
      last.items.push({ item, nodes: parseInline(li.text.replace(/\s*\n\s*/g, ' ')) });
      continue;
    }
    const paras = text.split(/\n[ \t]*\n/);
    paras.forEach((para, k) => {
      if (k > 0 || !last || last.type !== 'p') {
        last = { type: 'p', items: [] };
        blocks.push(last);
      }
      // the item's citations go with its last piece
      const part = k === paras.length - 1 ? item : { ...item, citations: [] };
      last.items.push({ item: part, nodes: parseInline(para.trim().replace(/\s*\n\s*/g, ' ')) });
    });
  }
  return blocks;
}

/** What a reader sees of one answer item (markers, fences and emphasis marks removed). */
export function itemText(text, isSafe) {
  const t = String(text || '').trim();
  const fence = /^(`{3,}|~{3,})/.test(t) && parseFence(t);
  if (fence) return fence.code;
  const table = parseTable(t);
  // A table reads as its cells, as the DOM's textContent of the drawn table does.
  if (table) return [table.header, ...table.rows].flat().map((c) => inlineText(parseInline(c), isSafe)).join('');
  const li = parseListItem(t);
  return inlineText(parseInline((li ? li.text : t).replace(/\s*\n\s*/g, ' ')), isSafe);
}

function mdEscape(s) {
  return String(s).replace(/([\\[\]<>*_`])/g, '\\$1');
}

function codeSpan(v) {
  const longest = Math.max(0, ...(String(v).match(/`+/g) || []).map((r) => r.length));
  const tick = '`'.repeat(longest + 1);
  return tick + (/^`|`$/.test(v) ? ' ' + v + ' ' : v) + tick;
}

function inlineMarkdown(nodes, linkFor) {
  return nodes
    .map((n) => {
      if (n.t === 'text') return mdEscape(n.v);
      if (n.t === 'code') return codeSpan(n.v);
      if (n.t === 'strong') return `**${inlineMarkdown(n.kids, linkFor)}**`;
      if (n.t === 'em') return `*${inlineMarkdown(n.kids, linkFor)}*`;
      const href = linkFor(n.href);
      return href ? `[${inlineMarkdown(n.kids, linkFor)}](${href})` : mdEscape(n.src);
    })
    .join('');
}

/**
 * The answer as Markdown: its paragraphs, lists and code blocks with [n] references, then
 * `[n]: absolute-url "path"`. `linkFor(href)` gives the absolute URL of a link in the
 * answer text, or null for one that leaves the site (kept as plain text).
 */
export function toMarkdown(reply, hrefFor, linkFor = () => null) {
  const refs = (item) => ((item && item.citations) || []).map((n) => ` [${n}]`).join('');
  const body = answerBlocks(reply.answer)
    .map((b) => {
      if (b.type === 'table') {
        const row = (cells) => `| ${cells.map((n) => inlineMarkdown(n, linkFor).replace(/\|/g, '\\|')).join(' | ')} |`;
        const lines = [row(b.header), `|${'---|'.repeat(b.header.length)}`, ...b.rows.map(row)];
        const cited = refs(b.item).trim();
        return lines.join('\n') + (cited ? `\n\n${cited}` : '');
      }
      if (b.type === 'code') {
        const longest = Math.max(2, ...(b.code.match(/^`+/gm) || []).map((r) => r.length));
        const fence = '`'.repeat(longest + 1);
        const title = b.title ? ` title="${b.title.replace(/"/g, "'")}"` : '';
        return `${fence}${b.lang}${title}\n${b.code}\n${fence}`;
      }
      const lines = b.items.map(({ item, nodes }, k) => {
        const text = inlineMarkdown(nodes, linkFor) + refs(item);
        if (b.type === 'p') return text;
        return (b.ordered ? `${b.start + k}. ` : '- ') + text;
      });
      return lines.join(b.type === 'p' ? ' ' : '\n');
    })
    .join('\n\n');
  const defs = (reply.citations || [])
    .map((c) => {
      const href = hrefFor(c);
      const title = citationPath(c).replace(/"/g, "'");
      return href ? `[${c.n}]: ${href}${title ? ` "${title}"` : ''}` : '';
    })
    .filter(Boolean);
  return [body, defs.join('\n')].filter(Boolean).join('\n\n') + '\n';
}
