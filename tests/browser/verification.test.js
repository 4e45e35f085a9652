// How the ask box shows what verification decided (issue 27): a sentence no check could
// confirm (API `verified: false`) is shown with a "not verified" mark, a code block too;
// a note of what the docs do not cover is shown as a note; an answer that covers nothing
// asked (`coverage: none`) shows the model's note and the passage it names, not a quote
// badge; a quoted refusal carries no "Quoted from the docs" badge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FIXTURES, OTHER, ask, fileBrowser, newPage, open } from './helpers.js';

const browser = await fileBrowser();

function partial() {
  const r = structuredClone(FIXTURES.markdown);
  r.id = 'ans-marks';
  r.coverage = 'partial';
  r.answer = [
    { text: 'Set `widget_endpoint` to the function URL.', citations: [1] },
    { text: 'It also accepts a CloudFront URL.', citations: [1], verified: false },
    { text: '```yaml\nplugins:\n  - anchored:\n      widget_endpoint: https://docs.example.com/api\n```', citations: [3], verified: false },
    { text: 'The documentation does not cover per-host rate limits.', citations: [], note: true },
  ];
  return r;
}

function none() {
  const r = structuredClone(FIXTURES.markdown);
  r.id = 'ans-none';
  r.abstained = true;
  r.coverage = 'none';
  r.answer = [
    { text: 'The documentation does not cover uploading to FTP.', citations: [], note: true },
    { text: 'The closest it comes is the S3 bucket target.', citations: [1] },
  ];
  return r;
}

test('an unverified sentence and code block are marked; a note is a note', async () => {
  const page = await newPage(browser);
  await page.route('**/v1/ask', (route) => route.fulfill({ json: partial() }));
  await open(page, OTHER);
  await ask(page, 'Which URL does the ask box take?', { timeout: 15000 });
  const sentences = page.locator('.anchored-answer .anchored-sentence');
  assert.equal(await sentences.nth(0).getAttribute('class'), 'anchored-sentence');
  assert.match(await sentences.nth(1).getAttribute('class'), /anchored-unverified/);
  const marks = page.locator('.anchored-answer .anchored-unverified__mark');
  assert.equal(await marks.count(), 2, 'the sentence and the code block');
  assert.equal((await marks.first().textContent()).trim(), 'not verified');
  assert.match(await marks.first().getAttribute('title'), /no check could confirm/);
  assert.equal(await page.locator('.anchored-code .anchored-unverified__mark').count(), 1);
  const note = page.locator('.anchored-answer .anchored-note');
  assert.equal(await note.count(), 1);
  assert.match(await note.textContent(), /does not cover per-host rate limits/);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('an answer that covers nothing asked shows the note and the closest passage', async () => {
  const page = await newPage(browser);
  await page.route('**/v1/ask', (route) => route.fulfill({ json: none() }));
  await open(page, OTHER);
  await ask(page, 'Can it upload to FTP?', { timeout: 15000 });
  const box = page.locator('.anchored-abstain');
  assert.match(await box.textContent(), /don.t seem to cover this/);
  assert.match(await box.textContent(), /does not cover uploading to FTP/);
  assert.match(await box.textContent(), /closest it comes is the S3 bucket target/);
  assert.ok((await box.locator('.anchored-chip, a').count()) >= 1, 'the closest passage keeps its chip');
  assert.equal(await page.locator('.anchored-badge').count(), 0);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a quoted refusal has no "Quoted from the docs" badge', async () => {
  const page = await newPage(browser);
  const refusal = { ...structuredClone(FIXTURES.extractive), abstained: true, answer: [], id: 'ans-quoted-refusal' };
  await page.route('**/v1/ask', (route) => route.fulfill({ json: refusal }));
  await open(page, OTHER);
  await ask(page, 'Can it upload to FTP?', { timeout: 15000 });
  await page.locator('.anchored-abstain').waitFor();
  assert.equal(await page.locator('.anchored-badge').count(), 0);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
