'use strict';
const fs = require('fs');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();
const store = process.env.GHBUILD_ACT_ARTIFACTS;
if (!store) {
  console.log('::error::GHBUILD_ACT_ARTIFACTS is not set (act test harness)');
  process.exit(1);
}
const escape = (s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
const pattern = input('pattern') || input('name') || '*';
const matcher = new RegExp(`^${pattern.split('*').map(escape).join('.*')}$`);
const dest = input('path') || '.';
const merge = input('merge-multiple') === 'true';
const names = fs.existsSync(store) ? fs.readdirSync(store).filter((n) => matcher.test(n)).sort() : [];
if (input('name') && names.length === 0) {
  console.log(`::error::Artifact not found: ${input('name')}`);
  process.exit(1);
}
fs.mkdirSync(dest, { recursive: true });
for (const name of names) {
  fs.cpSync(path.join(store, name), merge ? dest : path.join(dest, name), { recursive: true });
}
console.log(`stand-in download: ${names.length} artifact(s) matching ${pattern} -> ${dest}`);
