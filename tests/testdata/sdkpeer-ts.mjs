// The SDK matrix's TypeScript SDK v2 server (@modelcontextprotocol/server), on
// stdio, serving both protocol eras: the same tools as tests/sdkpeer (sample,
// elicit, roots, progress, log, touch) and resource, each answering with what it got.
// No task tool: the SDK 2.4.0 has the task types but no tasks for a server to
// run (no task store, no task tools).
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const factory = () => {
  const server = new McpServer({ name: 'sdkpeer-ts', version: '1.0.0' }, { capabilities: { logging: {}, resources: { subscribe: true } } });
  server.registerResource('note', 'peer://note', {}, async () => ({ contents: [{ uri: 'peer://note', text: 'a note' }] }));
  try {
    server.server.setRequestHandler('resources/subscribe', async () => ({}));
    server.server.setRequestHandler('resources/unsubscribe', async () => ({}));
  } catch {}
  server.registerTool('touch', { description: 'Says peer://note was updated.' }, async () => {
    await server.server.sendResourceUpdated({ uri: 'peer://note' });
    return { content: [{ type: 'text', text: 'touched' }] };
  });
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  const failed = (what, e) => text(what + ' failed: ' + (e && e.message ? e.message : String(e)));
  server.registerTool('sample', { description: 'Asks the client model.' }, async (ctx) => {
    try {
      const res = await ctx.mcpReq.requestSampling({ messages: [{ role: 'user', content: { type: 'text', text: 'say hi' } }], maxTokens: 10 });
      return text('sampled: ' + (res.content && res.content.text));
    } catch (e) { return failed('sampling', e); }
  });
  server.registerTool('elicit', { description: 'Asks the user for a name.' }, async (ctx) => {
    try {
      const res = await ctx.mcpReq.elicitInput({ mode: 'form', message: 'your name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } });
      return text('elicited: ' + res.action + ' map[name:' + (res.content && res.content.name) + ']');
    } catch (e) { return failed('elicitation', e); }
  });
  server.registerTool('roots', { description: 'Asks the client roots.' }, async () => {
    try {
      const res = await server.server.listRoots();
      return text('roots: ' + res.roots.map((r) => r.uri).join(','));
    } catch (e) { return failed('roots', e); }
  });
  server.registerTool('progress', { description: 'Reports three steps.' }, async (ctx) => {
    const token = ctx.mcpReq._meta && ctx.mcpReq._meta.progressToken;
    if (token === undefined) return text('no progress token');
    for (let i = 1; i <= 3; i++) {
      await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: 3 } });
    }
    return text('progress sent');
  });
  server.registerTool('log', { description: 'Logs at info and warning.' }, async (ctx) => {
    for (const level of ['info', 'warning']) await ctx.mcpReq.log(level, 'a ' + level, 'sdkpeer');
    return text('logged');
  });
  return server;
};

serveStdio(factory, { legacy: 'serve' });
