// The portal's only way to the server: the /v1 API with the session's
// Bearer token. The token arrives in the URL's fragment (never sent to a
// server, never in a log or a Referer) and is kept in sessionStorage, so
// that it dies with the tab.

const tokenKey = 'webhookd.portal.token';

// takeToken moves a #token=… fragment into sessionStorage and removes it
// from the address bar, then answers the tab's token, or null.
export function takeToken() {
  const match = /^#token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(tokenKey, decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem(tokenKey);
}

// forgetToken ends the tab's use of its token.
export function forgetToken() {
  sessionStorage.removeItem(tokenKey);
}

// ApiError is a refused request, with the API's error body.
export class ApiError extends Error {
  constructor(status, body) {
    const b = body && typeof body === 'object' ? body : {};
    super(b.message || `The server answered ${status}.`);
    this.status = status;
    this.code = b.code || null;
    this.param = b.param || null;
    this.correlationId = b.correlation_id || null;
  }

  // describe is the sentence shown to the merchant.
  describe() {
    let text = this.message;
    if (this.code === 'insufficient_scope') {
      text = 'This session is not allowed to do that. ' + text;
    }
    const extra = [this.code, this.correlationId && `reference ${this.correlationId}`].filter(Boolean);
    return extra.length ? `${text} (${extra.join(', ')})` : text;
  }
}

// idempotencyKey names one POST, so that a retried request is not applied
// twice.
function idempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// Api calls /v1 with one token. onEnded is called when the server no
// longer accepts it (401): the session expired or was signed out.
export class Api {
  constructor(token, onEnded) {
    this.token = token;
    this.onEnded = onEnded;
  }

  // request answers the parsed body (or, with raw, {json, text}); a non-2xx
  // answer throws an ApiError.
  async request(method, path, { query, body, raw } = {}) {
    const url = new URL('/v1' + path, location.origin);
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
    }
    const headers = { Authorization: `Bearer ${this.token}`, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (method === 'POST') headers['Idempotency-Key'] = idempotencyKey();
    let resp;
    try {
      resp = await fetch(url, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer',
      });
    } catch (err) {
      throw new ApiError(0, { message: 'The server could not be reached. Check your connection and try again.' });
    }
    const text = resp.status === 204 ? '' : await resp.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (!resp.ok) {
      const err = new ApiError(resp.status, json);
      if (resp.status === 401 && this.onEnded) this.onEnded(err);
      throw err;
    }
    return raw ? { json, text } : json;
  }

  get(path, query) { return this.request('GET', path, { query }); }
  post(path, body) { return this.request('POST', path, { body: body === undefined ? {} : body }); }
  del(path) { return this.request('DELETE', path); }
}
