// The build-image action: run `ghbuild build` (or `ghbuild ensure-base`) with the runner's runtime
// variables in its environment.
//
// Why a JavaScript action: the runner gives ACTIONS_RUNTIME_TOKEN and the cache service's URL
// (ACTIONS_RESULTS_URL on github.com; ACTIONS_CACHE_URL for the legacy API that act and GitHub Enterprise
// Server serve) to JavaScript actions only, never to `run:` steps, and buildx silently drops a `type=gha`
// cache without them. This action hands its own environment to the one child
// process it starts and to nothing else: it never writes GITHUB_ENV, so no later step sees the token.
//
// No dependencies (no @actions/core): inputs come from INPUT_* variables, the only output it writes
// itself (`gha-cache`) goes to GITHUB_OUTPUT; ghbuild writes `digest`, `ref`, ... to the same file.
// Exit code: ghbuild's.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');

const TOKEN_VAR = 'ACTIONS_RUNTIME_TOKEN';
const CACHE_URL_VARS = ['ACTIONS_RESULTS_URL', 'ACTIONS_CACHE_URL'];
const RUNTIME_VARS = [TOKEN_VAR, ...CACHE_URL_VARS];

function escapeData(text) {
  return String(text).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

function fail(message) {
  process.stdout.write(`::error title=ghbuild build-image::${escapeData(message)}\n`);
  process.exit(1);
}

function input(name) {
  // The runner's rule: INPUT_ + name with spaces as _, upper-cased (hyphens stay).
  return (process.env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] || '').trim();
}

function booleanInput(name) {
  const value = input(name).toLowerCase();
  if (['true', 'on', '1'].includes(value)) return true;
  if (['', 'false', 'off', '0'].includes(value)) return false;
  return fail(`input ${name}: '${value}' is not true or false`);
}

function setOutput(name, value) {
  const file = process.env.GITHUB_OUTPUT;
  if (file) fs.appendFileSync(file, `${name}=${value}\n`);
}

function findGhbuild() {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'ghbuild');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch (err) {
      // not here
    }
  }
  return fail('ghbuild is not on PATH: run the setup action (.github/actions/setup) earlier in this job');
}

function command() {
  const image = input('image');
  const arch = input('arch');
  const kind = input('kind') || 'image';
  if (!image) fail('input image is required');
  if (!arch) fail('input arch is required');
  const args = [];
  if (kind === 'image') {
    args.push('build', '--image', image, '--arch', arch);
    if (booleanInput('push')) args.push('--push');
    if (input('target')) args.push('--target', input('target'));
    if (booleanInput('require-digest-base')) args.push('--require-digest-base');
    if (input('record')) args.push('--record', input('record'));
  } else if (kind === 'base') {
    args.push('ensure-base', '--image', image, '--arch', arch);
    if (booleanInput('lookup-only')) args.push('--lookup-only');
  } else {
    fail(`input kind: '${kind}' is not image or base`);
  }
  if (input('base-image')) args.push('--base-image', input('base-image'));
  if (input('config')) args.push('--config', input('config'));
  return args;
}

// Everything that lets a process talk to the runner's cache, artifact and OIDC services.
const SERVICE_VARS = [...RUNTIME_VARS, 'ACTIONS_CACHE_SERVICE_V2', 'ACTIONS_RUNTIME_URL',
  'ACTIONS_ID_TOKEN_REQUEST_TOKEN', 'ACTIONS_ID_TOKEN_REQUEST_URL'];

function childEnv(ghaCache) {
  const env = { ...process.env };
  if (!ghaCache) {
    for (const name of SERVICE_VARS) delete env[name];
  }
  return env;
}

function main() {
  const args = command();
  const exe = findGhbuild();
  const ghaCache = booleanInput('gha-cache');
  // The token, and the URL of either cache service (ghbuild tells which one the builder can speak).
  const missing = [];
  if (!process.env[TOKEN_VAR]) missing.push(TOKEN_VAR);
  if (!CACHE_URL_VARS.some((name) => process.env[name])) missing.push(CACHE_URL_VARS.join(' or '));
  if (!ghaCache) {
    // The plan says this run may not write the GitHub Actions cache: the token never reaches the build.
    console.log('ghbuild build-image: gha-cache is not true (the plan forbids GitHub Actions cache writes): ' +
                `${TOKEN_VAR} and the cache service URLs withheld from ghbuild`);
    setOutput('gha-cache', 'withheld');
  } else if (missing.length) {
    // ghbuild reports the skipped cache itself (a warning per skipped type=gha ref, in the summary too).
    console.log(`ghbuild build-image: ${missing.join(' and ')} not in this action's environment: ` +
                'a type=gha layer cache cannot be used in this run (ghbuild skips it and says so)');
    setOutput('gha-cache', 'unavailable');
  } else {
    const urls = CACHE_URL_VARS.filter((name) => process.env[name]);
    console.log(`ghbuild build-image: ${[TOKEN_VAR, ...urls].join(' and ')} handed to this ghbuild run only ` +
                '(type=gha layer cache available)');
    setOutput('gha-cache', 'available');
  }
  console.log(`ghbuild build-image: ${[exe, ...args].join(' ')}`);
  const child = spawn(exe, args, { stdio: 'inherit', env: childEnv(ghaCache) });
  // A cancelled job signals this process: pass it on, so ghbuild stops the build and cleans up.
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('error', (err) => fail(`cannot run ${exe}: ${err.message}`));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.stdout.write(`::error title=ghbuild build-image::${escapeData(`ghbuild ${args[0]} killed by ${signal}`)}\n`);
      process.exit(1);
    }
    process.exit(code === null ? 1 : code);
  });
}

main();
