// Writes the hash of the extension's sources beside its build (source.sha256), so a test
// without node (tests/project/test_labextension.py) can tell a build older than its sources.
// The hash: SHA-256 over each source file, in sorted order, as its path, a NUL, its bytes and
// a NUL; the sources are package.json, package-lock.json, src/*.js and style/*.css.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', here)));
const sources = [
  'package.json',
  'package-lock.json',
  ...readdirSync(new URL('src/', here)).filter((f) => f.endsWith('.js')).map((f) => `src/${f}`),
  ...readdirSync(new URL('style/', here)).filter((f) => f.endsWith('.css')).map((f) => `style/${f}`),
].sort();
const hash = createHash('sha256');
for (const path of sources) {
  hash.update(path);
  hash.update('\0');
  hash.update(readFileSync(new URL(path, here)));
  hash.update('\0');
}
const out = new URL(`${pkg.jupyterlab.outputDir}/source.sha256`, here);
writeFileSync(out, `${hash.digest('hex')}\n`);
console.log(`source hash written to ${out.pathname}`);
