// The streamed answer (`Accept: text/event-stream` on /v1/ask, site/reference/http-api.md).
//
// 1. In Node, no browser: api.js' event-stream parser and its streaming POST against a
//    real local HTTP server that cuts its bytes anywhere (inside CRLF, inside a UTF-8
//    character), sends comments, multi-line data, an error event, a stream cut short, a
//    buffered JSON reply (the fallback), and a reply that hangs (Cancel and the timeout
//    abort the request: the server sees the connection closed).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { ApiError, postJSON, sseParser } from '../../plugin/assets/api.js';

// ---- 1. the parser and the client, in Node

const parseAll = (pieces) => {
  const got = [];
  const p = sseParser((name, data) => got.push([name, data]));
  for (const x of pieces) p.push(x);
  p.end();
  return got;
};

const SAMPLE =
  '\uFEFF: a comment first\r\n' +
  'event: stage\r\ndata: {"stage":"retrieving"}\r\n\r\n' +
  'retry: 3000\nid: 7\nevent: sentence\ndata: {"index":0,\ndata:  "x":"two lines"}\n\n' +
  'event:sources\rdata:{"sources":[]}\r\r' +
  'data\n\n' + // a field with no colon: data is "" (one empty line)
  ':keep-alive\n\n' + // a comment alone is no event
  'event: final\ndata: {"done":true}\n\n' +
  'event: lost\ndata: {"not":"closed by a blank line"}\n';

const EXPECTED = [
  ['stage', '{"stage":"retrieving"}'],
  ['sentence', '{"index":0,\n "x":"two lines"}'],
  ['sources', '{"sources":[]}'],
  ['message', ''],
  ['final', '{"done":true}'],
];

test('event-stream parser: LF, CRLF, CR, comments, multi-line data, BOM; the unclosed last event is dropped', () => {
  assert.deepEqual(parseAll([SAMPLE]), EXPECTED);
});

test('event-stream parser: the same events whatever the cut (every split point, and one character at a time)', () => {
  for (let i = 0; i <= SAMPLE.length; i++) {
    assert.deepEqual(parseAll([SAMPLE.slice(0, i), SAMPLE.slice(i)]), EXPECTED, `cut at ${i}: ${JSON.stringify(SAMPLE.slice(i - 2, i + 2))}`);
  }
  assert.deepEqual(parseAll([...SAMPLE]), EXPECTED);
  // A lone CR at the very end of the stream still ends its line.
  assert.deepEqual(parseAll(['data: x\n\r']), [['message', 'x']]);
});

// A local server whose /v1/ask behaviour is picked by the question.
const seen = []; // {question, accept, closedEarly}
let server;
let URL_ASK;
const sse = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
const FINAL = { id: 'a1', answer: [{ text: 'Café ☕ at port 8000.', citations: [1] }], citations: [{ n: 1, url: 'a/#b', title: 'A', heading_path: ['B'], passage: 'p' }] };

before(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const q = JSON.parse(raw).question;
      const rec = { question: q, accept: req.headers.accept, closedEarly: false };
      seen.push(rec);
      res.on('close', () => {
        if (!res.writableFinished) rec.closedEarly = true;
      });
      if (q === 'buffered') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        return res.end(JSON.stringify(FINAL));
      }
      if (q === 'busy') {
        res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '7' });
        return res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'slow down' } }));
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' });
      const wait = (ms) => new Promise((r) => setTimeout(r, ms));
      if (q === 'hang') {
        res.write(sse('stage', { stage: 'retrieving' }));
        return; // never ends: the client must give up
      }
      let body = sse('stage', { stage: 'retrieving' }) + ': ping\n\n' + sse('sources', { sources: [{ n: 3, url: 'a/#b', title: 'A', heading_path: ['B'] }], passages_considered: 9 });
      body += sse('sentence', { index: 0, item: { text: 'Café ☕ at port 8000.', citations: [3] } });
      if (q === 'error') body += sse('error', { error: { code: 'llm_failed', message: 'the model failed' } });
      else if (q !== 'cut') body += sse('final', FINAL).replace(/\n/g, '\r\n');
      // Bytes cut in awkward places: inside "☕" (3 bytes), inside CRLF, one byte at a time near the end.
      const bytes = Buffer.from(body, 'utf8');
      const cup = bytes.indexOf(Buffer.from('☕')) + 1;
      const cuts = [cup, cup + 1, bytes.indexOf(Buffer.from('\r\n')) + 1, ...Array.from({ length: 12 }, (_, i) => bytes.length - 12 + i)].sort((a, b) => a - b);
      let at = 0;
      for (const c of cuts) {
        if (c <= at) continue;
        res.write(bytes.subarray(at, c));
        at = c;
        await wait(5);
      }
      res.end(bytes.subarray(at));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  URL_ASK = `http://127.0.0.1:${server.address().port}/v1/ask`;
});
after(() => server && server.close());

async function streamed(question, opts = {}) {
  const events = [];
  const reply = await postJSON(URL_ASK, { question }, { onEvent: (name, data) => events.push([name, data]), ...opts });
  return { reply, events };
}

test('streaming POST: asks for text/event-stream, hands on stage/sources/sentence in order, returns final', async () => {
  const { reply, events } = await streamed('ok');
  assert.equal(seen.at(-1).accept, 'text/event-stream');
  assert.deepEqual(reply, FINAL, 'the final record, its UTF-8 intact across the cuts');
  assert.deepEqual(events.map(([n]) => n), ['stage', 'sources', 'sentence']);
  assert.equal(events[2][1].item.text, 'Café ☕ at port 8000.');
  assert.deepEqual(events[1][1].sources.map((s) => s.n), [3]);
});

test('streaming POST: a buffered JSON reply is read as such (older function, buffering proxy)', async () => {
  const { reply, events } = await streamed('buffered');
  assert.deepEqual(reply, FINAL);
  assert.deepEqual(events, []);
  // without onEvent the call asks for JSON, as before
  assert.deepEqual(await postJSON(URL_ASK, { question: 'buffered' }), FINAL);
  assert.equal(seen.at(-1).accept, 'application/json');
});

test('streaming POST: HTTP errors before the stream, the error event, a stream cut short', async () => {
  await assert.rejects(streamed('busy'), (e) => e instanceof ApiError && e.kind === 'rate' && e.retryAfter === 7 && e.detail === 'slow down');
  await assert.rejects(streamed('error'), (e) => e.kind === 'server' && e.detail === 'the model failed');
  await assert.rejects(streamed('cut'), (e) => e.kind === 'server' && /stopped before/.test(e.message));
});

test('streaming POST: Cancel and the timeout abort the request mid-stream (the server sees it closed)', async () => {
  const ctl = new AbortController();
  const events = [];
  const call = postJSON(URL_ASK, { question: 'hang' }, { signal: ctl.signal, onEvent: (n) => events.push(n) });
  while (!events.length) await new Promise((r) => setTimeout(r, 10));
  ctl.abort();
  await assert.rejects(call, (e) => e.kind === 'aborted');
  const started = Date.now();
  await assert.rejects(postJSON(URL_ASK, { question: 'hang' }, { timeout: 400, onEvent: () => {} }), (e) => e.kind === 'timeout');
  assert.ok(Date.now() - started < 3000);
  await new Promise((r) => setTimeout(r, 100));
  const hangs = seen.filter((s) => s.question === 'hang');
  assert.equal(hangs.length, 2);
  assert.ok(hangs.every((s) => s.closedEarly), 'both requests were closed by the client');
});
