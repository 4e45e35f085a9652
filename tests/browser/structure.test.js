// The quoted answer keeps the passage's structure (issue 25): a table answer is drawn as a
// table (its header, the row asked about), a list answer as a list, never as run-on prose.
// The replies are what this project's demo (`anchored ask --json` on its own docs) returned
// for the two questions; the screenshots at 1280 and 375 px are the ones in site/ask-box.md.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HERE, OTHER, SHOTS, ask, fileBrowser, newPage, open } from './helpers.js';

const browser = await fileBrowser();
const REPLIES = JSON.parse(readFileSync(join(HERE, 'structure-replies.json'), 'utf8'));
// "option: x; default: y; meaning: z": table rows flattened into prose, as quotes were.
const RUN_ON = /^(?:[\w.-]{1,20}(?: [\w.-]{1,20})?: [^;\n]{1,160}; ){2,}[\w.-]{1,20}(?: [\w.-]{1,20})?: /;

async function answered(kind, width) {
  const reply = REPLIES[kind];
  const page = await newPage(browser, { viewport: { width, height: 900 } });
  await page.route('**/v1/ask', (route) => route.fulfill({ json: reply }));
  await open(page, OTHER);
  await ask(page, reply.question, { timeout: 15000 });
  const turn = page.locator('.anchored-turn').last();
  for (const text of await turn.locator('.anchored-sentence').allTextContents()) {
    assert.ok(!RUN_ON.test(text), `run-on prose: ${text}`);
  }
  return { page, turn };
}

for (const width of [1280, 375]) {
  test(`${width} px: a table answer is a table with its header and the row asked about (answer-table-${width}.png)`, async () => {
    const { page, turn } = await answered('table', width);
    const table = turn.locator('.anchored-answer table');
    assert.equal(await table.count(), 1);
    assert.deepEqual(await table.locator('thead th').allTextContents(), ['option', 'default', 'meaning']);
    const rows = await table.locator('tbody tr').allTextContents();
    assert.equal(rows.length, 1, rows.join('\n'));
    assert.ok(rows[0].includes('widget_shortcut'), rows[0]);
    // Its citation is a chip below the table, not a sentence of the table.
    assert.equal(await turn.locator('.anchored-table__cites .anchored-chip').count() > 0, true);
    // The table fits the dialog at phone width (it scrolls inside its own box if not).
    const box = await turn.locator('.anchored-table').boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= width, JSON.stringify(box));
    await page.locator('dialog.anchored-dialog').screenshot({ path: join(SHOTS, `answer-table-${width}.png`) });
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test(`${width} px: a list answer is a list, its lead-in a sentence above it (answer-list-${width}.png)`, async () => {
    const { page, turn } = await answered('list', width);
    const items = await turn.locator('.anchored-answer ul.anchored-list > li').allTextContents();
    const listed = REPLIES.list.answer.filter((a) => a.text.startsWith('- ')).length;
    assert.equal(items.length, listed);
    assert.ok(items[0].startsWith('questions over time'), items[0]);
    assert.ok((await turn.locator('.anchored-answer p.anchored-p').first().textContent()).startsWith('What it shows:'));
    await page.locator('dialog.anchored-dialog').screenshot({ path: join(SHOTS, `answer-list-${width}.png`) });
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });
}
