// Endpoint security on the endpoint pages: how deliveries prove themselves
// to the endpoint (none, mTLS, OAuth2 client credentials), how they are
// signed (HMAC-SHA256 or Ed25519) and whether their payload is encrypted
// to the merchant's public key. The form's part (securityFieldset) and the
// detail's facts (securityFacts); app.js places them.
//
// Secrets (a client key, a client secret, a private key) go to the API and
// are never shown again: an edit offers to keep what is set, or to replace
// it whole.

import { h, time } from './dom.js';

const modes = [
  ['none', 'None: the signature alone'],
  ['mtls', 'Mutual TLS: a client certificate on every connection'],
  ['oauth2_client_credentials', 'OAuth2 client credentials: a bearer token from your authorization server'],
];

const schemes = [
  ['hmac_sha256', 'HMAC-SHA256 (a shared secret)'],
  ['ed25519', 'Ed25519 (a key pair: you verify with the public key)'],
];

// textArea is a PEM or JSON text field.
function textArea(id, placeholder) {
  return h('textarea', { id, rows: '4', spellcheck: 'false', autocomplete: 'off', placeholder });
}

// field is a labelled control.
function field(id, label, control) {
  return h('label', { for: id }, label, control);
}

// securityFieldset is the form's "Endpoint security" section for sub (null
// when creating). read() answers what goes in the create or update body:
// only what the form changes (an edit leaves the rest as it is), or throws
// an Error whose message tells the person what to fix.
export function securityFieldset(sub) {
  const current = sub && sub.authentication ? sub.authentication.type : 'none';
  const modeOptions = sub && sub.authentication ? [['keep', `Keep as it is (${current === 'mtls' ? 'mutual TLS' : 'OAuth2'})`], ...modes] : modes;
  const mode = h('select', { id: 'endpoint-security-mode', name: 'authentication_type' },
    modeOptions.map(([v, label]) => h('option', { value: v, selected: v === (sub && sub.authentication ? 'keep' : 'none') }, label)));

  const cert = textArea('endpoint-mtls-certificate', '-----BEGIN CERTIFICATE-----');
  const key = textArea('endpoint-mtls-key', '-----BEGIN PRIVATE KEY-----');
  const serverCA = textArea('endpoint-mtls-server-ca', '-----BEGIN CERTIFICATE-----');
  const mtls = h('div', { class: 'stack', hidden: true },
    field('endpoint-mtls-certificate', 'Client certificate (PEM, the leaf first)', cert),
    field('endpoint-mtls-key', 'Client key (PEM, never shown again)', key),
    field('endpoint-mtls-server-ca', 'Server CA (PEM, optional): the only root your endpoint\'s certificate may chain to', serverCA));

  const tokenURL = h('input', { id: 'endpoint-oauth-token-url', type: 'url', autocomplete: 'off', placeholder: 'https://auth.example.com/oauth2/token' });
  const clientID = h('input', { id: 'endpoint-oauth-client-id', type: 'text', autocomplete: 'off' });
  const credential = h('select', { id: 'endpoint-oauth-credential' },
    h('option', { value: 'client_secret' }, 'A client secret'),
    h('option', { value: 'private_key' }, 'A private key (private_key_jwt)'));
  const clientSecret = h('input', { id: 'endpoint-oauth-client-secret', type: 'password', autocomplete: 'off' });
  const privateKey = textArea('endpoint-oauth-private-key', '-----BEGIN PRIVATE KEY-----');
  const secretField = field('endpoint-oauth-client-secret', 'Client secret (never shown again)', clientSecret);
  const keyField = field('endpoint-oauth-private-key', 'Private key (PEM, never shown again)', privateKey);
  keyField.hidden = true;
  const scopes = h('input', { id: 'endpoint-oauth-scopes', type: 'text', autocomplete: 'off', placeholder: 'webhooks:write' });
  const audience = h('input', { id: 'endpoint-oauth-audience', type: 'text', autocomplete: 'off' });
  const oauth = h('div', { class: 'stack', hidden: true },
    field('endpoint-oauth-token-url', 'Token URL', tokenURL),
    field('endpoint-oauth-client-id', 'Client ID', clientID),
    field('endpoint-oauth-credential', 'Credential', credential),
    secretField, keyField,
    field('endpoint-oauth-scopes', 'Scopes (optional, space-separated)', scopes),
    field('endpoint-oauth-audience', 'Audience (optional)', audience));

  const show = () => {
    mtls.hidden = mode.value !== 'mtls';
    oauth.hidden = mode.value !== 'oauth2_client_credentials';
    secretField.hidden = credential.value !== 'client_secret';
    keyField.hidden = credential.value !== 'private_key';
  };
  mode.addEventListener('change', show);
  credential.addEventListener('change', show);

  // The signature scheme is chosen when the endpoint is made; an edit
  // shows it.
  const scheme = h('select', { id: 'endpoint-signature-scheme', name: 'signature_scheme', disabled: Boolean(sub) },
    schemes.map(([v, label]) => h('option', { value: v, selected: v === ((sub && sub.signature_scheme) || 'hmac_sha256') }, label)));
  const shownKey = sub && sub.encryption && sub.encryption.public_key ? JSON.stringify(sub.encryption.public_key, null, 2) : '';
  const jwk = textArea('endpoint-encryption-key', '{"kty": "RSA", "n": "…", "e": "AQAB"}');
  jwk.value = shownKey;

  const node = h('fieldset', { class: 'controls', 'aria-label': 'Endpoint security' }, h('legend', null, 'Endpoint security'),
    field('endpoint-security-mode', 'Authentication', mode), mtls, oauth,
    field('endpoint-signature-scheme', sub ? 'Signature scheme (chosen when the endpoint was made)' : 'Signature scheme', scheme),
    field('endpoint-encryption-key', 'Encryption public key (optional, a JWK): payloads are sent encrypted to it', jwk));

  const read = () => {
    const body = {};
    const text = (el) => el.value.trim();
    switch (mode.value) {
      case 'none':
        if (current !== 'none') body.authentication = null;
        break;
      case 'mtls': {
        if (!text(cert) || !text(key)) throw new Error('Paste the client certificate and its key (PEM).');
        const a = { type: 'mtls', client_certificate: cert.value, client_key: key.value };
        if (text(serverCA)) a.server_ca = serverCA.value;
        body.authentication = a;
        break;
      }
      case 'oauth2_client_credentials': {
        if (!text(tokenURL) || !text(clientID)) throw new Error('Enter the token URL and the client ID.');
        const a = { type: 'oauth2_client_credentials', token_url: text(tokenURL), client_id: text(clientID) };
        if (credential.value === 'client_secret') {
          if (!clientSecret.value) throw new Error('Enter the client secret.');
          a.client_secret = clientSecret.value;
        } else {
          if (!text(privateKey)) throw new Error('Paste the private key (PEM).');
          a.private_key = privateKey.value;
        }
        const list = text(scopes).split(/\s+/).filter(Boolean);
        if (list.length > 0) a.scopes = list;
        if (text(audience)) a.audience = text(audience);
        body.authentication = a;
        break;
      }
      default: // keep
    }
    if (!sub && scheme.value !== 'hmac_sha256') body.signature_scheme = scheme.value;
    if (text(jwk) !== shownKey.trim()) {
      if (!text(jwk)) {
        body.encryption = null;
      } else {
        let key;
        try { key = JSON.parse(jwk.value); } catch { throw new Error('The encryption public key must be a JWK: a JSON object.'); }
        body.encryption = { public_key: key };
      }
    }
    return body;
  };
  return { node, read };
}

// securityFacts are the detail's [label, value] pairs for sub's endpoint
// security.
export function securityFacts(sub) {
  const a = sub.authentication;
  const pairs = [];
  if (!a) {
    pairs.push(['Authentication', 'None: the signature alone']);
  } else if (a.type === 'mtls') {
    pairs.push(['Authentication', 'Mutual TLS (client certificate)'],
      ['Certificate subject', h('code', null, a.subject)],
      ['Certificate issuer', h('code', null, a.issuer)],
      ['Certificate expires', h('span', { class: 'row' }, time(a.not_after),
        a.expires_soon && h('span', { class: 'badge pending' }, 'expires soon'),
        a.expires_soon && h('span', { class: 'notice warn', role: 'status' },
          'This certificate expires within 14 days: set a new one (Edit → Endpoint security), or deliveries will fail.'))],
      ['Server CA', a.server_ca ? 'Your own CA' : 'The public roots']);
  } else if (a.type === 'oauth2_client_credentials') {
    pairs.push(['Authentication', 'OAuth2 client credentials (bearer token)'],
      ['Token URL', h('code', null, a.token_url)],
      ['Client ID', h('code', null, a.client_id)],
      ['Credential', a.credential === 'private_key' ? 'A private key (private_key_jwt)' : 'A client secret'],
      ['Scopes', a.scopes && a.scopes.length > 0 ? a.scopes.join(' ') : 'None'],
      a.audience && ['Audience', h('code', null, a.audience)]);
  } else {
    pairs.push(['Authentication', a.type]);
  }
  const scheme = sub.signature_scheme || 'hmac_sha256';
  pairs.push(['Signature scheme', scheme === 'ed25519' ? 'Ed25519' : 'HMAC-SHA256']);
  if (sub.signing_public_key) pairs.push(['Signing public key', h('code', { class: 'secret', id: 'signing-public-key' }, sub.signing_public_key)]);
  pairs.push(['Encryption', sub.encryption ? `Payloads encrypted to your public key${sub.encryption.public_key && sub.encryption.public_key.kid ? ` (${sub.encryption.public_key.kid})` : ''}` : 'None']);
  return pairs.filter(Boolean);
}
