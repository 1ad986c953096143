// The chat page in a real browser (Debian's headless Chromium, driven by
// playwright-core) against a running `inferno serve` with the tiny model.
// The oracle for every answer is the server itself: the same messages and
// parameters POSTed directly (not streamed) must give the text the page shows.
// Canned streams (page.route) stand in only where the tiny model cannot be
// made to write something: reasoning, Markdown, HTML in the answer.
//
// Env: BASE (the server), KEY_BASE and KEY (a server started with --api-key),
//      CHROMIUM (/usr/bin/chromium); SCREENSHOT=FILE instead takes the docs'
//      screenshot (a canned answer; SCHEME=dark for the dark look) and runs
//      no checks.
// Prints "ok - ..." / "not ok - ..." and ends with "N passed, N failed".
import { chromium } from 'playwright-core';

const BASE = process.env.BASE;
const KEY_BASE = process.env.KEY_BASE;
const KEY = process.env.KEY;
const CHAT = '/v1/chat/completions';

let passed = 0;
let failed = 0;
async function test(name, fn) {
  try {
    await fn();
    passed++;
    console.log('ok - ' + name);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}\n    ${String(e.stack || e).split('\n').slice(0, 4).join('\n    ')}`);
  }
}
function check(cond, what) {
  if (!cond) throw new Error(what);
}
// Equal, or say where the two first differ.
function checkEq(actual, expected, what) {
  const a = typeof actual === 'string' ? actual : JSON.stringify(actual);
  const e = typeof expected === 'string' ? expected : JSON.stringify(expected);
  if (a === e) return;
  let i = 0;
  while (i < a.length && a[i] === e[i]) i++;
  throw new Error(
    `${what}: differ at ${i}\n      expected ${JSON.stringify(e.slice(Math.max(0, i - 20), i + 40))}` +
      `\n      actual   ${JSON.stringify(a.slice(Math.max(0, i - 20), i + 40))}`,
  );
}

// The server's own answer to a chat request (no stream).
async function direct(base, body, key) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = 'Bearer ' + key;
  const r = await fetch(base + CHAT, {
    method: 'POST',
    headers,
    body: JSON.stringify({ ...body, stream: false, stream_options: undefined }),
  });
  const j = await r.json();
  if (!r.ok) throw new Error('direct request: ' + JSON.stringify(j));
  return j.choices[0].message.content;
}

// Records what a page asks for and complains about.
function watch(page) {
  const seen = { requests: [], chats: [], errors: [] };
  page.on('request', (r) => {
    seen.requests.push(r.url());
    if (r.method() === 'POST' && new URL(r.url()).pathname === CHAT) seen.chats.push(r.postDataJSON());
  });
  page.on('console', (m) => m.type() === 'error' && seen.errors.push('console: ' + m.text()));
  page.on('pageerror', (e) => seen.errors.push('page error: ' + e.message));
  return seen;
}

const stored = (page) =>
  page.evaluate(() => ({
    conversations: JSON.parse(localStorage.getItem('inferno.conversations') || '[]'),
    current: JSON.parse(localStorage.getItem('inferno.current') || 'null'),
  }));
async function currentMessages(page) {
  const s = await stored(page);
  return s.conversations.find((c) => c.id === s.current).messages;
}
const idle = (page, timeout = 30_000) =>
  page.waitForFunction(() => document.querySelector('#send').textContent === 'Send', null, { timeout });
const lastAnswer = (page) => page.locator('.msg.assistant').last();

// Types a message and sends it with Enter; waits for the whole answer.
async function say(page, text) {
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
  await idle(page);
}

async function setting(page, name, value) {
  if (await page.locator('#settings').isHidden()) await page.click('#settings-toggle');
  await page.fill('#s-' + name, String(value));
}

// A canned SSE body from chunk objects.
function sse(chunks) {
  const wrap = (c) => ({ object: 'chat.completion.chunk', model: 'canned', ...c });
  return chunks.map((c) => `data: ${JSON.stringify(wrap(c))}\n\n`).join('') + 'data: [DONE]\n\n';
}
const delta = (d, extra = {}) => ({ choices: [{ index: 0, delta: d, finish_reason: null }], ...extra });

async function openPage(browser, base, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...options });
  const page = await context.newPage();
  const seen = watch(page);
  await page.goto(base + '/');
  return { context, page, seen };
}

async function mainChecks(browser) {
  const { context, page, seen } = await openPage(browser, BASE);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE });

  await test('the page loads and shows the model and its defaults from /props', async () => {
    await page.waitForFunction(() => /^tiny · context 1024$/.test(document.querySelector('#model').textContent));
    checkEq(await page.title(), 'inferno', 'title');
    checkEq(await page.getAttribute('#s-temperature', 'placeholder'), '0.8', 'temperature placeholder');
    checkEq(await page.getAttribute('#s-top_k', 'placeholder'), '40', 'top_k placeholder');
  });

  await test('Shift+Enter is a new line, not a send', async () => {
    await page.fill('#prompt', 'a');
    await page.press('#prompt', 'Shift+Enter');
    await page.type('#prompt', 'b');
    checkEq(await page.inputValue('#prompt'), 'a\nb', 'the text box');
    check(seen.chats.length === 0, 'a request was sent');
    await page.fill('#prompt', '');
  });

  const system = 'You are a terse assistant.';
  const greedy = { temperature: 0, max_tokens: 40 };
  let first; // the first answer
  await test('a message streams an answer equal to the server\'s own, with the settings sent', async () => {
    await setting(page, 'system', system);
    await setting(page, 'temperature', 0);
    await setting(page, 'max_tokens', 40);
    // every length the answer had on screen while it came in
    await page.evaluate(() => {
      window.lengths = new Set();
      new MutationObserver(() => {
        const c = document.querySelector('.msg.assistant:last-of-type .content');
        if (c) window.lengths.add(c.textContent.length);
      }).observe(document.querySelector('#messages'), { childList: true, subtree: true, characterData: true });
    });
    await say(page, 'Hello there');
    const body = seen.chats.at(-1);
    const messages = [{ role: 'system', content: system }, { role: 'user', content: 'Hello there' }];
    checkEq(body.messages, messages, 'request messages');
    checkEq([body.stream, body.temperature, body.max_tokens], [true, 0, 40], 'stream, temperature, max_tokens');
    const want = await direct(BASE, { messages, ...greedy });
    check(want.length > 0, 'the direct answer is empty');
    const msgs = await currentMessages(page);
    checkEq(msgs.at(-1).content, want, 'the stored answer');
    const shown = await lastAnswer(page).locator('.content').textContent();
    const rendered = await page.evaluate((t) => {
      const d = document.createElement('div');
      d.innerHTML = window.inferno.renderMarkdown(t);
      return d.textContent;
    }, want);
    checkEq(shown, rendered, 'the shown answer');
    first = want; /* the next tests build on the answer, whatever the check below says */
    const partial = await page.evaluate((n) => [...window.lengths].filter((l) => l > 0 && l < n).length, shown.length);
    check(partial >= 1, `no partial answer was on screen before the whole one (lengths ${partial})`);
  });

  await test('the answer shows its token count and speed from the server\'s timings', async () => {
    const stats = await lastAnswer(page).locator('.stats').textContent();
    check(/^40 tokens · \d+\.\d tok\/s$/.test(stats), `stats label "${stats}"`);
    checkEq(await lastAnswer(page).locator('.state').textContent(), 'cut at max tokens', 'state');
  });

  let history;
  await test('a second turn sends the whole conversation', async () => {
    await say(page, 'Tell me more');
    history = [
      { role: 'system', content: system },
      { role: 'user', content: 'Hello there' },
      { role: 'assistant', content: first },
      { role: 'user', content: 'Tell me more' },
    ];
    checkEq(seen.chats.at(-1).messages, history, 'request messages');
    const want = await direct(BASE, { messages: history, ...greedy });
    checkEq((await currentMessages(page)).at(-1).content, want, 'the stored answer');
    checkEq((await currentMessages(page)).length, 4, 'messages in the conversation');
  });

  await test('Regenerate asks again without the old answer and replaces it', async () => {
    await setting(page, 'temperature', 1);
    await setting(page, 'seed', 7);
    const n = seen.chats.length;
    await lastAnswer(page).locator('button.regenerate').click();
    await idle(page);
    check(seen.chats.length === n + 1, 'no new request');
    const body = seen.chats.at(-1);
    checkEq(body.messages, history, 'request messages');
    checkEq([body.temperature, body.seed], [1, 7], 'temperature, seed');
    const want = await direct(BASE, { messages: history, temperature: 1, seed: 7, max_tokens: 40 });
    const msgs = await currentMessages(page);
    checkEq(msgs.length, 4, 'messages in the conversation');
    checkEq(msgs.at(-1).content, want, 'the regenerated answer');
    await setting(page, 'temperature', 0);
    await setting(page, 'seed', '');
  });

  await test('Stop ends a long answer and keeps what came', async () => {
    await page.click('#new-chat');
    await setting(page, 'max_tokens', 1000);
    await page.fill('#prompt', 'Count to a thousand');
    await page.press('#prompt', 'Enter');
    await page.waitForFunction(() => document.querySelector('.msg.assistant .content').textContent.length > 40);
    // while it streams, the answer so far is saved (a reload would keep it)
    const partial = await page.waitForFunction(() => {
      const s = JSON.parse(localStorage.getItem('inferno.conversations') || '[]');
      const cur = JSON.parse(localStorage.getItem('inferno.current') || 'null');
      const m = s.find((c) => c.id === cur)?.messages.at(-1);
      return m && m.content.length > 0 && !m.stopped && !m.finish && m.content;
    }, null, { timeout: 5000 }).then((h) => h.jsonValue(), () => null);
    check(partial !== null, 'the streaming answer was saved while it streamed');
    checkEq(await page.textContent('#send'), 'Stop', 'still streaming when it was saved');
    const t0 = Date.now();
    await page.click('#send'); // now "Stop"
    await idle(page);
    check(Date.now() - t0 < 2000, `Stop took ${Date.now() - t0} ms`);
    const msg = (await currentMessages(page)).at(-1);
    check(msg.stopped === true && msg.content.length > 0, 'not stored as stopped with its text');
    checkEq(await lastAnswer(page).locator('.state').textContent(), 'stopped', 'state');
    const stats = await lastAnswer(page).locator('.stats').textContent();
    check(/^≈\d+ tokens · ≈\d+\.\d tok\/s$/.test(stats), `stats label "${stats}"`);
    // the server saw the connection go and freed the slot
    let busySlots = -1;
    for (let i = 0; i < 20 && busySlots; i++) {
      if (i) await page.waitForTimeout(100);
      const slots = await (await fetch(BASE + '/slots')).json();
      busySlots = slots.filter((s) => s.is_processing).length;
    }
    checkEq(busySlots, 0, 'slots still generating 2 s after Stop');
    checkEq((await currentMessages(page)).at(-1).content, msg.content, 'the answer after Stop');
    const whole = await direct(BASE, {
      messages: [{ role: 'system', content: system }, { role: 'user', content: 'Count to a thousand' }],
      temperature: 0,
      max_tokens: 1000,
    });
    check(whole.startsWith(msg.content), 'the kept text is not the start of the whole answer');
    check(partial !== null && msg.content.startsWith(partial), 'the text saved mid-stream starts the kept text');
    check(whole.length > msg.content.length, 'the answer was not cut');
  });

  await test('conversations survive a reload (localStorage)', async () => {
    const before = await stored(page);
    await page.reload();
    await page.waitForFunction(() => /tiny/.test(document.querySelector('#model').textContent));
    checkEq(await page.locator('#conversations .conv').count(), 2, 'conversations listed');
    checkEq(await page.locator('.msg').count(), 2, 'messages of the current one');
    await page.locator('#conversations .conv').nth(1).click();
    checkEq(await page.locator('.msg').count(), 4, 'messages of the first one');
    checkEq((await currentMessages(page)).at(-1).content, before.conversations[1].messages[3].content, 'its answer');
    checkEq(await page.inputValue('#s-system'), system, 'the system prompt');
  });

  await test('renderMarkdown: structure, and HTML in the text stays text', async () => {
    const src = [
      '# Title <b>x</b>',
      'Some **bold**, *em*, `code <i>`, **`both`** and [a link](https://example.com/a?b=1&c=2).',
      '[bad](javascript:void0) [q](https://a.example/"onclick="window.__pwned=0) <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>',
      '',
      '- one',
      '- two',
      '',
      '1. first',
      '',
      '```python',
      'print("<b>hi</b>")',
      '```',
      '"><svg onload=window.__pwned=3>',
    ].join('\n');
    const r = await page.evaluate(async (s) => {
      const d = document.createElement('div');
      d.innerHTML = window.inferno.renderMarkdown(s);
      document.body.append(d);
      await new Promise((res) => setTimeout(res, 100)); // an onerror would have run
      const out = {
        tags: [...d.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()).sort().join(' '),
        h1: d.querySelector('h1')?.textContent,
        links: [...d.querySelectorAll('a')].map((a) => a.getAttribute('href')),
        attrs: [...d.querySelectorAll('a')].map((a) => a.getAttributeNames().join(' ')),
        code: d.querySelector('pre code')?.textContent,
        both: d.querySelector('strong > code')?.textContent,
        lang: d.querySelector('.code-lang')?.textContent,
        copy: d.querySelectorAll('.code button.copy').length,
        items: d.querySelectorAll('ul li').length,
        pwned: window.__pwned,
        text: d.textContent,
      };
      d.remove();
      return out;
    }, src);
    checkEq(r.h1, 'Title <b>x</b>', 'heading');
    checkEq(r.links, ['https://example.com/a?b=1&c=2', 'https://a.example/"onclick="window.__pwned=0'], 'links');
    checkEq(r.attrs, ['href target rel', 'href target rel'], 'link attributes');
    checkEq(r.code, 'print("<b>hi</b>")', 'code block');
    checkEq(r.both, 'both', 'code inside strong');
    checkEq([r.lang, r.copy, r.items], ['python', 1, 2], 'language, copy buttons, list items');
    check(r.pwned === undefined, 'a handler ran');
    for (const t of ['img', 'script', 'svg', 'b', 'i']) check(!r.tags.split(' ').includes(t), `a <${t}> element: ${r.tags}`);
    for (const t of ['strong', 'em', 'code', 'ol', 'pre']) check(r.tags.split(' ').includes(t), `no <${t}>: ${r.tags}`);
    check(r.text.includes('<img src=x onerror="window.__pwned=1">'), 'the HTML is not shown as text');
    check(r.text.includes('[bad](javascript:void0)'), 'the javascript: link is not shown as text');
  });

  await test('a streamed answer with reasoning, Markdown and HTML (canned stream); copy buttons', async () => {
    const code = 'console.log("<img src=x onerror=window.__pwned=4>");';
    const content = `## Answer\n\nHere:\n\n\`\`\`js\n${code}\n\`\`\`\n\n<img src=x onerror="window.__pwned=5"> **done**`;
    const body = sse([
      delta({ role: 'assistant', content: '' }),
      delta({ reasoning_content: 'Let me think about ' }),
      delta({ reasoning_content: '<b>this</b>.' }),
      ...content.match(/[\s\S]{1,7}/g).map((c) => delta({ content: c })),
      {
        choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
        timings: { prompt_n: 5, prompt_ms: 10, predicted_n: 7, predicted_ms: 567, predicted_per_second: 12.345 },
      },
    ]);
    await page.route('**' + CHAT, (route) =>
      route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body }),
    );
    await page.click('#new-chat');
    await say(page, '<img src=x onerror="window.__pwned=6"><script>window.__pwned=7</script>');
    await page.unroute('**' + CHAT);
    await page.waitForTimeout(100);
    checkEq(await page.locator('#messages img, #messages script').count(), 0, 'img/script elements');
    check((await page.evaluate(() => window.__pwned)) === undefined, 'a handler ran');
    checkEq(
      await page.locator('.msg.user .text').textContent(),
      '<img src=x onerror="window.__pwned=6"><script>window.__pwned=7</script>',
      'the user text',
    );
    const answer = lastAnswer(page);
    const details = answer.locator('details.reasoning');
    check(await details.isVisible(), 'no reasoning block');
    checkEq(await details.evaluate((d) => d.open), false, 'the reasoning is folded');
    checkEq(await details.locator('summary').textContent(), 'Thoughts', 'its summary');
    checkEq(await details.locator('.md').textContent(), 'Let me think about <b>this</b>.', 'the reasoning');
    await details.locator('summary').click();
    check(await details.locator('.md').isVisible(), 'the reasoning does not unfold');
    checkEq(await answer.locator('.content h2').textContent(), 'Answer', 'heading');
    checkEq(await answer.locator('.content pre code').textContent(), code, 'code block');
    checkEq(await answer.locator('.stats').textContent(), '7 tokens · 12.3 tok/s', 'stats');
    check(!(await answer.locator('.content').textContent()).includes('Let me think'), 'reasoning in the answer');
    const stored_ = (await currentMessages(page)).at(-1);
    checkEq([stored_.reasoning, stored_.content], ['Let me think about <b>this</b>.', content], 'stored');

    await answer.locator('.code button.copy').click();
    checkEq(await page.evaluate(() => navigator.clipboard.readText()), code, 'the code copied');
    checkEq(await answer.locator('.code button.copy').textContent(), 'Copied', 'the button says so');
    await answer.locator('.meta button.copy').click();
    checkEq(await page.evaluate(() => navigator.clipboard.readText()), content, 'the answer copied');
  });

  await test('a server error shows under the answer; Regenerate then answers', async () => {
    await setting(page, 'max_tokens', 8);
    await page.route('**' + CHAT, (route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({ error: { message: 'all slots are busy', type: 'unavailable_error' } }),
      }),
    );
    await page.click('#new-chat');
    await say(page, 'Are you there?');
    await page.unroute('**' + CHAT);
    checkEq(await lastAnswer(page).locator('.state').textContent(), 'error: 503: all slots are busy', 'state');
    seen.errors = seen.errors.filter((e) => !/status of 503/.test(e)); // the browser logs the 503
    await lastAnswer(page).locator('button.regenerate').click();
    await idle(page);
    const messages = [{ role: 'system', content: system }, { role: 'user', content: 'Are you there?' }];
    checkEq(seen.chats.at(-1).messages, messages, 'request messages');
    const want = await direct(BASE, { messages, temperature: 0, max_tokens: 8 });
    const msg = (await currentMessages(page)).at(-1);
    checkEq([msg.content, msg.error], [want, undefined], 'the answer, the error');
  });

  await test('deleting a conversation', async () => {
    const n = await page.locator('#conversations li').count();
    await page.locator('#conversations .delete').first().click();
    checkEq(await page.locator('#conversations li').count(), n - 1, 'listed');
    checkEq((await stored(page)).conversations.length, n - 1, 'stored');
  });

  await test('no console errors on the page', async () => {
    checkEq(seen.errors, [], 'errors');
  });
  await test('every request went to the server\'s own origin', async () => {
    const others = seen.requests.filter((u) => new URL(u).origin !== new URL(BASE).origin);
    checkEq(others, [], 'requests elsewhere');
    check(seen.requests.some((u) => u.endsWith('/app.js')), 'the requests were not recorded');
  });
  await context.close();
}

async function keyChecks(browser) {
  const { context, page, seen } = await openPage(browser, KEY_BASE);
  await test('with --api-key the page asks for the key, says when it is wrong, then works', async () => {
    const dialog = page.locator('#key-dialog');
    await dialog.waitFor({ state: 'visible' });
    await page.fill('#key-input', 'not-the-key');
    await page.click('#key-dialog button[value=ok]');
    await page.waitForFunction(() => /refused/.test(document.querySelector('#key-why').textContent));
    check(await dialog.isVisible(), 'the dialog did not come back');
    await page.fill('#key-input', KEY);
    await page.click('#key-dialog button[value=ok]');
    await page.waitForFunction(() => /^tiny · /.test(document.querySelector('#model').textContent));
    checkEq(await page.evaluate(() => localStorage.getItem('inferno.apiKey')), KEY, 'the stored key');
    await setting(page, 'temperature', 0);
    await setting(page, 'max_tokens', 8);
    await say(page, 'Hi');
    const messages = [{ role: 'user', content: 'Hi' }];
    const want = await direct(KEY_BASE, { messages, temperature: 0, max_tokens: 8 }, KEY);
    checkEq((await currentMessages(page)).at(-1).content, want, 'the answer');
    await page.reload();
    await page.waitForFunction(() => /^tiny · /.test(document.querySelector('#model').textContent));
    check(!(await dialog.isVisible()), 'asked again after a reload');
    await page.click('#settings-toggle');
    await page.click('#forget-key');
    checkEq(await page.evaluate(() => localStorage.getItem('inferno.apiKey')), null, 'the key after Forget');
    const others = seen.requests.filter((u) => new URL(u).origin !== new URL(KEY_BASE).origin);
    checkEq(others, [], 'requests elsewhere');
  });
  await context.close();
}

// The docs' picture. The models here have random weights, so the answer is a
// canned stream (its timings too); the page, the server and the model name
// are real.
async function screenshot(browser, file) {
  const { context, page, seen } = await openPage(browser, BASE, { colorScheme: process.env.SCHEME || 'light' });
  await page.waitForFunction(() => /tiny/.test(document.querySelector('#model').textContent));
  await setting(page, 'system', 'You are a helpful assistant. Answer briefly.');
  await setting(page, 'temperature', 0.7);
  const answer = [
    'Two common ways:',
    '',
    '1. **Slicing** makes a reversed copy:',
    '',
    '```python',
    'items = [1, 2, 3]',
    'backwards = items[::-1]  # [3, 2, 1]',
    '```',
    '',
    '2. **`list.reverse()`** reverses the list in place and returns `None`.',
    '',
    'Use `reversed(items)` when you only need to *iterate* backwards.',
  ].join('\n');
  const body = sse([
    delta({ role: 'assistant', content: '' }),
    delta({ reasoning_content: 'The user wants to reverse a list: slicing, or list.reverse().' }),
    ...answer.match(/[\s\S]{1,6}/g).map((c) => delta({ content: c })),
    {
      choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
      timings: { prompt_n: 31, prompt_ms: 41, predicted_n: 74, predicted_ms: 1032, predicted_per_second: 71.7 },
    },
  ]);
  await page.route('**' + CHAT, (route) =>
    route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body }),
  );
  await say(page, 'How do I reverse a list in Python?');
  await page.screenshot({ path: file });
  console.log(`saved ${file}; errors: ${JSON.stringify(seen.errors)}`);
  await context.close();
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // root in CI has no sandbox; a container's /dev/shm is often 64 MB
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  if (process.env.SCREENSHOT) {
    await screenshot(browser, process.env.SCREENSHOT);
  } else {
    await mainChecks(browser);
    await keyChecks(browser);
  }
} finally {
  await browser.close();
}
if (!process.env.SCREENSHOT) console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
