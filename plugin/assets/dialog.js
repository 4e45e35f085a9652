// The "Ask the docs" dialog: question box, staged progress, cited answer, sources,
// follow-ups, scope, copy, feedback. Every piece of data goes in as text nodes.
import { apiUrl, postJSON, readAnswer } from './api.js';
import {
  answerText,
  citationHref,
  citationPath,
  groupByPage,
  prefixLabel,
  sectionPrefix,
  toMarkdown,
} from './text.js';

const STORE = 'anchored:conversation';
const STAGES = [
  [0, 'Searching the docs…'],
  [1500, 'Reading the best passages…'],
  [4000, 'Writing the answer…'],
];
const REASONS = [
  ['incorrect', 'Wrong or misleading'],
  ['off_topic', 'Not what I asked'],
  ['missing', 'Not covered well'],
  ['bad_citation', 'Sources don’t match'],
];
const ICONS = {
  ask: 'M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H8l-4 4V5a2 2 0 0 1 2-2m0 2v12.2L7.2 16H20V5H4m7 8h2v2h-2v-2m1-7a3 3 0 0 1 3 3c0 1-.6 1.6-1.2 2-.5.4-.8.6-.8 1h-2c0-1.1.6-1.6 1.1-2 .5-.3.9-.6.9-1a1 1 0 0 0-2 0H9a3 3 0 0 1 3-3z',
  close: 'M19 6.4 17.6 5 12 10.6 6.4 5 5 6.4 10.6 12 5 17.6 6.4 19 12 13.4 17.6 19 19 17.6 13.4 12z',
  send: 'M2 21l21-9L2 3v7l15 2-15 2z',
  up: 'M1 21h4V9H1v12zm22-11c0-1.1-.9-2-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.5-1.1L14.2 1 7.6 7.6C7.2 8 7 8.5 7 9v10c0 1.1.9 2 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7v-2z',
  down: 'M15 3H6c-.8 0-1.5.5-1.8 1.2l-3 7.1c-.1.2-.2.5-.2.7v2c0 1.1.9 2 2 2h6.3l-1 4.6v.3c0 .4.2.8.5 1.1L9.8 23l6.6-6.6c.4-.4.6-.9.6-1.4V5c0-1.1-.9-2-2-2zm4 0v12h4V3h-4z',
  copy: 'M16 1H4a2 2 0 0 0-2 2v14h2V3h12V1zm3 4H8a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h11a2 2 0 0 0 2-2V7a2 2 0 0 0-2-2zm0 16H8V7h11v14z',
  reset: 'M17.6 6.4A8 8 0 1 0 19.7 14h-2.1A6 6 0 1 1 12 6c1.7 0 3.1.7 4.2 1.8L13 11h7V4l-2.4 2.4z',
};

/** Build an element; props are attributes ("class", "text" and "on…" are special). Children become text nodes or elements. */
export function el(tag, props = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat(Infinity)) if (k != null && k !== false) e.append(k);
  return e;
}

/** An inline SVG icon from the fixed path table above. */
export function icon(name) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICONS[name]);
  svg.append(path);
  return svg;
}

function load() {
  try {
    const turns = JSON.parse(sessionStorage.getItem(STORE) || '[]');
    return Array.isArray(turns) ? turns.filter((t) => t && typeof t.q === 'string' && t.reply) : [];
  } catch {
    return [];
  }
}

function save(turns) {
  try {
    const keep = turns.filter((t) => t.reply).slice(-6).map(({ q, reply, rating }) => ({ q, reply, rating }));
    sessionStorage.setItem(STORE, JSON.stringify(keep));
  } catch {
    /* storage full or disabled: the conversation just isn't kept across pages */
  }
}

/**
 * Create the dialog. `env`: {cfg, root: URL, page(): string, navigate(citation, href, event),
 * searchHref(q): string, openSearch(q): boolean}. Returns {open(opener), close(), element}.
 */
export function createDialog(env) {
  const { cfg } = env;
  let turns = load();
  let busy = null; // {ctl, timer} while a question is in flight
  let opener = null;
  const uid = 'anchored-' + Math.random().toString(36).slice(2, 8);

  const hrefFor = (c) => citationHref(c, env.root);

  // ---- skeleton
  const tip = el('div', { class: 'anchored-tip', role: 'tooltip', id: uid + '-tip', hidden: true });
  const scopeSel = el('select', { class: 'anchored-scope__select', id: uid + '-scope' });
  const scope = el('label', { class: 'anchored-scope', for: uid + '-scope' }, 'Search in ', scopeSel);
  const log = el('div', { class: 'anchored-log', 'aria-live': 'polite', 'aria-relevant': 'additions' });
  const intro = el(
    'div',
    { class: 'anchored-intro' },
    el('p', { text: 'Answers are written only from these docs, and every sentence links to the passage it comes from.' }),
    el(
      'ul',
      { class: 'anchored-starters', 'aria-label': 'Example questions' },
      (Array.isArray(cfg.starters) ? cfg.starters : []).slice(0, 4).map((s) =>
        el('li', {}, el('button', { type: 'button', class: 'anchored-starter', onclick: () => ask(String(s)) }, String(s))),
      ),
    ),
  );
  const body = el('div', { class: 'anchored-body' }, intro, log);
  const stage = el('span', { class: 'anchored-stage' });
  const cancelBtn = el('button', { type: 'button', class: 'anchored-btn', onclick: () => busy && busy.ctl.abort() }, 'Cancel');
  const status = el('div', { class: 'anchored-status', role: 'status' }, el('span', { class: 'anchored-spinner', 'aria-hidden': 'true' }), stage);
  const input = el('input', {
    type: 'text',
    class: 'anchored-input',
    id: uid + '-q',
    name: 'question',
    placeholder: String(cfg.placeholder || 'Ask the docs…'),
    autocomplete: 'off',
    maxlength: '1000',
    enterkeyhint: 'send',
  });
  const sendBtn = el('button', { type: 'submit', class: 'anchored-send', 'aria-label': 'Ask' }, icon('send'));
  const form = el(
    'form',
    {
      class: 'anchored-form',
      onsubmit: (e) => {
        e.preventDefault();
        ask(input.value);
      },
    },
    el('label', { class: 'anchored-sr', for: uid + '-q', text: 'Your question' }),
    input,
    sendBtn,
    cancelBtn,
  );
  const titleId = uid + '-title';
  const dialog = el(
    'dialog',
    { class: 'anchored-ui anchored-dialog', 'aria-labelledby': titleId },
    el(
      'div',
      { class: 'anchored-frame' },
      el(
        'div',
        { class: 'anchored-head' },
        el('h2', { class: 'anchored-title', id: titleId, text: String(cfg.title || 'Ask the docs') }),
        scope,
        el('button', { type: 'button', class: 'anchored-icon-btn', title: 'New conversation', 'aria-label': 'New conversation', onclick: reset }, icon('reset')),
        el('button', { type: 'button', class: 'anchored-icon-btn', title: 'Close (Esc)', 'aria-label': 'Close', onclick: () => close() }, icon('close')),
      ),
      body,
      status,
      form,
      el('p', { class: 'anchored-foot', text: 'Answers can be incomplete: check the linked passages.' }),
    ),
    tip,
  );
  cancelBtn.hidden = true;
  status.hidden = true;

  function refreshScope() {
    const prefix = cfg.scopes === false ? '' : sectionPrefix(env.page());
    const was = scopeSel.value;
    scopeSel.replaceChildren(el('option', { value: '' }, 'Whole site'));
    if (prefix) scopeSel.append(el('option', { value: prefix }, 'This section: ' + prefixLabel(prefix)));
    scopeSel.value = was === prefix ? prefix : '';
    scope.hidden = !prefix;
  }

  // ---- preview of a cited passage (hover or focus on a chip)
  let tipFor = null;
  function showTip(chip, c) {
    const passage = c.passage.length > 420 ? c.passage.slice(0, 400).trimEnd() + ' …' : c.passage;
    tip.replaceChildren(
      el('span', { class: 'anchored-tip__path', text: citationPath(c) }),
      el('span', { class: 'anchored-tip__text', text: passage }),
    );
    tip.hidden = false;
    tipFor = chip;
    chip.setAttribute('aria-describedby', tip.id);
    const d = dialog.getBoundingClientRect();
    const r = chip.getBoundingClientRect();
    const w = tip.offsetWidth;
    const left = Math.max(8, Math.min(r.left - d.left, d.width - w - 8));
    let top = r.bottom - d.top + 6;
    if (top + tip.offsetHeight > d.height - 8) top = Math.max(8, r.top - d.top - tip.offsetHeight - 6);
    tip.style.left = left + 'px';
    tip.style.top = top + 'px';
  }
  function hideTip() {
    if (tipFor) tipFor.removeAttribute('aria-describedby');
    tip.hidden = true;
    tipFor = null;
  }

  function citeLink(c, cls, ...content) {
    const href = hrefFor(c);
    const props = { class: cls };
    if (!href) return el('span', props, ...content); // unsafe or unusable url: plain text
    props.href = href;
    props.onclick = (e) => env.navigate(c, href, e);
    return el('a', props, ...content);
  }

  function chip(c) {
    const a = citeLink(c, 'anchored-chip', String(c.n));
    a.setAttribute('aria-label', `Source ${c.n}: ${citationPath(c)}`);
    a.addEventListener('mouseenter', () => showTip(a, c));
    a.addEventListener('focus', () => showTip(a, c));
    a.addEventListener('mouseleave', hideTip);
    a.addEventListener('blur', hideTip);
    if (!a.href) a.tabIndex = 0;
    return a;
  }

  function sources(reply, heading) {
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
                el('li', {}, citeLink(c, 'anchored-source', el('span', { class: 'anchored-source__n', text: String(c.n) }), ' ', citationPath(c))),
              ),
            ),
          ),
        ),
      ),
    );
  }

  function feedback(turn) {
    const note = el('span', { class: 'anchored-fb__note', role: 'status' });
    const box = el('div', { class: 'anchored-fb', role: 'group', 'aria-label': 'Was this answer helpful?' });
    const reasonForm = el('form', { class: 'anchored-fb__form', hidden: true });
    const send = async (rating, reason, comment) => {
      const payload = { answer_id: turn.reply.id, rating };
      if (reason) payload.reason = reason;
      if (comment) payload.comment = comment;
      note.textContent = 'Sending…';
      try {
        await postJSON(apiUrl(cfg.endpoint, 'v1/feedback'), payload, { timeout: 15000 });
        turn.rating = rating;
        save(turns);
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
    const name = uid + '-r' + turns.indexOf(turn);
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

  function copyButton(turn) {
    const label = el('span', { text: 'Copy answer' });
    return el(
      'button',
      {
        type: 'button',
        class: 'anchored-btn',
        onclick: async () => {
          const md = toMarkdown(turn.reply, hrefFor);
          let ok = false;
          try {
            await navigator.clipboard.writeText(md);
            ok = true;
          } catch {
            const ta = el('textarea', { class: 'anchored-sr' });
            ta.value = md;
            dialog.append(ta);
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

  function renderReply(turn) {
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
      if (r.citations.length) out.push(sources(r, 'What the docs do cover'));
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
              return c ? chip(c) : null;
            }),
            ' ',
          ]),
        ),
      );
      if (r.citations.length) out.push(sources(r, 'Sources'));
    }
    const meta = r.passages_considered ? `Based on ${r.passages_considered} passages read` : '';
    out.push(
      el('div', { class: 'anchored-actions' }, meta ? el('span', { class: 'anchored-meta', text: meta }) : null, r.abstained ? null : copyButton(turn), ...(r.id ? feedback(turn) : [])),
    );
    return out;
  }

  function renderError(turn) {
    const e = turn.error;
    const lines = {
      network: 'The docs assistant can’t be reached right now.',
      timeout: 'The docs assistant is taking too long to answer.',
      rate: 'Too many questions are being asked right now.' + (e.retryAfter ? ` Please try again in ${e.retryAfter} s.` : ' Please try again in a moment.'),
      server: 'The docs assistant is unavailable right now.',
      bad: e.message,
    };
    const search = el('a', { class: 'anchored-search-link', href: env.searchHref(turn.q) }, `Search the docs for “${turn.q}”`);
    search.addEventListener('click', (ev) => {
      if (env.openSearch(turn.q)) {
        ev.preventDefault();
        close(false);
      }
    });
    return el(
      'div',
      { class: 'anchored-error', role: 'alert' },
      el('p', { class: 'anchored-error__title', text: lines[e.kind] || e.message }),
      e.detail && e.kind !== 'bad' ? el('p', { class: 'anchored-error__detail', text: e.detail }) : null,
      el(
        'p',
        { class: 'anchored-error__actions' },
        e.kind === 'bad' ? null : el('button', { type: 'button', class: 'anchored-btn', onclick: () => retry(turn) }, 'Try again'),
        ' ',
        search,
      ),
    );
  }

  function renderTurn(turn) {
    const a = el('div', { class: 'anchored-a' });
    if (turn.reply) a.append(...renderReply(turn));
    else if (turn.error) a.append(renderError(turn));
    else if (turn.cancelled) a.append(el('p', { class: 'anchored-meta', text: 'Cancelled.' }));
    const node = el(
      'article',
      { class: 'anchored-turn' },
      el('p', { class: 'anchored-q' }, el('span', { class: 'anchored-sr', text: 'You asked: ' }), turn.q),
      a,
    );
    if (turn.node) turn.node.replaceWith(node);
    turn.node = node;
    return node;
  }

  function renderAll() {
    log.replaceChildren(...turns.map(renderTurn));
    intro.hidden = turns.length > 0;
    input.placeholder = turns.length ? 'Ask a follow-up…' : String(cfg.placeholder || 'Ask the docs…');
  }

  function setBusy(on) {
    status.hidden = !on;
    cancelBtn.hidden = !on;
    sendBtn.hidden = on;
    input.readOnly = on;
    if (!on && busy) {
      clearInterval(busy.timer);
      busy = null;
    }
  }

  function history() {
    return turns
      .filter((t) => t.reply)
      .slice(-3)
      .flatMap((t) => [
        { role: 'user', content: t.q },
        { role: 'assistant', content: answerText(t.reply.answer) || 'The docs don’t seem to cover this.' },
      ]);
  }

  async function ask(question, existing) {
    const q = String(question || '').trim();
    if (!q || busy) return;
    const body = { question: q };
    const hist = history();
    if (hist.length) body.history = hist;
    if (scopeSel.value) body.scope = { include: [scopeSel.value] };
    const turn = existing || { q };
    delete turn.error;
    delete turn.cancelled;
    if (!existing) turns.push(turn);
    input.value = '';
    intro.hidden = true;
    const node = renderTurn(turn);
    if (!existing) log.append(node);
    node.scrollIntoView({ block: 'nearest' });

    const ctl = new AbortController();
    const started = Date.now();
    const tick = () => {
      const t = Date.now() - started;
      const label = STAGES.filter(([at]) => t >= at).pop()[1];
      stage.textContent = t > 8000 ? `${label} (${Math.round(t / 1000)} s)` : label;
    };
    busy = { ctl, timer: setInterval(tick, 250) };
    tick();
    setBusy(true);
    try {
      const data = await postJSON(apiUrl(cfg.endpoint, 'v1/ask'), body, {
        signal: ctl.signal,
        timeout: Number(cfg.timeout) || 30000,
      });
      turn.reply = readAnswer(data);
    } catch (e) {
      if (e.kind === 'aborted') {
        turn.cancelled = true;
        input.value = q;
      } else {
        turn.error = { kind: e.kind || 'server', message: String(e.message), detail: e.detail || '', retryAfter: e.retryAfter || 0 };
      }
    }
    setBusy(false);
    renderTurn(turn);
    save(turns);
    input.placeholder = 'Ask a follow-up…';
    if (dialog.open && !dialog.contains(document.activeElement)) input.focus();
    else if (document.activeElement === cancelBtn || document.activeElement === document.body) input.focus();
  }

  function retry(turn) {
    ask(turn.q, turn);
  }

  function reset() {
    if (busy) busy.ctl.abort();
    turns = [];
    save(turns);
    renderAll();
    input.value = '';
    input.focus();
  }

  function open(from) {
    opener = from && from !== document.body ? from : null;
    refreshScope();
    if (!dialog.isConnected) document.body.append(dialog);
    if (!dialog.open) dialog.showModal();
    input.focus();
  }

  function close(restore = true) {
    hideTip();
    if (dialog.open) dialog.close();
    if (restore && opener && opener.isConnected) opener.focus();
  }

  dialog.addEventListener('close', () => {
    hideTip();
    if (opener && opener.isConnected && !dialog.contains(document.activeElement) && document.activeElement === document.body) opener.focus();
  });
  dialog.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !tip.hidden) {
      e.preventDefault(); // first Esc only hides the preview
      hideTip();
    }
  });
  dialog.addEventListener('cancel', (e) => {
    e.preventDefault();
    close();
  });
  // A click on the backdrop (outside the frame) closes the dialog.
  dialog.addEventListener('click', (e) => {
    if (e.target === dialog) close();
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowUp' && !input.value && turns.length) input.value = turns[turns.length - 1].q;
  });

  renderAll();
  return { open, close, element: dialog, ask };
}
