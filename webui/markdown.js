// Markdown to HTML for text the page does not trust (the model's answers).
//
// The whole text is HTML-escaped first; every rule below then works on the
// escaped text and adds only its own fixed tags, so nothing the model writes
// can become markup. Links keep only http(s) addresses (an escaped address
// cannot hold a quote, so it cannot leave its attribute).
//
// Supported: headings, paragraphs (a newline is a line break), **strong**,
// *em* / _em_, `inline code`, [links](https://...), - and 1. lists, > quotes,
// --- rules, and ``` fenced code blocks (with a copy button; an unclosed fence
// runs to the end, as it does while an answer streams in).
'use strict';

(function () {
  const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  // Emphasis inside one piece of escaped text that holds no code or link.
  function emphasis(s) {
    return s
      .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
      .replace(/\*(?=[^\s*])([^*]*?[^\s*])\*/g, '<em>$1</em>')
      .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>');
  }

  // Code spans and links are cut out first and stand as placeholders
  // (U+E000 n U+E001, characters renderMarkdown keeps out of the text) while
  // emphasis is matched, so that emphasis never reaches into code or into an
  // address but may hold them: **`x`**.
  const ATOMS = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(([^\s()]+)\)/g;

  function inline(s) {
    const atoms = [];
    const held = s.replace(ATOMS, (all, ticks, code, label, url) => {
      if (ticks) atoms.push('<code>' + code + '</code>');
      else if (/^https?:\/\//i.test(url))
        atoms.push(`<a href="${url}" target="_blank" rel="noopener noreferrer">${emphasis(label)}</a>`);
      else return all; // not a web address: left as text
      return '\uE000' + (atoms.length - 1) + '\uE001';
    });
    return emphasis(held).replace(/\uE000(\d+)\uE001/g, (_, i) => atoms[i]);
  }

  function codeBlock(lang, lines) {
    const label = lang ? `<span class="code-lang">${lang}</span>` : '<span></span>';
    return (
      `<div class="code"><div class="code-head">${label}` +
      '<button type="button" class="copy" data-copy="code">Copy</button></div>' +
      `<pre><code>${lines.join('\n')}</code></pre></div>`
    );
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$/;
  const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^ {0,3}&gt; ?(.*)$/;

  // Block structure of escaped text, line by line.
  function blocks(text) {
    const lines = text.split('\n');
    let html = '';
    let para = [];
    let list = null; // { tag: 'ul' | 'ol', start, items: [] }

    const endPara = () => {
      if (para.length) html += '<p>' + para.map(inline).join('<br>') + '</p>';
      para = [];
    };
    const endList = () => {
      if (!list) return;
      const start = list.tag === 'ol' && list.start !== 1 ? ` start="${list.start}"` : '';
      html += `<${list.tag}${start}>`;
      for (const item of list.items) html += '<li>' + item.map(inline).join('<br>') + '</li>';
      html += `</${list.tag}>`;
      list = null;
    };
    const endAll = () => {
      endPara();
      endList();
    };

    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        endAll();
        const code = [];
        const close = new RegExp('^ {0,3}' + m[1][0] + '{' + m[1].length + ',}\\s*$');
        for (i++; i < lines.length && !close.test(lines[i]); i++) code.push(lines[i]);
        html += codeBlock(m[2], code);
      } else if (/^\s*$/.test(line)) {
        endAll();
      } else if ((m = HEADING.exec(line))) {
        endAll();
        const n = m[1].length;
        html += `<h${n}>${inline(m[2])}</h${n}>`;
      } else if (RULE.test(line)) {
        endAll();
        html += '<hr>';
      } else if ((m = ITEM.exec(line))) {
        endPara();
        const tag = /\d/.test(m[1]) ? 'ol' : 'ul';
        if (!list || list.tag !== tag) {
          endList();
          list = { tag, start: tag === 'ol' ? parseInt(m[1], 10) : 1, items: [] };
        }
        list.items.push([m[2]]);
      } else if (list && /^\s{2,}\S/.test(line)) {
        list.items[list.items.length - 1].push(line.trim()); // an item's next line
      } else if ((m = QUOTE.exec(line))) {
        endAll();
        const quoted = [m[1]];
        while (i + 1 < lines.length && (m = QUOTE.exec(lines[i + 1]))) quoted.push(m[1]), i++;
        html += '<blockquote>' + blocks(quoted.join('\n')) + '</blockquote>';
      } else {
        endList();
        para.push(line.trim());
      }
    }
    endAll();
    return html;
  }

  // The HTML for a Markdown text: safe to assign to innerHTML.
  function renderMarkdown(text) {
    const plain = String(text).replace(/[\uE000\uE001]/g, '\uFFFD'); // inline()'s placeholders
    return blocks(escapeHtml(plain).replace(/\r\n?/g, '\n'));
  }

  window.inferno = Object.assign(window.inferno || {}, { renderMarkdown, escapeHtml });
})();
