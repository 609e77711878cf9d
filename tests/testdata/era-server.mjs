// A child for Nexus's era tests, on the TypeScript SDK v2 (@modelcontextprotocol/server).
//
//   node era-server.mjs dual|modern          serves stdio
//   node era-server.mjs http-dual|http-modern  serves streamable HTTP on 127.0.0.1 and
//                                            prints its URL as the first line on stdout
//
// dual serves both protocol eras, modern only 2026-07-28 (a legacy opening is
// refused with the versions it supports). The tool "echo" answers "ts:" and
// the text; over HTTP, "grow" adds the tool "grown" and says so to the open
// subscriptions/listen streams.
import http from 'node:http';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const kind = process.argv[2] ?? 'dual';
const modernOnly = kind.endsWith('modern');
let grown = false;
let handler;

const factory = () => {
  const server = new McpServer({ name: 'ts-era-' + kind, version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes text.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: 'ts:' + text }] }));
  server.registerTool('grow', { description: 'Adds the tool grown.' }, async () => {
    grown = true;
    handler?.notify.toolsChanged();
    return { content: [{ type: 'text', text: 'grew' }] };
  });
  if (grown) {
    server.registerTool('grown', { description: 'Grown.' }, async () => ({ content: [{ type: 'text', text: 'grown' }] }));
  }
  return server;
};

if (!kind.startsWith('http-')) {
  serveStdio(factory, { legacy: modernOnly ? 'reject' : 'serve' });
} else {
  handler = createMcpHandler(factory, { legacy: modernOnly ? 'reject' : 'stateless' });
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const request = new Request('http://' + req.headers.host + req.url, {
      method: req.method, headers: req.headers, body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body, signal: abort.signal,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return res.end();
    try {
      for await (const chunk of response.body) res.write(chunk);
    } catch {}
    res.end();
  });
  srv.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + srv.address().port + '/mcp'));
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}
