// Shows JSON exactly as the server stored it: an event's payload is
// delivered byte for byte, so the portal re-indents the raw text without
// parsing it (JSON.parse would turn 1.10 into 1.1 and round big integers).

// rawField answers the raw text of a top-level field of a JSON object, or
// null when it is absent.
export function rawField(text, name) {
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return null;
  i = skipSpace(text, i + 1);
  while (i < text.length && text[i] !== '}') {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd));
    i = skipSpace(text, keyEnd);
    i = skipSpace(text, i + 1); // the colon
    const end = skipValue(text, i);
    if (key === name) return text.slice(i, end);
    i = skipSpace(text, end);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return null;
}

function skipSpace(t, i) {
  while (i < t.length && ' \t\r\n'.includes(t[i])) i++;
  return i;
}

function skipString(t, i) {
  i++;
  while (i < t.length && t[i] !== '"') i += t[i] === '\\' ? 2 : 1;
  return i + 1;
}

function skipValue(t, i) {
  if (t[i] === '"') return skipString(t, i);
  if (t[i] === '{' || t[i] === '[') {
    let depth = 0;
    while (i < t.length) {
      const c = t[i];
      if (c === '"') { i = skipString(t, i); continue; }
      if (c === '{' || c === '[') depth++;
      if (c === '}' || c === ']') { depth--; if (depth === 0) return i + 1; }
      i++;
    }
    return i;
  }
  while (i < t.length && !',}] \t\r\n'.includes(t[i])) i++;
  return i;
}

// indent re-indents JSON text by two spaces, keeping every token as it is.
export function indent(text) {
  let out = '';
  let depth = 0;
  const pad = () => '\n' + '  '.repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = skipString(text, i);
      out += text.slice(i, end);
      i = end - 1;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      const next = skipSpace(text, i + 1);
      if (text[next] === close) { out += c + close; i = next; continue; }
      depth++;
      out += c + pad();
    } else if (c === '}' || c === ']') {
      depth--;
      out += pad() + c;
    } else if (c === ',') {
      out += ',' + pad();
    } else if (c === ':') {
      out += ': ';
    } else if (!' \t\r\n'.includes(c)) {
      out += c;
    }
  }
  return out;
}
