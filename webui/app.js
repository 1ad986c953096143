// The chat page: conversations kept in localStorage, answers streamed from
// POST /v1/chat/completions (SSE), rendered with markdown.js.
//
// The model's text is untrusted: it reaches the page only through
// renderMarkdown (escaped first) or textContent.
'use strict';

(function () {
  const { renderMarkdown } = window.inferno;
  const $ = (id) => document.getElementById(id);
  const KEYS = {
    conversations: 'inferno.conversations',
    current: 'inferno.current',
    settings: 'inferno.settings',
    apiKey: 'inferno.apiKey',
  };
  const NUMBERS = ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed'];
  const SAVE_EVERY_MS = 1000; // a streaming answer is saved this often

  // ---- storage ----

  function load(key, fallback) {
    try {
      const v = JSON.parse(localStorage.getItem(key));
      return v === null ? fallback : v;
    } catch {
      return fallback;
    }
  }

  function save(key, value) {
    try {
      localStorage.setItem(key, JSON.stringify(value));
    } catch (e) {
      // full (quota): the conversation goes on, unsaved; say so once
      if (!save.warned) alert('The browser storage is full: delete old conversations.');
      save.warned = true;
    }
  }

  let conversations = load(KEYS.conversations, []); // [{ id, title, messages: [msg] }]
  let currentId = load(KEYS.current, null);
  let settings = load(KEYS.settings, {}); // { system, thinking, temperature, ... }
  let apiKey = localStorage.getItem(KEYS.apiKey) || '';
  let busy = null; // the generation under way: { controller, msg }
  const views = new WeakMap(); // message -> its element (not saved with it)
  const unfolded = new WeakSet(); // messages whose reasoning the reader opened

  const saveConversations = () => save(KEYS.conversations, conversations);
  const current = () => conversations.find((c) => c.id === currentId);

  // ---- the server ----

  // fetch with the API key; a 401 asks for a key and tries again.
  async function api(path, options = {}) {
    for (let why = 'This server needs an API key.'; ; why = 'The server refused that key.') {
      const headers = { ...options.headers };
      if (apiKey) headers.Authorization = 'Bearer ' + apiKey;
      const r = await fetch(path, { ...options, headers });
      if (r.status !== 401) return r;
      const key = await askKey(why);
      if (!key) throw new Error('no API key: this server needs one');
      apiKey = key;
      localStorage.setItem(KEYS.apiKey, key);
      $('key-box').hidden = false;
    }
  }

  let keyWaiters = null; // every request waiting for the one dialog
  function askKey(why) {
    if (keyWaiters) return new Promise((resolve) => keyWaiters.push(resolve));
    keyWaiters = [];
    const dialog = $('key-dialog');
    $('key-why').textContent = why;
    $('key-input').value = '';
    dialog.showModal();
    return new Promise((resolve) => {
      dialog.addEventListener(
        'close',
        () => {
          const key = dialog.returnValue === 'ok' ? $('key-input').value.trim() : '';
          for (const w of keyWaiters) w(key);
          keyWaiters = null;
          resolve(key);
        },
        { once: true },
      );
    });
  }

  async function errorText(r) {
    try {
      const body = await r.json();
      return `${r.status}: ${body.error?.message || JSON.stringify(body)}`;
    } catch {
      return `${r.status} ${r.statusText}`;
    }
  }

  // The JSON of each `data:` line of a server-sent-events body, up to [DONE].
  async function* events(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        yield JSON.parse(data);
      }
    }
  }

  // The server's defaults (GET /props) shown as placeholders, and its model.
  async function loadServer() {
    try {
      const [props, models] = await Promise.all([api('/props'), api('/v1/models')]);
      if (!props.ok || !models.ok) throw new Error(await errorText(props.ok ? models : props));
      const p = await props.json();
      const m = await models.json();
      const d = p.default_generation_settings || {};
      const params = d.params || {};
      for (const name of NUMBERS) {
        let v = name === 'max_tokens' ? params.n_predict : params[name];
        if (name === 'seed' && v === 4294967295) v = 'random';
        if (name === 'max_tokens' && v === -1) v = 'no limit';
        if (typeof v === 'number') v = +v.toPrecision(4);
        if (v !== undefined) $('s-' + name).placeholder = String(v);
      }
      $('model').textContent = `${m.data?.[0]?.id || 'model'} · context ${d.n_ctx ?? '?'}`;
    } catch (e) {
      $('model').textContent = 'server not reachable: ' + e.message;
      setTimeout(loadServer, 2000); // loading a model, or restarting
    }
  }

  // ---- generating ----

  function requestBody(conv) {
    const messages = [];
    if (settings.system) messages.push({ role: 'system', content: settings.system });
    for (const m of conv.messages)
      if (!(m.role === 'assistant' && m.error && !m.content))
        messages.push({ role: m.role, content: m.content });
    const body = { messages, stream: true, stream_options: { include_usage: true } };
    for (const name of NUMBERS) if (settings[name] !== undefined) body[name] = settings[name];
    if (settings.thinking === false) body.chat_template_kwargs = { enable_thinking: false };
    return body;
  }

  // Appends an assistant message to conv and streams the answer into it.
  async function generate(conv) {
    const body = requestBody(conv);
    const msg = { role: 'assistant', content: '', reasoning: '' };
    conv.messages.push(msg);
    saveConversations();
    renderMessages();
    const controller = new AbortController();
    busy = { controller, msg };
    setBusy(true);
    let pieces = 0;
    let firstAt = 0; // when the first piece came: the prompt's time is not the answer's
    let savedAt = performance.now(); // a reload mid-answer keeps what came up to a second ago
    try {
      const r = await api('/v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!r.ok) throw new Error(await errorText(r));
      for await (const chunk of events(r)) {
        if (chunk.error) throw new Error(chunk.error.message || 'the server sent an error');
        const choice = chunk.choices?.[0];
        const delta = choice?.delta || {};
        if (delta.reasoning_content) msg.reasoning += delta.reasoning_content;
        if (delta.content) msg.content += delta.content;
        if (delta.reasoning_content || delta.content) {
          if (!pieces++) firstAt = performance.now();
        }
        if (choice?.finish_reason) msg.finish = choice.finish_reason;
        if (chunk.timings) msg.timings = chunk.timings;
        updateLater(msg);
        if (performance.now() - savedAt > SAVE_EVERY_MS) {
          saveConversations();
          savedAt = performance.now();
        }
      }
    } catch (e) {
      if (e.name === 'AbortError') msg.stopped = true;
      else msg.error = e.message;
    }
    // stopped before the server's timings: the page's own count and clock
    if (!msg.timings && pieces > 1)
      msg.estimate = { n: pieces, per_second: ((pieces - 1) * 1000) / (performance.now() - firstAt) };
    busy = null;
    setBusy(false);
    saveConversations();
    renderMessages();
    // for screen readers: the answer itself is redrawn too often to be announced
    $('status').textContent = msg.error ? 'Error: ' + msg.error : msg.stopped ? 'Stopped' : 'Answer complete';
  }

  function send(text) {
    if (busy || !text.trim()) return;
    let conv = current();
    if (!conv) {
      conv = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), messages: [] };
      conversations.unshift(conv);
      currentId = conv.id;
      save(KEYS.current, currentId);
    }
    if (!conv.title) conv.title = text.trim().replace(/\s+/g, ' ').slice(0, 48);
    conv.messages.push({ role: 'user', content: text });
    renderConversations();
    generate(conv);
  }

  function regenerate() {
    const conv = current();
    if (busy || !conv || conv.messages.at(-1)?.role !== 'assistant') return;
    conv.messages.pop();
    generate(conv);
  }

  // ---- rendering ----

  function statsText(msg) {
    const t = msg.timings;
    if (t && t.predicted_n !== undefined)
      return `${t.predicted_n} tokens · ${t.predicted_per_second.toFixed(1)} tok/s`;
    if (msg.estimate) return `≈${msg.estimate.n} tokens · ≈${msg.estimate.per_second.toFixed(1)} tok/s`;
    return '';
  }

  function statsTitle(msg) {
    const t = msg.timings;
    if (!t) return 'counted by the page (stopped before the server sent its timings)';
    return (
      `prompt: ${t.prompt_n} tokens in ${Math.round(t.prompt_ms)} ms` +
      (t.cache_n ? ` (${t.cache_n} more from the cache)` : '') +
      ` · answer: ${t.predicted_n} tokens in ${Math.round(t.predicted_ms)} ms`
    );
  }

  function stateText(msg, streaming) {
    if (msg.error) return 'error: ' + msg.error;
    if (msg.stopped) return 'stopped';
    if (msg.finish === 'length') return 'cut at max tokens';
    return streaming ? '…' : '';
  }

  function button(label, cls, title) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = cls;
    b.textContent = label;
    if (title) b.title = title;
    return b;
  }

  // One message's element; an assistant's parts are filled by fillMessage.
  function messageElement(msg, index, last) {
    const el = document.createElement('article');
    el.dataset.index = index;
    el.className = 'msg ' + msg.role;
    el.setAttribute('aria-label', msg.role === 'user' ? 'You' : 'Assistant');
    if (msg.role === 'user') {
      const text = document.createElement('div');
      text.className = 'text';
      text.textContent = msg.content;
      el.append(text);
      return el;
    }
    const reasoning = document.createElement('details');
    reasoning.className = 'reasoning';
    reasoning.open = unfolded.has(msg); // the element is made again after each answer
    reasoning.addEventListener('toggle', () =>
      reasoning.open ? unfolded.add(msg) : unfolded.delete(msg),
    );
    const summary = document.createElement('summary');
    reasoning.append(summary, Object.assign(document.createElement('div'), { className: 'md' }));
    const content = Object.assign(document.createElement('div'), { className: 'md content' });
    const meta = document.createElement('footer');
    meta.className = 'meta';
    const stats = Object.assign(document.createElement('span'), { className: 'stats' });
    const state = Object.assign(document.createElement('span'), { className: 'state' });
    meta.append(stats, state, button('Copy', 'copy', 'Copy the answer'));
    if (last) meta.append(button('Regenerate', 'regenerate', 'Answer the last message again'));
    el.append(reasoning, content, meta);
    views.set(msg, el);
    fillMessage(msg);
    return el;
  }

  function fillMessage(msg) {
    const el = views.get(msg);
    const streaming = busy && busy.msg === msg;
    const reasoning = el.querySelector('.reasoning');
    reasoning.hidden = !msg.reasoning;
    reasoning.querySelector('summary').textContent =
      streaming && !msg.content ? 'Thinking…' : 'Thoughts';
    reasoning.querySelector('.md').innerHTML = renderMarkdown(msg.reasoning || '');
    el.querySelector('.content').innerHTML = renderMarkdown(msg.content);
    const stats = el.querySelector('.stats');
    stats.textContent = statsText(msg);
    stats.title = stats.textContent ? statsTitle(msg) : '';
    el.querySelector('.state').textContent = stateText(msg, streaming);
    el.classList.toggle('failed', !!msg.error);
    el.querySelectorAll('.meta button').forEach((b) => (b.disabled = streaming));
  }

  // Chunks come faster than frames: one render per frame at most.
  let pending = null;
  function updateLater(msg) {
    if (pending) return;
    pending = requestAnimationFrame(() => {
      pending = null;
      const box = $('messages');
      const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
      if (views.has(msg)) fillMessage(msg);
      if (atEnd) box.scrollTop = box.scrollHeight;
    });
  }

  function renderMessages() {
    const box = $('messages');
    const conv = current();
    box.replaceChildren();
    if (!conv || !conv.messages.length) {
      const empty = document.createElement('p');
      empty.className = 'empty muted';
      empty.textContent = 'Send a message to start a conversation.';
      box.append(empty);
      return;
    }
    conv.messages.forEach((m, i) => box.append(messageElement(m, i, i === conv.messages.length - 1)));
    box.scrollTop = box.scrollHeight;
  }

  function renderConversations() {
    const list = $('conversations');
    list.replaceChildren();
    for (const conv of conversations) {
      const li = document.createElement('li');
      const open = button(conv.title || 'New chat', 'conv');
      open.dataset.id = conv.id;
      if (conv.id === currentId) open.setAttribute('aria-current', 'true');
      const del = button('×', 'delete', 'Delete this conversation');
      del.dataset.id = conv.id;
      del.setAttribute('aria-label', 'Delete ' + (conv.title || 'conversation'));
      li.append(open, del);
      list.append(li);
    }
  }

  function render() {
    renderConversations();
    renderMessages();
  }

  function setBusy(on) {
    const b = $('send');
    b.textContent = on ? 'Stop' : 'Send';
    b.classList.toggle('stop', on);
    b.type = on ? 'button' : 'submit';
    $('new-chat').disabled = on;
    document.querySelectorAll('#conversations button').forEach((x) => (x.disabled = on));
  }

  // ---- settings ----

  function showSettings() {
    $('s-system').value = settings.system || '';
    for (const name of NUMBERS) $('s-' + name).value = settings[name] ?? '';
    $('s-thinking').checked = settings.thinking !== false;
  }

  function readSettings() {
    const next = { system: $('s-system').value };
    for (const name of NUMBERS) {
      const v = $('s-' + name).value.trim();
      if (v !== '' && Number.isFinite(Number(v))) next[name] = Number(v);
    }
    if (!$('s-thinking').checked) next.thinking = false;
    settings = next;
    save(KEYS.settings, settings);
  }

  // ---- copying ----

  async function copy(text, b) {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // no clipboard API (plain http on another host): a selected textarea
      const t = Object.assign(document.createElement('textarea'), { value: text });
      document.body.append(t);
      t.select();
      document.execCommand('copy');
      t.remove();
    }
    const was = b.textContent;
    b.textContent = 'Copied';
    setTimeout(() => (b.textContent = was), 1200);
  }

  // ---- events ----

  function bind() {
    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      const text = $('prompt').value;
      if (busy || !text.trim()) return;
      $('prompt').value = '';
      send(text);
    });
    $('prompt').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        if (!busy) $('composer').requestSubmit();
      }
    });
    $('send').addEventListener('click', () => {
      if (busy) busy.controller.abort();
    });
    $('new-chat').addEventListener('click', () => {
      currentId = null;
      save(KEYS.current, null);
      render();
      $('prompt').focus();
    });
    $('conversations').addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b || busy) return;
      if (b.classList.contains('delete')) {
        conversations = conversations.filter((c) => c.id !== b.dataset.id);
        if (currentId === b.dataset.id) currentId = null;
        saveConversations();
      } else {
        currentId = b.dataset.id;
      }
      save(KEYS.current, currentId);
      render();
    });
    $('messages').addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      const conv = current();
      const el = b.closest('.msg');
      if (b.dataset.copy === 'code') copy(b.closest('.code').querySelector('code').textContent, b);
      else if (b.classList.contains('copy'))
        copy(conv.messages[el.dataset.index]?.content || '', b);
      else if (b.classList.contains('regenerate')) regenerate();
    });
    $('sidebar-toggle').addEventListener('click', () => {
      const open = document.body.classList.toggle('sidebar-open'); // narrow screens only
      $('sidebar-toggle').setAttribute('aria-expanded', String(open));
    });
    $('settings-toggle').addEventListener('click', () => {
      const panel = $('settings');
      panel.hidden = !panel.hidden;
      $('settings-toggle').setAttribute('aria-expanded', String(!panel.hidden));
    });
    $('settings').addEventListener('input', readSettings);
    $('settings-reset').addEventListener('click', () => {
      settings = { system: settings.system };
      save(KEYS.settings, settings);
      showSettings();
    });
    $('forget-key').addEventListener('click', () => {
      apiKey = '';
      localStorage.removeItem(KEYS.apiKey);
      $('key-box').hidden = true;
    });
  }

  bind();
  showSettings();
  $('key-box').hidden = !apiKey;
  if (!current()) currentId = null;
  render();
  loadServer();
  $('prompt').focus();
})();
