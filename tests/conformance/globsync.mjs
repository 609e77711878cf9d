// Supplies fs.globSync to the MCP conformance suite on Node 20.
//
// Why: @modelcontextprotocol/conformance imports globSync from "fs", which Node
// added in 22, so on Node 20 its CLI dies at import time, before running anything.
// The CLI only ever globs "**/<file name>" (to collect checks.json files), so this
// hook hands that one package an "fs" that is node:fs plus a globSync doing just that.
// Every other module, and every Node that has fs.globSync, is left alone.
//
// Use: node --import ./conformance/globsync.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js ...
import * as fs from 'node:fs';
import { register } from 'node:module';
import { basename } from 'node:path';
import { isMainThread } from 'node:worker_threads';

const shimURL = 'nexus-globsync:fs';

// The suite's releases this hook serves: 0.1.16 under its own name, and
// 0.2.0-alpha.12 under the alias conformance-next (tests/package.json).
const suites = ['/node_modules/@modelcontextprotocol/conformance/', '/node_modules/conformance-next/'];

// Loaded by --import (main thread): register this same file as the loader hooks,
// which Node runs again in its hooks thread, where isMainThread is false.
if (isMainThread && typeof fs.globSync !== 'function') {
  register(import.meta.url);
}

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') &&
      suites.some((dir) => context.parentURL?.includes(dir))) {
    return { url: shimURL, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url === shimURL) {
    const source = `export * from 'node:fs';
export { default } from 'node:fs';
export { globSync } from ${JSON.stringify(import.meta.url)};`;
    return { format: 'module', source, shortCircuit: true };
  }
  return next(url, context);
}

// globSync matches "**/<name>" only: the paths under options.cwd, relative to it,
// whose last element is name. Any other pattern throws rather than guess.
export function globSync(pattern, options = {}) {
  const name = pattern.startsWith('**/') ? pattern.slice(3) : '';
  if (name === '' || /[*?[\]{}/]/.test(name)) {
    throw new Error(`globsync.mjs supports only "**/<file name>", not ${JSON.stringify(pattern)}`);
  }
  const cwd = options.cwd ?? process.cwd();
  return fs.readdirSync(cwd, { recursive: true })
    .map(String)
    .filter((p) => basename(p) === name);
}
