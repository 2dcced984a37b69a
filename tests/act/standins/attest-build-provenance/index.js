'use strict';
// actions/attest-build-provenance stand-in for the act tests: the real action's subject checks, no attestation.
const fs = require('fs');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();
const fail = (message) => { console.log(`::error::${message}`); process.exit(1); };

const given = ['subject-path', 'subject-digest', 'subject-checksums'].filter((name) => input(name));
if (given.length !== 1) {
  fail(given.length ? 'Only one of subject-path, subject-digest, or subject-checksums may be provided'
                    : 'One of subject-path, subject-digest, or subject-checksums must be provided');
}
let subjects = [];
if (input('subject-digest')) {
  if (!input('subject-name')) fail('subject-name must be provided when using subject-digest');
  const [alg, hex] = input('subject-digest').split(':');
  subjects = [{ name: input('subject-name'), digest: { [alg]: hex } }];
} else if (input('subject-checksums')) {
  const source = input('subject-checksums');
  const text = fs.existsSync(source) ? fs.readFileSync(source, 'utf-8') : source;
  for (const record of text.split('\n').filter(Boolean)) {
    const space = record.indexOf(' ');
    if (space === -1) continue;                    // as the real parser: a line without a delimiter is skipped
    const digest = record.slice(0, space);
    const rest = record.slice(space + 1);
    const name = rest.startsWith('*') || rest.startsWith(' ') ? rest.slice(1) : rest;
    if (!/^[0-9a-fA-F]+$/.test(digest)) fail(`Invalid digest: ${digest}`);
    subjects.push({ name, digest: { [digest.length === 128 ? 'sha512' : 'sha256']: digest } });
  }
} else {
  fail('subject-path: not supported by the act stand-in (the workflows attest registry digests)');
}
const dir = process.env.GHBUILD_ACT_RECORD;
if (!dir) fail('GHBUILD_ACT_RECORD is not set (act test harness)');
fs.mkdirSync(dir, { recursive: true });
const record = { action: 'attest', subjects, push_to_registry: input('push-to-registry') === 'true',
                 job: process.env.GITHUB_JOB || '', workflow: process.env.GITHUB_WORKFLOW || '' };
fs.writeFileSync(path.join(dir, `attest-${Date.now()}-${process.pid}.json`), JSON.stringify(record) + '\n');
console.log(`stand-in attestation: ${subjects.length} subjects recorded; none created (act has no GitHub ` +
            'attestation API, Sigstore or OIDC token)');
