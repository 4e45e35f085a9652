// One turn of the conversation: the answer with its citation chips, the sources grouped
// by page, copy, feedback; or the error with a way out. Data only ever becomes text nodes.
//
// `ctx` is what the dialog lends: hrefFor(citation), navigate(citation, href, event),
// showTip(chip, citation), hideTip(), sendFeedback(payload): Promise, saved(),
// host (element for the copy fallback), retry(turn), searchHref(q), openSearch(q): boolean,
// linkFor(href): absolute URL of a link in answer text that stays on the site, or null;
// follow(event): a link in the answer was clicked; questionLink(q): the link that asks q
// again (?ask=), or null when question links are off.
import { copyText } from './clipboard.js';
import { el, icon } from './dom.js';
import { languageNote } from './languages.js';
import { answerBlocks, toMarkdown } from './markdown.js';
import { citationPath, groupByPage } from './text.js';

const REASONS = [
  ['incorrect', 'Wrong or misleading'],
  ['off_topic', 'Not what I asked'],
  ['missing', 'Not covered well'],
  ['bad_citation', 'Sources don’t match'],
];
const LINK = 'M3.9 12c0-1.7 1.4-3.1 3.1-3.1h4V7H7a5 5 0 0 0 0 10h4v-1.9H7c-1.7 0-3.1-1.4-3.1-3.1M8 13h8v-2H8v2m9-6h-4v1.9h4c1.7 0 3.1 1.4 3.1 3.1s-1.4 3.1-3.1 3.1h-4V17h4a5 5 0 0 0 0-10z';
let radios = 0;

function citeLink(ctx, c, cls, ...content) {
  const href = ctx.hrefFor(c);
  const props = { class: cls };
  if (!href) return el(cls === 'anchored-chip' ? 'button' : 'span', { ...props, type: cls === 'anchored-chip' ? 'button' : null }, ...content); // unsafe url: no link
  props.href = href;
  props.onclick = (e) => ctx.navigate(c, href, e);
  return el('a', props, ...content);
}

function chip(ctx, c) {
  // While an answer streams, chips only show their number: they are renumbered by the final record.
  if (ctx.provisional) return el('span', { class: 'anchored-chip anchored-chip--provisional', title: citationPath(c) }, String(c.n));
  const a = citeLink(ctx, c, 'anchored-chip', String(c.n));
  a.setAttribute('aria-label', `Source ${c.n}: ${citationPath(c)}`);
  a.addEventListener('mouseenter', () => ctx.showTip(a, c));
  a.addEventListener('focus', () => ctx.showTip(a, c));
  a.addEventListener('mouseleave', ctx.hideTip);
  a.addEventListener('blur', ctx.hideTip);
  return a;
}

function sources(ctx, reply, heading) {
  return el(
    'div',
    { class: 'anchored-sources' },
    el('h3', { class: 'anchored-sources__title', text: heading }),
    el(
      'ul',
      { class: 'anchored-pages' },
      groupByPage(reply.citations).map((g) =>
        el(
          'li',
          { class: 'anchored-page' },
          el('span', { class: 'anchored-page__title', text: g.title }),
          el(
            'ul',
            {},
            g.items.map((c) =>
              el('li', {}, citeLink(ctx, c, 'anchored-source', el('span', { class: 'anchored-source__n', text: String(c.n) }), ' ', citationPath(c))),
            ),
          ),
        ),
      ),
    ),
  );
}

function feedback(ctx, turn) {
  const note = el('span', { class: 'anchored-fb__note', role: 'status' });
  const box = el('div', { class: 'anchored-fb', role: 'group', 'aria-label': 'Was this answer helpful?' });
  const reasonForm = el('form', { class: 'anchored-fb__form', hidden: true });
  const send = async (rating, reason, comment) => {
    const payload = { answer_id: turn.reply.id, rating };
    if (reason) payload.reason = reason;
    if (comment) payload.comment = comment;
    note.textContent = 'Sending…';
    try {
      await ctx.sendFeedback(payload);
      turn.rating = rating;
      ctx.saved();
      note.textContent = 'Thanks for the feedback.';
      reasonForm.hidden = true;
      up.disabled = down.disabled = true;
    } catch {
      note.textContent = 'Feedback could not be sent. Please try again.';
    }
  };
  const press = (which) => {
    up.setAttribute('aria-pressed', String(which === 'up'));
    down.setAttribute('aria-pressed', String(which === 'down'));
  };
  const up = el('button', { type: 'button', class: 'anchored-icon-btn', 'aria-label': 'Helpful', title: 'Helpful', 'aria-pressed': 'false', onclick: () => (press('up'), send('up')) }, icon('up'));
  const down = el(
    'button',
    {
      type: 'button',
      class: 'anchored-icon-btn',
      'aria-label': 'Not helpful',
      title: 'Not helpful',
      'aria-pressed': 'false',
      onclick: () => {
        press('down');
        reasonForm.hidden = false;
        reasonForm.querySelector('input').focus();
      },
    },
    icon('down'),
  );
  const name = 'anchored-reason-' + ++radios;
  const comment = el('textarea', { class: 'anchored-fb__comment', rows: '2', maxlength: '1000', 'aria-label': 'Comment (optional)', placeholder: 'What was wrong? (optional)' });
  reasonForm.append(
    el(
      'fieldset',
      {},
      el('legend', { text: 'What went wrong? (optional)' }),
      REASONS.map(([value, label]) => el('label', { class: 'anchored-fb__reason' }, el('input', { type: 'radio', name, value }), ' ', label)),
    ),
    comment,
    el('button', { type: 'submit', class: 'anchored-btn anchored-btn--primary' }, 'Send feedback'),
  );
  reasonForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const picked = reasonForm.querySelector('input:checked');
    send('down', picked ? picked.value : '', comment.value.trim());
  });
  if (turn.rating) {
    press(turn.rating);
    up.disabled = down.disabled = true;
    note.textContent = 'Thanks for the feedback.';
  }
  box.append(el('span', { class: 'anchored-fb__label', text: 'Helpful?' }), up, down, note);
  return [box, reasonForm];
}

function copyButton(ctx, what, text, label = 'Copy answer', cls = 'anchored-btn', glyph = undefined) {
  const span = el('span', { text: label });
  return el(
    'button',
    {
      type: 'button',
      class: cls,
      'aria-label': what,
      onclick: async () => {
        const ok = await copyText(text(), ctx.host);
        span.textContent = ok ? 'Copied' : 'Copy failed';
        setTimeout(() => (span.textContent = label), 2000);
      },
    },
    icon('copy', glyph),
    span,
  );
}

// ---- the answer's Markdown subset, drawn as elements and text nodes (text.js parses it)
function inline(ctx, nodes) {
  return nodes.map((n) => {
    if (n.t === 'text') return n.v;
    if (n.t === 'code') return el('code', { class: 'anchored-code-inline', text: n.v });
    if (n.t === 'strong') return el('strong', {}, inline(ctx, n.kids));
    if (n.t === 'em') return el('em', {}, inline(ctx, n.kids));
    const href = ctx.linkFor(n.href);
    return href ? el('a', { class: 'anchored-link', href, onclick: (e) => ctx.follow(e) }, inline(ctx, n.kids)) : n.src;
  });
}

function chips(ctx, r, item) {
  return (item.citations || []).map((n) => {
    const c = r.citations.find((x) => x.n === n);
    // The chip highlights (and previews) the part of the passage that backs this item.
    const own = item.spans && item.spans[n];
    return c ? chip(ctx, own ? { ...c, highlight: own, passage: own } : c) : null;
  });
}

// A sentence no check could confirm (API `verified: false`) is shown, marked; a note says
// what the docs do not cover (API `note`).
const UNVERIFIED = 'Not verified: no check could confirm this sentence against the pages it cites';

function unverifiedMark() {
  return el('span', { class: 'anchored-unverified__mark', title: UNVERIFIED, text: 'not verified' });
}

function sentence(ctx, r, { item, nodes }) {
  const cs = chips(ctx, r, item);
  const unverified = item.verified === false;
  const cls = 'anchored-sentence' + (unverified ? ' anchored-unverified' : '') + (item.note ? ' anchored-note' : '');
  return [el('span', { class: cls }, inline(ctx, nodes)), unverified ? ' ' : null, unverified ? unverifiedMark() : null, cs.length ? ' ' : null, cs, ' '];
}

// The theme's own highlighter when it has one on the page (the mkdocs theme's highlight.js,
// which reads the text and escapes it); otherwise plain code with a language- class.
function highlightCode(code, lang) {
  const hljs = window.hljs;
  if (!lang || !hljs || typeof hljs.highlightElement !== 'function') return;
  if (typeof hljs.getLanguage === 'function' && !hljs.getLanguage(lang)) return;
  try {
    hljs.highlightElement(code);
  } catch {
    /* left as plain text */
  }
}

function codeBlock(ctx, r, b) {
  const code = el('code', { class: b.lang ? 'language-' + b.lang : null, text: b.code });
  highlightCode(code, b.lang);
  const cs = chips(ctx, r, b.item);
  return el(
    'div',
    { class: 'anchored-code' },
    el(
      'div',
      { class: 'anchored-code__bar' },
      el('span', { class: 'anchored-code__lang', text: b.lang || 'code' }),
      b.title ? el('span', { class: 'anchored-code__title', text: b.title }) : null,
      b.item && b.item.verified === false ? unverifiedMark() : null,
      cs.length ? el('span', { class: 'anchored-code__cites' }, cs) : null,
      copyButton(ctx, 'Copy code', () => b.code, 'Copy', 'anchored-code__copy'),
    ),
    el('pre', { class: 'anchored-sentence anchored-pre' }, code),
  );
}

// One entry of a paragraph (the sentence, its chips) or of a list (an item).
function entry(ctx, r, b, e) {
  return b.type === 'p' ? sentence(ctx, r, e) : el('li', {}, sentence(ctx, r, e));
}

// A table: its header and rows (each cell's inline Markdown), the citations below it.
function tableBlock(ctx, r, b) {
  const cs = chips(ctx, r, b.item);
  const cells = (tag, row) => el('tr', {}, row.map((nodes) => el(tag, tag === 'th' ? { scope: 'col' } : {}, inline(ctx, nodes))));
  return el(
    'div',
    { class: 'anchored-table' },
    el('table', { class: 'anchored-sentence' }, el('thead', {}, cells('th', b.header)), el('tbody', {}, b.rows.map((row) => cells('td', row)))),
    b.item && b.item.verified === false ? unverifiedMark() : null,
    cs.length ? el('div', { class: 'anchored-table__cites' }, cs) : null,
  );
}

function block(ctx, r, b) {
  if (b.type === 'code') return codeBlock(ctx, r, b);
  if (b.type === 'table') return tableBlock(ctx, r, b);
  if (b.type === 'p') return el('p', { class: 'anchored-p' }, b.items.map((e) => entry(ctx, r, b, e)));
  return el(
    b.ordered ? 'ol' : 'ul',
    { class: 'anchored-list', start: b.ordered && b.start !== 1 ? b.start : null },
    b.items.map((e) => entry(ctx, r, b, e)),
  );
}

function answerBody(ctx, r) {
  return el('div', { class: 'anchored-answer' }, answerBlocks(r.answer).map((b) => block(ctx, r, b)));
}

function renderReply(ctx, turn) {
  const r = turn.reply;
  const out = [];
  if (r.mode === 'extractive' && !r.abstained) {
    // A tentative quote: the evidence falls short of a sure answer (API `tentative`).
    const closest = r.tentative && !r.abstained;
    const title = closest ? 'The docs may not answer this exactly: this is the passage closest to your question, word for word' : 'Sentences taken word for word from the pages below';
    out.push(el('p', { class: 'anchored-badge', title, text: closest ? 'Closest passage in the docs' : 'Quoted from the docs' }));
  }
  const langNote = languageNote(r); // the answer comes from pages in another language
  if (langNote) out.push(langNote);
  if (r.abstained) {
    // What the model said the docs do not cover, and the closest they come (API
    // `coverage: none`), drawn with its chips; else the generic line.
    const said = r.answer.length ? answerBody(ctx, r) : null;
    out.push(
      el(
        'div',
        { class: 'anchored-abstain' },
        el('p', { class: 'anchored-abstain__title', text: 'The docs don’t seem to cover this.' }),
        said,
      ),
    );
    if (r.citations.length) out.push(sources(ctx, r, 'What the docs do cover'));
  } else {
    out.push(answerBody(ctx, r));
    if (r.citations.length) out.push(sources(ctx, r, 'Sources'));
  }
  const meta = r.passages_considered ? `Based on ${r.passages_considered} passages read` : '';
  if (r.version) out.push(el('p', { class: 'anchored-version-note', text: `From the docs of version ${r.version}` }));
  out.push(
    el('div', { class: 'anchored-actions' }, meta ? el('span', { class: 'anchored-meta', text: meta }) : null, r.abstained ? null : copyButton(ctx, 'Copy answer as Markdown', () => toMarkdown(r, ctx.hrefFor, ctx.linkFor)), ctx.questionLink ? copyButton(ctx, 'Copy link to this question', () => ctx.questionLink(turn.q), 'Copy link', 'anchored-btn', LINK) : null, ...(r.id ? feedback(ctx, turn) : [])),
  );
  return out;
}

function renderError(ctx, turn) {
  const e = turn.error;
  const lines = {
    network: 'The docs assistant can’t be reached right now.',
    timeout: 'The docs assistant is taking too long to answer.',
    rate: 'Too many questions are being asked right now.' + (e.retryAfter ? ` Please try again in ${e.retryAfter} s.` : ' Please try again in a moment.'),
    server: 'The docs assistant is unavailable right now.',
    bad: e.message,
  };
  const search = el('a', { class: 'anchored-search-link', href: ctx.searchHref(turn.q) }, `Search the docs for “${turn.q}”`);
  search.addEventListener('click', (ev) => {
    if (ctx.openSearch(turn.q)) ev.preventDefault();
  });
  return el(
    'div',
    { class: 'anchored-error', role: 'alert' },
    el('p', { class: 'anchored-error__title', text: lines[e.kind] || e.message }),
    e.detail && e.kind !== 'bad' ? el('p', { class: 'anchored-error__detail', text: e.detail }) : null,
    el(
      'p',
      { class: 'anchored-error__actions' },
      e.kind === 'bad' ? null : el('button', { type: 'button', class: 'anchored-btn', onclick: () => ctx.retry(turn) }, 'Try again'),
      ' ',
      search,
    ),
  );
}

/** The content of a turn: its live view while it streams, its reply, its error, or a note that it was cancelled. */
export function renderTurnBody(ctx, turn) {
  if (turn.live) return [turn.live.node];
  if (turn.reply) return renderReply(ctx, turn);
  if (turn.error) return [renderError(ctx, turn)];
  if (turn.cancelled) return [el('p', { class: 'anchored-meta', text: 'Cancelled.' })];
  return [];
}

/**
 * The view of a turn while its answer streams: `sources(list)` shows the passages being
 * read, `sentence({index, text, citations})` adds a verified sentence in its place (in the
 * order of `index`; citations in the sources' numbering). Sentences are drawn with the
 * same Markdown subset as the final answer and only ever appended (earlier ones are left
 * as they are); chips are numbered 1..n in order of first appearance, as the final record
 * numbers them, but stay plain until the final record replaces the whole view.
 */
export function liveView(ctx) {
  const pctx = { ...ctx, provisional: true };
  const answer = el('div', { class: 'anchored-answer anchored-answer--live' });
  const read = el('div', { class: 'anchored-live__sources' });
  const node = el('div', { class: 'anchored-live' }, answer, read);
  const byN = new Map(); // source number -> source
  const shown = new Map(); // source number -> chip number
  const r = { answer: [], citations: [] };
  const waiting = []; // sentences by index, until the ones before them arrive
  const drawn = []; // {el, count} per block drawn so far
  const draw = () => {
    answerBlocks(r.answer).forEach((b, i) => {
      const have = drawn[i];
      if (!have) {
        const n = block(pctx, r, b);
        answer.append(n);
        drawn.push({ el: n, count: b.items ? b.items.length : 0 });
        return;
      }
      if (!b.items) return; // a code block is one item: complete when drawn
      for (const e of b.items.slice(have.count)) have.el.append(...[entry(pctx, r, b, e)].flat(Infinity).filter((k) => k != null));
      have.count = b.items.length;
    });
  };
  return {
    node,
    sources(list) {
      for (const c of list) byN.set(c.n, c);
      // The pages being read, each with how many of its passages (the chips will name sections).
      const pages = groupByPage(list);
      read.replaceChildren(
        list.length
          ? el(
              'div',
              { class: 'anchored-sources anchored-sources--live' },
              el('h3', { class: 'anchored-sources__title', text: `Reading ${list.length} passage${list.length === 1 ? '' : 's'} from` }),
              el(
                'ul',
                { class: 'anchored-live__pages' },
                pages.map((g) => el('li', { class: 'anchored-live__page', title: g.items.map(citationPath).join('\n') }, g.title, g.items.length > 1 ? el('span', { class: 'anchored-live__count', text: ' ×' + g.items.length }) : null)),
              ),
            )
          : null,
      );
    },
    sentence(s) {
      if (s.index < r.answer.length || waiting[s.index]) return; // already have it
      waiting[s.index] = s;
      while (waiting[r.answer.length]) {
        const next = waiting[r.answer.length];
        const cites = [];
        for (const n of next.citations) {
          const c = byN.get(n);
          if (!c) continue;
          if (!shown.has(n)) {
            shown.set(n, shown.size + 1);
            r.citations.push({ ...c, n: shown.get(n) });
          }
          cites.push(shown.get(n));
        }
        const flags = { ...(next.verified === false ? { verified: false } : {}), ...(next.note ? { note: true } : {}) };
        r.answer.push({ text: next.text, citations: [...new Set(cites)].sort((a, b) => a - b), ...flags });
      }
      draw();
    },
  };
}
