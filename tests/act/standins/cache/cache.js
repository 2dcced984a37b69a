'use strict';
// actions/cache/restore and actions/cache/save stand-in: an exact-key store in $GHBUILD_ACT_CACHE, kept
// for the whole act session (as GitHub keeps a cache between runs). As on GitHub, an entry is found by its
// key AND its version: the sha256 of the `path` input lines as written (so `~/x` is one version wherever
// HOME is, and `/a/tmp/x` and `/b/tmp/x` are two), with the compression method and a salt
// (@actions/cache's getCacheVersion). `~` is expanded to the home folder, a relative path is taken from
// GITHUB_WORKSPACE. Entries are immutable: a save under an existing key and version does nothing. A path
// that does not exist at save time is left out, and none at all saves nothing, with a warning, not a
// failure (as actions/cache/save). No scopes, no restore-keys (the setup action uses neither).
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const input = (name) => (process.env[`INPUT_${name.toUpperCase()}`] || '').trim();

function resolve(p) {
  if (p === '~' || p.startsWith('~/')) return path.join(os.homedir(), p.slice(1));
  return path.resolve(process.env.GITHUB_WORKSPACE || process.cwd(), p);
}

// What tar does: folders merged, a file or symlink replaced (never written through), modes and times kept.
function copyTree(src, dst) {
  const st = fs.lstatSync(src);
  if (st.isDirectory()) {
    fs.mkdirSync(dst, { recursive: true });
    for (const name of fs.readdirSync(src)) copyTree(path.join(src, name), path.join(dst, name));
    return;
  }
  // Each file written aside and renamed into place: another job restoring the same entry at the same moment
  // (act runs a workflow's jobs side by side with one HOME) never sees it half-written.
  const tmp = `${dst}.cache-standin-${process.pid}`;
  fs.rmSync(tmp, { force: true });
  if (st.isSymbolicLink()) {
    fs.symlinkSync(fs.readlinkSync(src), tmp);
  } else {
    fs.copyFileSync(src, tmp);
    fs.chmodSync(tmp, st.mode & 0o7777);
    fs.utimesSync(tmp, st.atime, st.mtime);
  }
  fs.renameSync(tmp, dst);
}

exports.version = (paths) =>
  crypto.createHash('sha256').update([...paths, 'zstd-without-long', '1.0'].join('|')).digest('hex');

exports.run = (mode) => {
  const store = process.env.GHBUILD_ACT_CACHE;
  const key = input('key');
  const paths = input('path').split('\n').map((p) => p.trim()).filter(Boolean);
  if (!store || !key || !paths.length) {
    console.log(`::error::cache stand-in: GHBUILD_ACT_CACHE, key and path are required`);
    process.exit(1);
  }
  const version = exports.version(paths);
  const entry = path.join(store, `${key.replace(/[^\w.-]/g, '_')}-${version.slice(0, 16)}`);
  const output = (name, value) => fs.appendFileSync(process.env.GITHUB_OUTPUT, `${name}=${value}\n`);
  if (mode === 'restore') {
    let hit = fs.existsSync(path.join(entry, '.complete'));
    if (hit) {
      // Extracted over what is there (tar does not empty the folders first).
      try {
        paths.forEach((p, i) => {
          const saved = path.join(entry, String(i));
          if (fs.existsSync(saved)) {
            fs.mkdirSync(path.dirname(resolve(p)), { recursive: true });
            copyTree(saved, resolve(p));
          }
        });
      } catch (err) {
        // As actions/cache/restore: a failed restore is a warning and a miss, never a failed step.
        console.log(`::warning::cache stand-in: ${key} not restored: ${err.message}`);
        hit = false;
      }
    }
    console.log(`cache stand-in: ${hit ? 'restored' : 'no entry for'} ${key} (version ${version.slice(0, 16)})`);
    output('cache-hit', hit ? 'true' : 'false');
    output('cache-primary-key', key);
    output('cache-matched-key', hit ? key : '');
    return;
  }
  if (fs.existsSync(path.join(entry, '.complete'))) {
    console.log(`cache stand-in: ${key} (version ${version.slice(0, 16)}) exists already; not saved again`);
    return;
  }
  const present = paths.filter((p) => fs.existsSync(resolve(p)));
  if (!present.length) {
    console.log(`::warning::cache stand-in: none of ${paths.join(', ')} exists; nothing saved`);
    return;
  }
  const tmp = `${entry}.tmp-${process.pid}`;
  try {
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp, { recursive: true });
    paths.forEach((p, i) => {
      if (fs.existsSync(resolve(p))) {
        copyTree(resolve(p), path.join(tmp, String(i)));
      }
    });
    fs.writeFileSync(path.join(tmp, '.complete'), '');
    fs.renameSync(tmp, entry);
  } catch (err) {
    // A folder that changed under the copy: actions/cache/save warns and saves nothing.
    fs.rmSync(tmp, { recursive: true, force: true });
    console.log(`::warning::cache stand-in: ${key} not saved: ${err.message}`);
    return;
  }
  console.log(`cache stand-in: saved ${key} (version ${version.slice(0, 16)})`);
};
