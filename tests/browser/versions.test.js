// Versioned docs end to end: the ask box on a site built by the real mike (1.0, then 2.0
// with alias latest; tests/versions_site.py), served with the real query function over the
// versioned index store on one origin. Nothing here answers a request; /v1/ask is observed.
//
// Run by tests/test_versions.py (test_widget_in_chromium_on_the_mike_site), which builds the
// site and starts the server. Without ANCHORED_VERSIONS_E2E every test is skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, SHOTS, fileBrowser, newPage, ask } from './helpers.js';
import { detectVersion, readVersions } from '../../plugin/assets/versions.js';

const skip = process.env.ANCHORED_VERSIONS_E2E ? false : 'set ANCHORED_VERSIONS_E2E=1 and ANCHORED_TEST_URL (tests/test_versions.py does)';
const DOC_IMAGES = process.env.ANCHORED_VERSIONS_DOC_IMAGES || '';
const Q = 'What is the default timeout?';
// The pages' own HTML is what matters; on a busy machine Material's assets may take long.
const LOAD = { waitUntil: 'domcontentloaded', timeout: 90000 };

const browser = await fileBrowser({ skip });

const isAsk = (r) => r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/v1/ask');

async function livePage() {
  const page = await newPage(browser, { live: true });
  page.asks = [];
  page.on('request', (r) => {
    if (isAsk(r)) page.asks.push(r.postDataJSON());
  });
  return page;
}

/** Ask `q`; the body sent, and the last turn's text, version note and page links (the reply
 * may be a stream, so it is read as the reader sees it). */
async function askLive(page, q) {
  const res = page.waitForResponse((r) => isAsk(r.request()), { timeout: 90000 });
  const n = page.asks.length;
  await ask(page, q);
  const response = await res;
  assert.equal(response.status(), 200, `/v1/ask answered ${response.status()}`);
  const turn = page.locator('.anchored-turn').last();
  return {
    body: page.asks[n],
    text: await turn.locator('.anchored-a').innerText(),
    note: await turn.locator('.anchored-version-note').innerText(),
    hrefs: await turn.locator('a[href*="configuration"]').evaluateAll((as) => as.map((a) => a.href)),
  };
}

test('on /1.0/ the ask box asks the 1.0 index and says so', { skip }, async () => {
  const page = await livePage();
  await page.goto(BASE + '/1.0/configuration/', LOAD);
  await page.waitForSelector('.anchored-open', { state: 'attached' });
  const got = await askLive(page, Q);
  assert.equal(got.body.version, '1.0', 'the request names the page\'s version');
  assert.match(got.text, /10 seconds/);
  assert.doesNotMatch(got.text, /30 seconds/);
  assert.match(got.note, /version 1\.0/);
  assert.ok(got.hrefs.length && got.hrefs.every((h) => new URL(h).pathname.startsWith('/1.0/')), got.hrefs.join(' '));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a reader on 1.0 can choose the latest version with the keyboard; the answer is 2.0', { skip }, async () => {
  const page = await livePage();
  await page.goto(BASE + '/1.0/configuration/', LOAD);
  await page.waitForSelector('.anchored-open', { state: 'attached' });
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  const select = page.locator('.anchored-version__select');
  await select.waitFor({ state: 'visible', timeout: 60000 });
  assert.deepEqual(await select.locator('option').allInnerTexts(), ['1.0 (this page)', '2.0 (latest)']);
  // Reached from the question box with Shift+Tab (it sits in the dialog's head), changed with the arrow key.
  await page.focus('.anchored-input');
  for (let i = 0; i < 10 && !(await select.evaluate((s) => s === document.activeElement)); i++) {
    await page.keyboard.press('Shift+Tab');
  }
  assert.ok(await select.evaluate((s) => s === document.activeElement), 'the version choice takes keyboard focus');
  await page.keyboard.press('ArrowDown');
  assert.equal(await select.inputValue(), '2.0');
  const got = await askLive(page, Q);
  assert.equal(got.body.version, '2.0');
  assert.match(got.text, /30 seconds/);
  assert.match(got.note, /version 2\.0/);
  // Its sources are 2.0's pages, not the 1.0 page the reader is on.
  assert.ok(got.hrefs.length && got.hrefs.every((h) => new URL(h).pathname.startsWith('/2.0/')), got.hrefs.join(' '));
  const shot = join(SHOTS, 'versions-ask-latest.png');
  await page.screenshot({ path: shot }); // the 1.0 page (Material's version selector says so) behind the dialog
  if (DOC_IMAGES && existsSync(shot)) copyFileSync(shot, join(DOC_IMAGES, 'versions-ask-latest.png'));
  // Following a source lands on the 2.0 page.
  await Promise.all([page.waitForURL(/\/2\.0\/configuration\//), page.locator('.anchored-turn').last().locator('a[href*="/2.0/configuration"]').first().click()]);
  assert.match(await page.locator('article').innerText(), /30 seconds/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('on /latest/ there is no choice to make and the answer is from 2.0', { skip }, async () => {
  const page = await livePage();
  await page.goto(BASE + '/latest/configuration/', LOAD);
  await page.waitForSelector('.anchored-open', { state: 'attached' });
  const got = await askLive(page, Q);
  assert.equal(got.body.version, '2.0');
  assert.match(got.text, /30 seconds/);
  assert.equal(await page.locator('.anchored-version').isHidden(), true);
  assert.deepEqual(page.errors, []);
  await page.close();
});

// ---- detection, without a browser (always run)


const MIKE = [{ version: '2.0', title: '2.0', aliases: ['latest'] }, { version: '1.0', title: '1.0', aliases: [] }];
const serving = (data, status = 200) => {
  const seen = [];
  const fetchImpl = async (url) => {
    seen.push(url);
    return { ok: status === 200, status, json: async () => data };
  };
  return { seen, fetchImpl };
};

test('detectVersion: the page\'s own version, the latest from versions.json at the mike root', async () => {
  const { seen, fetchImpl } = serving(MIKE);
  const got = await detectVersion({ version: '1.0' }, new URL('http://docs.test/proj/1.0/'), { fetchImpl });
  assert.deepEqual(seen, ['http://docs.test/proj/versions.json']);
  assert.equal(got.current, '1.0');
  assert.equal(got.latest, '2.0');
});

test('detectVersion: without the plugin\'s setting, the folder (an alias resolved)', async () => {
  const { fetchImpl } = serving(MIKE);
  const got = await detectVersion({}, new URL('http://docs.test/latest/'), { fetchImpl });
  assert.deepEqual([got.current, got.latest], ['2.0', '2.0']);
});

test('detectVersion: an unversioned site is null; a missing versions.json keeps the own version', async () => {
  assert.equal(await detectVersion({}, new URL('http://docs.test/'), serving(null, 404)), null);
  assert.equal(await detectVersion({}, new URL('http://docs.test/guide/'), serving(MIKE)), null);
  const failing = { fetchImpl: async () => { throw new TypeError('offline'); } };
  assert.deepEqual(await detectVersion({ version: '1.0' }, new URL('http://docs.test/1.0/'), failing), { current: '1.0', latest: '', versions: [] });
});

test('detectVersion asks nothing of an unversioned build or a page at the host root (issue 25)', async () => {
  const atRoot = serving(MIKE);
  assert.equal(await detectVersion({}, new URL('http://docs.test/'), atRoot), null);
  assert.deepEqual(atRoot.seen, [], 'no versions.json request at the host root');
  const known = serving(MIKE);
  assert.equal(await detectVersion({ versioned: false }, new URL('http://docs.test/proj/'), known), null);
  assert.deepEqual(known.seen, [], 'no request when the build says it is unversioned');
  const injected = serving(MIKE);
  await detectVersion({}, new URL('http://docs.test/latest/'), injected);
  assert.deepEqual(injected.seen, ['http://docs.test/versions.json'], 'a page in a folder still asks');
});

test('readVersions keeps only well-formed names (data never becomes markup)', () => {
  assert.deepEqual(readVersions([{ version: '2.0', aliases: ['latest', '<b>x</b>'] }, { version: '../x' }, null, 'x']), [{ version: '2.0', title: '2.0', aliases: ['latest'] }]);
  assert.deepEqual(readVersions({ versions: [] }), []);
});
