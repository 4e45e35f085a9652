// Links in answer text that do not decode (issue 23, finding 5): shown as text, and the turn
// still ends (rendered, saved, the box free). `/%zz` threw URIError in siteLink, outside the
// turn's try, so the answer never showed and the widget stayed busy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FIXTURES, OTHER, ask, fileBrowser, newPage, open } from './helpers.js';

const browser = await fileBrowser();

const BAD = ['/%zz', 'user-guide/%E0%A4%A/', '%'];

function reply() {
  const r = structuredClone(FIXTURES.markdown);
  r.id = 'ans-badlinks';
  r.answer[0] = {
    text: `See [the broken one](${BAD[0]}), [a cut escape](${BAD[1]}), [a lone percent](${BAD[2]}) and the [endpoint section](user-guide/configuration/#endpoint).`,
    citations: [1],
  };
  return r;
}

test('a link with a malformed escape is text; the turn is shown, saved and not busy', async () => {
  const page = await newPage(browser);
  await page.route('**/v1/ask', (route) => route.fulfill({ json: reply() }));
  await open(page, OTHER);
  await ask(page, 'Which links does the answer have?', { timeout: 15000 });
  const first = page.locator('.anchored-answer .anchored-sentence').first();
  const text = await first.textContent();
  for (const label of ['the broken one', 'a cut escape', 'a lone percent']) assert.ok(text.includes(label), `${label} shown in: ${text}`);
  const hrefs = await first.locator('a').evaluateAll((links) => links.map((a) => a.getAttribute('href')));
  assert.ok(hrefs.some((h) => h.endsWith('user-guide/configuration/#endpoint')), `the good link stays a link: ${hrefs}`);
  assert.ok(!hrefs.some((h) => h.includes('%zz') || h.includes('%A/') || h.endsWith('%')), `no link to a bad escape: ${hrefs}`);
  // Not busy: the status line hidden, the log not aria-busy, the box writable again.
  assert.ok(await page.locator('.anchored-status').isHidden());
  assert.equal(await page.locator('.anchored-log, [aria-busy]').evaluateAll((n) => n.filter((x) => x.getAttribute('aria-busy')).length), 0);
  assert.equal(await page.locator('.anchored-input').evaluate((i) => i.readOnly), false);
  // Saved: the conversation comes back on the next page.
  assert.ok((await page.evaluate(() => JSON.stringify({ ...sessionStorage }))).includes('ans-badlinks'));
  await page.reload();
  await page.waitForSelector('.anchored-open', { state: 'attached' });
  // The open dialog marked its history entry, so the reload reopens it, once the widget has
  // loaded; clicking the opener before then would be blocked by the dialog it opens.
  try {
    await page.locator('dialog.anchored-dialog[open]').waitFor({ timeout: 5000 });
  } catch {
    await page.click('.anchored-open');
  }
  await page.locator('.anchored-turn .anchored-sentence', { hasText: 'the broken one' }).waitFor();
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a follow-up can be asked after such an answer', async () => {
  const page = await newPage(browser);
  let n = 0;
  await page.route('**/v1/ask', (route) => route.fulfill({ json: n++ ? FIXTURES.default : reply() }));
  await open(page, OTHER);
  await ask(page, 'Which links does the answer have?', { timeout: 15000 });
  await ask(page, 'How do I configure the endpoint?', { timeout: 15000 });
  assert.equal(await page.locator('.anchored-turn').count(), 2);
  assert.equal(await page.locator('.anchored-turn').last().locator('.anchored-sentence').count(), FIXTURES.default.answer.length);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
