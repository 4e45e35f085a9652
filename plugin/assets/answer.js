// One turn of the conversation: the answer with its citation chips, the sources grouped
// by page, copy, feedback; or the error with a way out. Data only ever becomes text nodes.
//
// `ctx` is what the dialog lends: hrefFor(citation), navigate(citation, href, event),
// showTip(chip, citation), hideTip(), sendFeedback(payload): Promise, saved(),
// host (element for the copy fallback), retry(turn), searchHref(q), openSearch(q): boolean.
import { el, icon } from './dom.js';
import { answerText, citationPath, groupByPage, toMarkdown } from './text.js';

const REASONS = [
  ['incorrect', 'Wrong or misleading'],
  ['off_topic', 'Not what I asked'],
  ['missing', 'Not covered well'],
  ['bad_citation', 'Sources don’t match'],
];
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

function copyButton(ctx, turn) {
  const label = el('span', { text: 'Copy answer' });
  return el(
    'button',
    {
      type: 'button',
      class: 'anchored-btn',
      onclick: async () => {
        const md = toMarkdown(turn.reply, ctx.hrefFor);
        let ok = false;
        try {
          await navigator.clipboard.writeText(md);
          ok = true;
        } catch {
          const ta = el('textarea', { class: 'anchored-sr' });
          ta.value = md;
          ctx.host.append(ta); // inside the modal dialog: the rest of the page is inert
          ta.select();
          try {
            ok = document.execCommand('copy');
          } catch {
            ok = false;
          }
          ta.remove();
        }
        label.textContent = ok ? 'Copied' : 'Copy failed';
        setTimeout(() => (label.textContent = 'Copy answer'), 2000);
      },
    },
    icon('copy'),
    label,
  );
}

function renderReply(ctx, turn) {
  const r = turn.reply;
  const out = [];
  if (r.mode === 'extractive') {
    out.push(el('p', { class: 'anchored-badge', text: 'Quoted from the docs — no AI model configured' }));
  }
  if (r.abstained) {
    const said = answerText(r.answer);
    out.push(
      el(
        'div',
        { class: 'anchored-abstain' },
        el('p', { class: 'anchored-abstain__title', text: 'The docs don’t seem to cover this.' }),
        said ? el('p', { text: said }) : null,
      ),
    );
    if (r.citations.length) out.push(sources(ctx, r, 'What the docs do cover'));
  } else {
    out.push(
      el(
        'p',
        { class: 'anchored-answer' },
        r.answer.map((s) => [
          el('span', { class: 'anchored-sentence', text: s.text.trim() }),
          s.citations.length ? ' ' : null,
          s.citations.map((n) => {
            const c = r.citations.find((x) => x.n === n);
            return c ? chip(ctx, c) : null;
          }),
          ' ',
        ]),
      ),
    );
    if (r.citations.length) out.push(sources(ctx, r, 'Sources'));
  }
  const meta = r.passages_considered ? `Based on ${r.passages_considered} passages read` : '';
  out.push(
    el('div', { class: 'anchored-actions' }, meta ? el('span', { class: 'anchored-meta', text: meta }) : null, r.abstained ? null : copyButton(ctx, turn), ...(r.id ? feedback(ctx, turn) : [])),
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

/** The content of a finished turn: its reply, its error, or a note that it was cancelled. */
export function renderTurnBody(ctx, turn) {
  if (turn.reply) return renderReply(ctx, turn);
  if (turn.error) return [renderError(ctx, turn)];
  if (turn.cancelled) return [el('p', { class: 'anchored-meta', text: 'Cancelled.' })];
  return [];
}
