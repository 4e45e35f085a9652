// "Ask the docs: '…'" inside the theme's own search: Material and the mkdocs theme.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MKDOCS_SITE, OTHER, SHOTS, SITE, fileBrowser, newPage, open } from './helpers.js';
import { join } from 'node:path';

const browser = await fileBrowser();

const Q = 'How do I configure the endpoint?';

async function answered(page, q) {
  const req = await page.waitForRequest('**/v1/ask');
  assert.equal(req.postDataJSON().question, q, 'the typed question is asked');
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.equal(await page.locator('.anchored-turn .anchored-q').last().evaluate((e) => e.lastChild.textContent), q);
}

test('Material: typing in the search offers "Ask the docs", reached with the arrow keys, and asks', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await page.keyboard.press('s'); // Material's search shortcut
  await page.waitForFunction(() => document.getElementById('__search').checked);
  await page.keyboard.type(Q);
  const row = page.locator('.md-search-result .anchored-search-ask');
  await row.waitFor({ state: 'visible' });
  assert.equal(await row.textContent(), `Ask the docs: “${Q}”`);
  await page.waitForSelector('.md-search-result__list > li'); // the keyword results are still there
  assert.equal(await page.locator('.md-search-result > *').first().evaluate((e) => e.classList.contains('anchored-search-ask')), true, 'first row');
  await page.keyboard.press('ArrowDown');
  assert.ok(await row.evaluate((r) => r === document.activeElement), 'ArrowDown from the box focuses the row');
  const asked = answered(page, Q);
  await page.keyboard.press('Enter');
  await asked;
  assert.ok(await page.evaluate(() => !document.getElementById('__search').checked), 'the search closed');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Material: Enter in the search box still opens the best keyword result', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await page.keyboard.press('s');
  await page.keyboard.type('endpoint');
  await page.waitForSelector('.md-search-result__list > li');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  assert.ok(!(await page.$('dialog.anchored-dialog[open]')), 'no ask box');
  assert.match(page.url(), /user-guide\/configuration\//);
  await page.context().close();
});

test('mkdocs theme: the search modal offers "Ask the docs", reached with Tab, and asks', { skip: !MKDOCS_SITE && 'no default-theme site' }, async () => {
  const page = await newPage(browser);
  await open(page, OTHER, { site: MKDOCS_SITE });
  await page.click('[data-bs-target="#mkdocs_search_modal"]');
  await page.waitForSelector('#mkdocs_search_modal.show #mkdocs-search-query');
  await page.locator('#mkdocs-search-query').focus();
  await page.keyboard.type(Q);
  const row = page.locator('#mkdocs_search_modal .anchored-search-ask');
  await row.waitFor({ state: 'visible' });
  assert.equal(await row.textContent(), `Ask the docs: “${Q}”`);
  await page.keyboard.press('Tab');
  assert.ok(await row.evaluate((r) => r === document.activeElement), 'Tab from the box focuses the row');
  const asked = answered(page, Q);
  await page.keyboard.press('Enter');
  await asked;
  assert.ok(await page.locator('#mkdocs_search_modal').evaluate((m) => !m.classList.contains('show')), 'the search modal closed');
  assert.ok(await page.locator('.anchored-input').evaluate((i) => i === document.activeElement), 'focus in the ask box');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('widget_search_ask: false leaves the theme search alone', async () => {
  for (const site of [SITE, MKDOCS_SITE].filter(Boolean)) {
    const page = await newPage(browser);
    await open(page, OTHER, { site, query: '?harness-config=' + encodeURIComponent('{"search_ask":false}') });
    assert.equal(await page.locator('.anchored-search-ask').count(), 0, site);
    await page.context().close();
  }
});

// Screenshots of the row (docs): light and dark, desktop and phone.
for (const [scheme, width] of [['default', 1280], ['slate', 1280], ['default', 375], ['slate', 375]]) {
  test(`Material ${scheme} ${width} px: ask-from-search screenshot`, async () => {
    const page = await newPage(browser, { viewport: { width, height: width < 500 ? 720 : 800 }, isMobile: width < 500, hasTouch: width < 500 });
    await open(page, OTHER);
    await page.evaluate((s) => document.body.setAttribute('data-md-color-scheme', s), scheme);
    await page.keyboard.press('s');
    await page.waitForFunction(() => document.getElementById('__search').checked);
    await page.keyboard.type('configure the endpoint');
    await page.waitForSelector('.md-search-result__list > li');
    await page.locator('.anchored-search-ask').waitFor({ state: 'visible' });
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(SHOTS, `search-ask-${scheme === 'slate' ? 'dark' : 'light'}-${width}.png`) });
    await page.context().close();
  });
}
