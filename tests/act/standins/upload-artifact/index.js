'use strict';
const fs = require('fs');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();
const store = process.env.GHBUILD_ACT_ARTIFACTS;
if (!store) {
  console.log('::error::GHBUILD_ACT_ARTIFACTS is not set (act test harness)');
  process.exit(1);
}
const name = input('name') || 'artifact';
const source = input('path');
if (!fs.existsSync(source)) {
  const mode = input('if-no-files-found') || 'warn';
  if (mode === 'error') {
    console.log(`::error::No files were found with the provided path: ${source}`);
    process.exit(1);
  }
  console.log(`no files at ${source}: nothing uploaded (${mode})`);
  process.exit(0);
}
const target = path.join(store, name);
fs.rmSync(target, { recursive: true, force: true });
fs.mkdirSync(target, { recursive: true });
const stat = fs.statSync(source);
fs.cpSync(source, stat.isDirectory() ? target : path.join(target, path.basename(source)), { recursive: true });
console.log(`stand-in upload: ${source} -> artifact ${name}`);
