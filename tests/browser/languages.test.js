// Multilingual docs: the ask box on tests/fixtures/i18n-site (English at /, Chinese under
// /zh/, built by mkdocs-static-i18n with Material's language selector) against the real
// query function serving the built site. Requests are only observed, never answered here.
//
// Run by tests/test_languages.py (which builds the site and starts the server). Without
// ANCHORED_LANG_E2E (e.g. under run.sh against the harness) every test is skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { BASE, SHOTS, ask, fileBrowser, newPage, replyOf } from './helpers.js';

const skip = process.env.ANCHORED_LANG_E2E ? false : 'needs the built i18n site: tests/test_languages.py runs this';
const PLUGIN_Q = '如何编写插件？'; // "How do I write a plugin?": only the English pages say
const PORT_Q = '默认端口是多少？'; // "What is the default port?": the Chinese pages say

const browser = await fileBrowser({ skip });

const isAsk = (r) => r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/v1/ask');

// Generous waits: the suite runs on a shared two-core machine next to the index build.
const WAIT = 120000;

async function livePage(opts) {
  const page = await newPage(browser, { live: true, ...opts });
  page.setDefaultTimeout(WAIT);
  page.setDefaultNavigationTimeout(WAIT);
  page.asks = [];
  page.on('request', (r) => {
    if (isAsk(r)) page.asks.push(r.postDataJSON());
  });
  return page;
}

/** Open a page of the built site and wait for the ask box. */
async function open(page, path) {
  await page.goto(BASE + '/' + path, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('.anchored-open', { state: 'attached' });
}

/** Ask in the dialog; the body the widget sent and the server's reply (its final record). */
async function askLive(page, q) {
  const res = page.waitForResponse((r) => isAsk(r.request()), { timeout: WAIT });
  const n = page.asks.length;
  await ask(page, q, { timeout: WAIT });
  const response = await res;
  assert.equal(response.status(), 200);
  const reply = await replyOf(response); // the JSON body, or the stream's final event
  assert.ok(reply, 'the reply carries its final record');
  return { body: page.asks[n], reply };
}

const lastTurn = (page) => page.locator('.anchored-turn').last();
/** The hrefs of the answer's sources, relative to the site root. */
const sourcePaths = (page) =>
  lastTurn(page).locator('a.anchored-source').evaluateAll((links) => links.map((a) => new URL(a.href).pathname));

test('Chinese page: the request names zh; an answer only English pages give cites them with the note', { skip }, async () => {
  const page = await livePage({ viewport: { width: 1200, height: 760 } });
  await open(page, 'zh/configuration/');
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh');
  const { body, reply } = await askLive(page, PLUGIN_Q);
  assert.equal(body.lang, 'zh');
  assert.equal('other_languages' in body, false, 'unchecked: the reader did not ask for the others');
  assert.equal(reply.other_language, true);
  const note = lastTurn(page).locator('.anchored-lang-note');
  await note.waitFor({ state: 'visible' });
  assert.match(await note.textContent(), /No page in Chinese answers this question.*English/);
  const paths = await sourcePaths(page);
  assert.ok(paths.length > 0 && paths.every((p) => p === '/plugins/'), `sources ${paths}`);
  await page.screenshot({ path: join(SHOTS, 'languages.png') });
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Chinese page: a question its pages answer cites Chinese pages, no note', { skip }, async () => {
  const page = await livePage();
  await open(page, 'zh/');
  const { body, reply } = await askLive(page, PORT_Q);
  assert.equal(body.lang, 'zh');
  assert.equal(reply.other_language, false);
  assert.equal(await lastTurn(page).locator('.anchored-lang-note').count(), 0);
  const paths = await sourcePaths(page);
  assert.ok(paths.length > 0 && paths.every((p) => p.startsWith('/zh/')), `sources ${paths}`);
  await page.context().close();
});

test('"Include other languages" is reached and ticked by keyboard and sends other_languages', { skip }, async () => {
  const page = await livePage();
  await open(page, 'zh/install/');
  await page.focus('.anchored-open');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  const label = page.locator('.anchored-lang');
  assert.equal(await label.isVisible(), true);
  // from the question box, Shift+Tab back through the dialog to the checkbox
  await page.focus('.anchored-input');
  let reached = false;
  for (let i = 0; i < 12 && !reached; i++) {
    await page.keyboard.press('Shift+Tab');
    reached = await page.evaluate(() => document.activeElement && document.activeElement.classList.contains('anchored-lang__box'));
  }
  assert.ok(reached, 'the checkbox is in the tab order');
  await page.keyboard.press('Space');
  assert.equal(await page.locator('.anchored-lang__box').isChecked(), true);
  await page.focus('.anchored-input');
  const { body } = await askLive(page, 'Which port does the service listen on?');
  assert.equal(body.lang, 'zh');
  assert.equal(body.other_languages, true);
  await page.context().close();
});

test('English page: the request names en and cites English pages', { skip }, async () => {
  const page = await livePage();
  await open(page, 'configuration/');
  const { body, reply } = await askLive(page, 'Which port does the service listen on?');
  assert.equal(body.lang, 'en');
  assert.equal(reply.other_language, false);
  const paths = await sourcePaths(page);
  assert.ok(paths.length > 0 && paths.every((p) => !p.startsWith('/zh/')), `sources ${paths}`);
  await page.context().close();
});
