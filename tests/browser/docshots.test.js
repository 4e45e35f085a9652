// Pictures for the docs (site/ask-box.md) of what other files test without keeping a
// picture: Back after a citation, and a citation's `link` opened without the ask box;
// and Back on MkDocs' own theme on a phone (widget.test.js checks Material at 1280 px).
// `ANCHORED_SCREENSHOTS=site/images bash tests/browser/run.sh docshots.test.js` refreshes
// site/images/back-conversation.png and site/images/link-text-fragment.png.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { BASE, MKDOCS_SITE, OTHER, SHOTS, SITE, ask, isHarness, launch, newPage, open } from './helpers.js';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser.close();
});

const Q = 'How do I configure the endpoint?';

test('Back after a citation to another page: the conversation is showing (back-conversation.png)', async () => {
  const page = await newPage(browser, { viewport: { width: 1280, height: 720 } });
  page.setDefaultNavigationTimeout(90000);
  await open(page, OTHER);
  await ask(page, Q);
  const chip = page.locator('.anchored-answer .anchored-chip').nth(2);
  await Promise.all([page.waitForNavigation(), chip.click()]);
  await page.waitForSelector('mark.anchored-hl');
  await page.goBack();
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.ok(new URL(page.url()).pathname.endsWith('/' + OTHER), `back on ${OTHER}: ${page.url()}`);
  assert.equal(await page.locator('.anchored-turn').count(), 1);
  assert.equal(await page.textContent('.anchored-q'), `You asked: ${Q}`);
  await page.waitForTimeout(300); // the dialog's opening transition
  await page.screenshot({ path: join(SHOTS, 'back-conversation.png') });
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("MkDocs' theme, 375 px: Back after a citation to another page returns with the conversation showing", { skip: !MKDOCS_SITE && 'no default-theme site' }, async () => {
  const page = await newPage(browser, { viewport: { width: 375, height: 720 }, isMobile: true, hasTouch: true });
  page.setDefaultNavigationTimeout(90000);
  await open(page, OTHER, { site: MKDOCS_SITE });
  await ask(page, Q);
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip').nth(2).click()]);
  await page.waitForSelector('mark.anchored-hl');
  assert.ok(!new URL(page.url()).pathname.endsWith('/' + OTHER), 'the chip left the page');
  await page.goBack();
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.equal(new URL(page.url()).pathname, MKDOCS_SITE + OTHER);
  assert.equal(await page.locator('.anchored-turn').count(), 1);
  const box = await page.locator('dialog.anchored-dialog').boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 375, `the dialog fits the phone: ${JSON.stringify(box)}`);
  await page.screenshot({ path: join(SHOTS, 'back-mkdocs-375.png') });
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("a citation's link opened without the ask box: the browser marks the text fragment (link-text-fragment.png)", { skip: !(await isHarness()) && 'needs the harness (it adds `link` with anchored_query.citations.links)' }, async () => {
  const res = await fetch(BASE + '/v1/ask', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ question: Q }) });
  const reply = await res.json();
  const c = reply.citations.find((x) => x.link.includes(':~:text=') && !x.url.startsWith('about/'));
  assert.ok(c, 'a citation with a text fragment');
  const page = await newPage(browser, { viewport: { width: 1000, height: 560 } });
  page.setDefaultNavigationTimeout(90000);
  await page.route('**/assets/anchored/**', (r) => r.abort()); // no ask box on this page
  await page.goto(BASE + SITE + c.link);
  const terms = c.link.split(':~:text=')[1].split(',');
  const start = decodeURIComponent(terms[0].endsWith('-') ? terms[1] : terms[0]); // prefix-,start,…
  // The fragment's start is on screen (the browser scrolls to it; this one is near the top).
  const seen = await page.waitForFunction((t) => {
    const norm = (x) => x.replace(/\s+/g, ' ').trim().toLowerCase();
    let best = null;
    for (const e of document.querySelectorAll('article *, .md-content *, [role="main"] *')) {
      if (e.closest('nav, .md-sidebar, .md-header, .md-footer')) continue;
      if (norm(e.textContent).includes(norm(t))) best = e; // the deepest element of the first match
      else if (best && !best.contains(e)) break;
    }
    const b = best && best.getBoundingClientRect();
    return b && b.top >= 0 && b.bottom <= innerHeight ? { x: b.x, y: b.y, width: b.width, height: b.height, scrollY } : null;
  }, start, { timeout: 15000 });
  const box = await seen.jsonValue();
  assert.ok(box, `"${start}" scrolled into view by ${c.link}`);
  await page.waitForTimeout(300);
  const clip = { x: box.x, y: box.y, width: box.width, height: box.height };
  const marked = await page.screenshot({ clip });
  // The same page without the text fragment, scrolled the same: the passage looks different.
  const plain = await newPage(browser, { viewport: { width: 1000, height: 560 } });
  await plain.route('**/assets/anchored/**', (r) => r.abort());
  await plain.goto(BASE + SITE + c.url.split('#')[0]);
  await plain.evaluate((y) => scrollTo(0, y), box.scrollY);
  await plain.waitForTimeout(300);
  assert.ok(!marked.equals(await plain.screenshot({ clip })), 'the browser painted the text fragment');
  await plain.context().close();
  assert.equal(await page.locator('mark.anchored-hl, .anchored-open').count(), 0, 'the ask box did not run');
  await page.screenshot({ path: join(SHOTS, 'link-text-fragment.png') });
  await page.context().close();
});
