'use strict';
const fs = require('fs');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();
const registry = input('registry') || 'docker.io';
if (!input('username') || !input('password')) {
  console.log('::error::Username and password required');
  process.exit(1);
}
const dir = process.env.GHBUILD_ACT_RECORD;
if (!dir) {
  console.log('::error::GHBUILD_ACT_RECORD is not set (act test harness)');
  process.exit(1);
}
fs.mkdirSync(dir, { recursive: true });
const record = { action: 'login', registry, username: input('username'), password_set: true,
                 job: process.env.GITHUB_JOB || '', workflow: process.env.GITHUB_WORKFLOW || '' };
const file = path.join(dir, `login-${Date.now()}-${process.pid}.json`);
fs.writeFileSync(file, JSON.stringify(record) + '\n');
console.log(`stand-in login to ${registry} as ${record.username} (recorded, nothing sent)`);
