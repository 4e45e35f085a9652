// Citation links: landing on the section and highlighting exactly the cited passage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BASE, FIXTURES, INSTANT_SITE, SHOTS, MKDOCS_SITE, OTHER, PAGE, SITE, ask, flat, isHarness, key, fileBrowser, newPage as pageIn, open, readHighlight, until,
} from './helpers.js';
import { join } from 'node:path';
import { encodeSpec, specFor } from '../../plugin/assets/text.js';

const browser = await fileBrowser();
/** A page (helpers.newPage) whose loads may take a minute: the machine is shared and busy. */
async function newPage(...args) {
  const page = await pageIn(...args);
  page.setDefaultNavigationTimeout(90000);
  return page;
}

/**
 * The highlight equals the passage: marks carry exactly its characters, the marked range reads as it does.
 * Waited for: highlight.js is imported only once a page has a passage to mark, after the page
 * itself, and a busy machine can take longer than 4 s for that; waiting longer costs nothing
 * when it is there, and a highlight that never comes still fails.
 */
async function assertHighlighted(page, passage, what) {
  const hl = await until(async () => {
    const h = await readHighlight(page);
    return h.count && h.inView ? h : null;
  }, 20000) || (await readHighlight(page));
  assert.ok(hl.count > 0, `${what}: nothing highlighted`);
  assert.equal(key(hl.marks), key(passage), `${what}: marked text differs from the passage`);
  assert.equal(flat(hl.range), flat(passage), `${what}: highlighted range differs from the passage`);
  assert.ok(hl.inView, `${what}: highlight not scrolled into view`);
}

/** The chip links of an answer, in citation order. */
async function chipLinks(page) {
  return page.$$eval('.anchored-source', (a) => a.filter((x) => x.href).map((x) => x.href));
}

test('clicking a chip on another page lands on the section and highlights exactly the passage', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  const cited = FIXTURES.default.citations[2]; // a list
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip', { hasText: '3' }).first().click()]);
  const url = new URL(page.url());
  assert.equal(url.pathname, SITE + PAGE);
  assert.equal(url.hash, '#install-steps');
  assert.equal(url.search, '', 'the highlight parameter is removed from the address bar');
  await assertHighlighted(page, cited.highlight, 'list');
  assert.ok(await page.locator('.anchored-pill').isVisible());
  await page.context().close();
});

test('the same link opened in a new tab highlights every kind of passage', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  const links = await chipLinks(page);
  await ask(page, 'Where is the cache? extractive');
  const more = (await chipLinks(page)).slice(links.length);
  const cases = [
    ...FIXTURES.default.citations.map((c, i) => [c, links[i]]),
    ...FIXTURES.extractive.citations.map((c, i) => [c, more[i]]),
  ];
  assert.equal(cases.length, 7);
  for (const [c, href] of cases) {
    assert.ok(href, `no link for ${c.url}`);
    const tab = await newPage(browser);
    await tab.goto(href);
    await tab.waitForSelector('.anchored-open', { state: 'attached' });
    const u = new URL(tab.url());
    assert.equal(u.pathname + u.hash, SITE + c.url, 'lands on page#anchor');
    assert.equal(u.search, '');
    await assertHighlighted(tab, c.highlight, c.url);
    assert.deepEqual(tab.errors, []);
    await tab.context().close();
  }
  await page.context().close();
});

test('a link built by hand (first and last words) highlights the range between them', async () => {
  const page = await newPage(browser);
  const passage = FIXTURES.default.citations[1].highlight; // the table
  await open(page, PAGE, { query: '?anchored-hl=Option+Default+meaning~OFFER+the+current-section+scope#options' });
  await assertHighlighted(page, passage, 'hand-made link');
  await page.context().close();
});

/** Gaps (px) between marks side by side on one line: none when the span reads as one mark. */
async function markGaps(page) {
  return page.$$eval('mark.anchored-hl', (ms) => {
    const lines = new Map();
    for (const r of ms.flatMap((m) => [...m.getClientRects()]).filter((x) => x.width > 0)) {
      const k = Math.round(r.top);
      if (!lines.has(k)) lines.set(k, []);
      lines.get(k).push(r);
    }
    const gaps = [];
    for (const rs of lines.values()) {
      rs.sort((x, y) => x.left - y.left);
      for (let i = 1; i < rs.length; i++) if (rs[i].left - rs[i - 1].right > 0.5) gaps.push(Math.round(rs[i].left - rs[i - 1].right));
    }
    return gaps;
  });
}

/** Open the page with a hand-made highlight of `span` in section `anchor`. */
async function openSpan(page, span, anchor, opts = {}) {
  await open(page, PAGE, { ...opts, query: `?anchored-hl=${encodeSpec(specFor(span))}#${anchor}` });
}

test('a span inside a code block: only its lines, as one continuous mark (no gaps at tokens)', async () => {
  const page = await newPage(browser);
  const span = '- anchored:\n      endpoint: https://api.example.com/';
  await openSpan(page, span, 'example');
  await assertHighlighted(page, span, 'two lines of code');
  const tokens = await page.$$eval('#example ~ div pre span, #example ~ pre span', (x) => x.length);
  assert.ok(tokens > 4, 'the code block is highlighted by tokens (pygments)');
  assert.deepEqual(await markGaps(page), [], 'gaps between the marks of one line');
  assert.equal(await page.locator('mark.anchored-hl').count(), 1, 'one mark for one run of code');
  const unmarked = await page.$eval('mark.anchored-hl', (m) => m.closest('pre').textContent.replace(m.textContent, ''));
  assert.match(unmarked, /search/, 'the other lines of the block are not marked');
  await page.context().close();
});

test('a span across inline elements (bold, inline code) is one mark; a table row is shaded whole', async () => {
  const page = await newPage(browser);
  const sentence = 'An empty string means the API is served from the same origin as the site, which is what anchored serve does.';
  await openSpan(page, sentence, 'endpoint');
  await assertHighlighted(page, sentence, 'sentence with <strong> and <code>');
  assert.equal(await page.locator('mark.anchored-hl').count(), 1);
  assert.deepEqual(await page.$$eval('mark.anchored-hl strong, mark.anchored-hl code', (x) => x.map((e) => e.tagName)), ['STRONG', 'CODE']);
  assert.deepEqual(await markGaps(page), []);
  // Only the cited sentence: the one before it is not marked.
  assert.ok(!(await page.$eval('mark.anchored-hl', (m) => m.textContent)).includes('Set the'));
  const row = 'shortcut | a | Key that opens the dialog';
  await openSpan(page, row, 'options');
  await assertHighlighted(page, row, 'table row');
  assert.deepEqual(await page.$$eval('tr.anchored-hl-block', (r) => r.map((x) => x.textContent.trim().split(/\s+/)[0])), ['shortcut']);
  await page.context().close();
});

test('each chip highlights its own span: one passage cited by two sentences', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await ask(page, 'How do I configure the endpoint?');
  const item = FIXTURES.default.answer[3]; // cites [4, 1]; [1] with its own span
  const own = Object.fromEntries(item.spans.map((x) => [x.n, x.highlight]));
  const chips = page.locator('.anchored-answer .anchored-chip', { hasText: /^1$/ });
  assert.equal(await chips.count(), 2, 'passage 1 is cited twice');
  await chips.nth(1).click();
  await assertHighlighted(page, own[1], 'chip [1] of the fourth sentence');
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await chips.nth(0).click();
  await assertHighlighted(page, FIXTURES.default.citations[0].highlight, 'chip [1] of the first sentence');
  await page.context().close();
});

for (const [name, span, anchor] of [
  ['prose', 'An empty string means the API is served from the same origin as the site, which is what anchored serve does.', 'endpoint'],
  ['code', '- anchored:\n      endpoint: https://api.example.com/', 'example'],
  ['table', 'shortcut | a | Key that opens the dialog', 'options'],
]) {
  test(`exact-span screenshot: ${name} (highlight-${name}.png; ANCHORED_SCREENSHOTS=site/images for the docs)`, async () => {
    const page = await newPage(browser, { viewport: { width: 1000, height: 560 } });
    await openSpan(page, span, anchor);
    await assertHighlighted(page, span, name);
    await page.$$eval('mark.anchored-hl', (m) => Promise.all(m.flatMap((x) => x.getAnimations().map((a) => a.finished))));
    await page.screenshot({ path: join(SHOTS, `highlight-${name}.png`) });
    await page.context().close();
  });
}

test('text the index leaves out (aria-hidden, data-search-exclude) is skipped, as the back end does', async () => {
  const page = await newPage(browser);
  const passage = 'Run the build and wait for the index to be written.'; // the back end's section text
  await open(page, PAGE, { query: `?anchored-hl=${encodeURIComponent(passage)}#decorations` });
  await page.waitForSelector('mark.anchored-hl');
  const marked = await page.$$eval('mark.anchored-hl', (m) => m.map((x) => x.textContent).join(''));
  assert.equal(key(marked), key(passage));
  assert.ok(!marked.includes('🚀') && !marked.includes('not indexed'));
  await page.context().close();
});

test('a citation to the current page highlights without reloading', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await page.evaluate(() => {
    window.__stay = 'same document';
  });
  let navigations = 0;
  page.on('load', () => navigations++);
  await ask(page, 'How do I configure the endpoint?');
  await page.locator('.anchored-answer .anchored-chip', { hasText: '2' }).first().click();
  await assertHighlighted(page, FIXTURES.default.citations[1].highlight, 'table on this page');
  assert.equal(await page.evaluate(() => window.__stay), 'same document', 'the page was reloaded');
  assert.equal(navigations, 0);
  assert.equal(new URL(page.url()).hash, '#options');
  assert.ok(await page.locator('dialog.anchored-dialog').evaluate((d) => !d.open), 'dialog closed to show the passage');
  // Another chip moves the highlight.
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await page.locator('.anchored-answer .anchored-chip', { hasText: '4' }).first().click();
  await assertHighlighted(page, FIXTURES.default.citations[3].highlight, 'code on this page');
  await page.context().close();
});

test('a passage inside a collapsed details block is opened and highlighted', async () => {
  const page = await newPage(browser);
  const c = FIXTURES.extractive.citations[0];
  await open(page, OTHER);
  await ask(page, 'Where is the cache? extractive');
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip', { hasText: '1' }).first().click()]);
  // highlight.js loads lazily after the navigation: wait for the mark before reading it.
  await assertHighlighted(page, c.highlight, 'details');
  assert.ok(await page.$eval('mark.anchored-hl', (m) => m.closest('details').open));
  await page.context().close();
});

test('Esc and the clear control remove the highlight and restore the text nodes', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  const before = await page.$eval('article', (a) => [a.textContent, a.querySelectorAll('*').length]);
  const href = await page.evaluate(async (c) => {
    const { citationHref } = await import(new URL('assets/anchored/text.js', new URL(JSON.parse(document.getElementById('anchored-config').textContent).root, location.href)).href);
    return citationHref(c, new URL(JSON.parse(document.getElementById('anchored-config').textContent).root, location.href));
  }, FIXTURES.default.citations[1]);
  await page.goto(href);
  await page.waitForSelector('mark.anchored-hl');
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('mark.anchored-hl').count(), 0);
  assert.equal(await page.locator('.anchored-pill').count(), 0);
  assert.deepEqual(await page.$eval('article', (a) => [a.textContent, a.querySelectorAll('*').length]), before);
  const textNodes = await page.$eval('table', (t) => [...t.querySelectorAll('td, th')].every((c) => [...c.childNodes].every((n) => n.nodeType !== 3 || n.nextSibling?.nodeType !== 3)));
  assert.ok(textNodes, 'split text nodes are merged back');
  await page.goto(href);
  await page.waitForSelector('mark.anchored-hl');
  await page.click('.anchored-pill__clear');
  assert.equal(await page.locator('mark.anchored-hl').count(), 0);
  await page.context().close();
});

test('a passage no longer on the page: the section is shown and the reader is told', async () => {
  const page = await newPage(browser);
  await open(page, PAGE, { query: '?anchored-hl=words+that+are+nowhere+on+this+page#example' });
  // The pill first (textContent waits for it): it is shown once the lazily loaded
  // highlight.js has looked for the passage, so the checks after it are not made too early.
  assert.match(await page.textContent('.anchored-pill'), /not found/);
  assert.equal(await page.locator('mark.anchored-hl').count(), 0);
  assert.ok(await page.$eval('#example', (h) => { const r = h.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("MkDocs' default theme: Ask button next to search, permalinks ignored, highlight lands", async (t) => {
  if (!MKDOCS_SITE) return t.skip('ANCHORED_TEST_MKDOCS_SITE is empty');
  const page = await newPage(browser);
  await open(page, OTHER, { site: MKDOCS_SITE });
  const placed = await page.$eval('.anchored-open', (b) => [b.closest('.navbar-nav') !== null, b.closest('li').previousElementSibling?.textContent.trim()]);
  assert.deepEqual(placed, [true, 'Search']);
  await ask(page, 'How do I configure the endpoint?');
  // The theme's own shortcuts ("n" = next page) stay quiet while the dialog has focus.
  const here = page.url();
  await page.locator('.anchored-answer .anchored-chip').first().focus();
  await page.keyboard.press('n');
  await page.waitForTimeout(300);
  assert.equal(page.url(), here, '"n" in the dialog navigated the page');
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip', { hasText: '2' }).first().click()]);
  assert.equal(new URL(page.url()).pathname, MKDOCS_SITE + PAGE);
  await assertHighlighted(page, FIXTURES.default.citations[1].highlight, 'mkdocs theme table');
  // Error fallback opens the theme's own search modal with the question.
  await ask(page, 'Is it down?'); // opens the dialog itself
  await page.click('.anchored-search-link');
  await page.waitForSelector('#mkdocs_search_modal.show');
  assert.equal(await page.inputValue('#mkdocs-search-query'), 'Is it down?');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("Material's instant navigation: the widget follows page swaps without reloading", async (t) => {
  if (!INSTANT_SITE) return t.skip('ANCHORED_TEST_INSTANT_SITE is empty');
  const page = await newPage(browser);
  await open(page, '', { site: INSTANT_SITE });
  await page.evaluate(() => {
    window.__stay = 'same document';
  });
  // A Material link swaps the page in place; the button stays, the scope follows the new page.
  await page.click('article a[href*="configuration"]');
  await page.waitForFunction((p) => location.pathname.endsWith(p), PAGE);
  assert.equal(await page.evaluate(() => window.__stay), 'same document', 'instant navigation expected');
  assert.equal(await page.locator('.anchored-open').count(), 1);
  await ask(page, 'How do I configure the endpoint?');
  assert.ok(await page.locator('.anchored-scope:not(.anchored-lang):not(.anchored-version)').isVisible(), 'section scope offered on a user-guide page');
  // A chip to another page: Material swaps it in, the widget highlights there.
  await page.locator('.anchored-answer .anchored-chip', { hasText: '5' }).first().click();
  await page.waitForFunction(() => location.pathname.endsWith('/highlighting/'));
  await assertHighlighted(page, FIXTURES.default.citations[4].highlight, 'after instant navigation');
  assert.equal(await page.evaluate(() => window.__stay), 'same document');
  assert.equal(new URL(page.url()).search, '');
  assert.ok(await page.locator('dialog.anchored-dialog').evaluate((d) => !d.open), 'dialog out of the way');
  assert.equal(await page.locator('.anchored-open').count(), 1);
  // Back: Material swaps the previous page in again, and the conversation is showing.
  await page.goBack();
  await page.waitForFunction((p) => location.pathname.endsWith(p), PAGE);
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.equal(await page.evaluate(() => window.__stay), 'same document');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the live server answer: every chip lands on its passage', async () => {
  // Uses whatever /v1/ask really answers (fixtures on the harness, real answers on `anchored serve`).
  const page = await newPage(browser, { live: true });
  await open(page, OTHER);
  await ask(page, process.env.ANCHORED_TEST_QUESTION || 'How do I configure the endpoint?');
  const reply = await page.evaluate(() => JSON.parse(sessionStorage.getItem('anchored:conversation')).pop().reply);
  assert.ok(reply.citations.length > 0, 'the answer cites something');
  const hrefs = await chipLinks(page);
  for (const [i, c] of reply.citations.entries()) {
    const tab = await newPage(browser, { live: true });
    await tab.goto(hrefs[i]);
    await tab.waitForSelector('.anchored-open', { state: 'attached' });
    await assertHighlighted(tab, c.highlight, c.url);
    await tab.context().close();
  }
  assert.ok(BASE);
  await page.context().close();
});

// ---- the API's `link`, opened where the widget does not run (a chat bot, the CLI, an agent)

/** Where the first element holding `term` (case/space-insensitive) is, relative to the viewport. */
async function termBox(page, term, anchor = '') {
  return page.evaluate(([t, anchor]) => {
    const norm = (s) => s.replace(/\s+/g, ' ').trim().toLowerCase();
    const want = norm(t);
    let best = null;
    for (const e of document.querySelectorAll('article *, .md-content *, [role="main"] *')) {
      if (e.closest('nav, .md-sidebar, .md-header, .md-footer')) continue;
      if (norm(e.textContent).includes(want)) best = e; // document order: the last hit is the deepest of the first match
      else if (best && !best.contains(e) && best.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING) break;
    }
    if (!best) return null;
    const r = best.getBoundingClientRect();
    const h = anchor && document.getElementById(anchor);
    const inSection = !h || !!(h.compareDocumentPosition(best) & Node.DOCUMENT_POSITION_FOLLOWING);
    return { top: r.top, bottom: r.bottom, height: innerHeight, scrollY, inSection };
  }, [term, anchor]);
}

test("a citation's link, opened fresh without the widget, scrolls to the passage by its text fragment", { skip: !(await isHarness()) && 'needs the harness (it adds `link` with anchored_query.citations.links)' }, async (t) => {
  const res = await fetch(BASE + '/v1/ask', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ question: 'How do I configure the endpoint?' }) });
  const reply = await res.json();
  assert.equal(reply.citations.length, FIXTURES.default.citations.length);
  let scrolled = 0;
  const ambiguous = [];
  for (const c of reply.citations) {
    assert.ok(c.link.startsWith(c.url.split('#')[0] + '?anchored-hl='), c.link);
    const [, directive] = c.link.split(':~:text=');
    const start = decodeURIComponent(directive.split(',')[0]);
    const anchor = c.url.split('#')[1] || '';
    for (const link of [c.link, c.link.replace(/#[^:]*:~:/, '#:~:')]) {
      const page = await newPage(browser, { viewport: { width: 1000, height: 360 } });
      await page.route('**/assets/anchored/**', (r) => r.abort()); // no widget on this page
      await page.goto(BASE + SITE + link);
      const box = await until(async () => {
        const b = await termBox(page, start, anchor);
        return b && b.top >= 0 && b.bottom <= b.height ? b : null;
      }, 5000) || (await termBox(page, start, anchor));
      assert.ok(box, `${link}: "${start}" not on the page`);
      assert.ok(box.top >= 0 && box.bottom <= box.height, `${link}: "${start}" not in view (${JSON.stringify(box)})`);
      // Browsers mark the first match on the page; a start phrase that also occurs above the
      // section lands there (known limit, documented in the HTTP API page): counted, not failed.
      if (!box.inSection) ambiguous.push(`${c.n}: "${start}"`);
      assert.equal(await page.locator('mark.anchored-hl').count(), 0, 'the widget did not run');
      if (box.scrollY > 0) scrolled++;
      await page.context().close();
    }
  }
  // The same page with a text fragment that matches nothing stays at the top: the scrolling above was the fragment's.
  const page = await newPage(browser, { viewport: { width: 1000, height: 360 } });
  await page.route('**/assets/anchored/**', (r) => r.abort());
  await page.goto(BASE + SITE + PAGE + '#:~:text=zzqx%20not%20on%20the%20page');
  await page.waitForTimeout(500);
  assert.equal(await page.evaluate(() => scrollY), 0);
  assert.ok(scrolled >= reply.citations.length, `only ${scrolled} links scrolled the page`);
  // In this fixture only the table's start phrase ("Base URL of the query") also occurs earlier.
  t.diagnostic(`start phrase found above its section: ${ambiguous.join('; ') || 'none'}`);
  assert.ok(ambiguous.length <= 2, `landed above the cited section: ${ambiguous.join('; ')}`);
  await page.context().close();
});
