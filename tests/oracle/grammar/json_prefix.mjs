// Whether a text is the start of a JSON object (RFC 8259), written for the
// tests from the RFC's grammar and sharing nothing with inferno: a character
// by character walk over a stack of open containers. Returns { ok, why } and,
// when ok, `completion`: text that closes what is open, so that
// JSON.parse(text + completion) gives an object (the caller checks that too,
// so the walk is itself checked by JSON.parse).

const WS = ' \t\n\r';
const NUM_PREFIX = /^-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*|(?:\.[0-9]+)?[eE][-+]?[0-9]*)?)?$/;
const NUM_WHOLE = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$/;

export function jsonObjectPrefix(text) {
  const stack = []; // '{' or '['
  // start, key0 (after '{'), key (after ',' in an object), colon, value0
  // (after '['), value, lit, str, num, after (a value ended), end
  let st = 'start';
  let lit = ''; // what a literal still needs
  let num = ''; // the number so far
  let key = false; // the string is a key
  let esc = 0; // 1: after '\', 2..5: inside \u with esc-2 hex digits
  const ended = () => { st = stack.length ? 'after' : 'end'; };

  // One character; an error message, or null.
  const step = (c) => {
    const ws = WS.includes(c);
    switch (st) {
      case 'start':
        if (ws) return null;
        if (c !== '{') return 'not an object';
        stack.push('{');
        st = 'key0';
        return null;
      case 'key0':
      case 'key':
        if (ws) return null;
        if (c === '}' && st === 'key0') { stack.pop(); ended(); return null; }
        if (c !== '"') return 'a key expected';
        st = 'str';
        key = true;
        return null;
      case 'colon':
        if (ws) return null;
        if (c !== ':') return "':' expected";
        st = 'value';
        return null;
      case 'value0':
      case 'value':
        if (ws) return null;
        if (c === ']' && st === 'value0') { stack.pop(); ended(); return null; }
        if (c === '{') { stack.push('{'); st = 'key0'; return null; }
        if (c === '[') { stack.push('['); st = 'value0'; return null; }
        if (c === '"') { st = 'str'; key = false; return null; }
        if (c === '-' || (c >= '0' && c <= '9')) { st = 'num'; num = c; return null; }
        for (const w of ['true', 'false', 'null']) {
          if (c === w[0]) { st = 'lit'; lit = w.slice(1); return null; }
        }
        return 'a value expected';
      case 'lit':
        if (c !== lit[0]) return 'a misspelt literal';
        lit = lit.slice(1);
        if (!lit) ended();
        return null;
      case 'str':
        if (esc === 1) {
          if ('"\\/bfnrt'.includes(c)) esc = 0;
          else if (c === 'u') esc = 2;
          else return 'a bad escape';
          return null;
        }
        if (esc >= 2) {
          if (!/^[0-9a-fA-F]$/.test(c)) return 'a bad \\u escape';
          esc = esc === 5 ? 0 : esc + 1;
          return null;
        }
        if (c === '\\') { esc = 1; return null; }
        if (c === '"') {
          if (key) st = 'colon';
          else ended();
          return null;
        }
        if (c.charCodeAt(0) < 0x20) return 'a raw control character in a string';
        return null;
      case 'num':
        if (NUM_PREFIX.test(num + c)) { num += c; return null; }
        if (!NUM_WHOLE.test(num)) return 'a broken number';
        ended(); // the number ended before c: c is what follows it
        return step(c);
      case 'after':
        if (ws) return null;
        if (c === ',') { st = stack.at(-1) === '{' ? 'key' : 'value'; return null; }
        if ((c === '}' && stack.at(-1) === '{') || (c === ']' && stack.at(-1) === '[')) {
          stack.pop();
          ended();
          return null;
        }
        return `',' or a closing bracket expected`;
      case 'end':
        return ws ? null : 'text after the object';
    }
    return `unknown state ${st}`;
  };

  for (let i = 0; i < text.length; i++) {
    const why = step(text[i]);
    if (why) {
      return { ok: false, why: `${why} at ${i}: ${JSON.stringify(text.slice(Math.max(0, i - 20), i + 1))}` };
    }
  }
  let completion = {
    start: '{}', key0: '', key: '"k":0', colon: ':0', value0: '', value: '0', lit, after: '', end: '',
    num: NUM_WHOLE.test(num) ? '' : '0',
    str: (esc === 1 ? 'n' : esc >= 2 ? '0'.repeat(6 - esc) : '') + '"' + (key ? ':0' : ''),
  }[st];
  completion += stack.reverse().map((b) => (b === '{' ? '}' : ']')).join('');
  return { ok: true, complete: st === 'end', completion };
}
