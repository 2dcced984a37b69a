'use strict';
// actions/cache/restore and actions/cache/save stand-in: an exact-key store in $GHBUILD_ACT_CACHE, kept
// for the whole act session (as GitHub keeps a cache between runs). Entries are immutable, as on GitHub:
// a save under an existing key does nothing. No scopes, no restore-keys (the setup action uses neither).
const fs = require('fs');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();

exports.run = (mode) => {
  const store = process.env.GHBUILD_ACT_CACHE;
  const key = input('key');
  const paths = input('path').split('\n').map((p) => p.trim()).filter(Boolean);
  if (!store || !key || !paths.length) {
    console.log(`::error::cache stand-in: GHBUILD_ACT_CACHE, key and path are required`);
    process.exit(1);
  }
  const entry = path.join(store, key.replace(/[^\w.-]/g, '_'));
  const output = (name, value) => fs.appendFileSync(process.env.GITHUB_OUTPUT, `${name}=${value}\n`);
  if (mode === 'restore') {
    const hit = fs.existsSync(path.join(entry, '.complete'));
    if (hit) {
      paths.forEach((p, i) => {
        const saved = path.join(entry, String(i));
        if (fs.existsSync(saved)) {
          fs.rmSync(p, { recursive: true, force: true });
          fs.mkdirSync(path.dirname(p), { recursive: true });
          fs.cpSync(saved, p, { recursive: true, verbatimSymlinks: true });
        }
      });
    }
    console.log(`cache stand-in: ${hit ? 'restored' : 'no entry for'} ${key}`);
    output('cache-hit', hit ? 'true' : 'false');
    output('cache-primary-key', key);
    output('cache-matched-key', hit ? key : '');
    return;
  }
  if (fs.existsSync(path.join(entry, '.complete'))) {
    console.log(`cache stand-in: ${key} exists already; not saved again`);
    return;
  }
  fs.rmSync(entry, { recursive: true, force: true });
  fs.mkdirSync(entry, { recursive: true });
  paths.forEach((p, i) => {
    if (fs.existsSync(p)) fs.cpSync(p, path.join(entry, String(i)), { recursive: true, verbatimSymlinks: true });
  });
  fs.writeFileSync(path.join(entry, '.complete'), '');
  console.log(`cache stand-in: saved ${key}`);
};
