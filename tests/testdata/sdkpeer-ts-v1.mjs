// The SDK matrix's TypeScript SDK v1 server (@modelcontextprotocol/sdk), on
// stdio: legacy sessions only (it answers server/discover -32601). The same
// tools as tests/sdkpeer and sdkpeer-ts.mjs (sample, elicit, roots, progress,
// log, touch) and resource, each answering with what it got, and task: a tool
// that runs as a 2025-11-25 task (the SDK's experimental tasks, with its
// in-memory task store).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const server = new McpServer({ name: 'sdkpeer-ts-v1', version: '1.0.0' }, {
  capabilities: { logging: {}, resources: { subscribe: true }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  taskStore: new InMemoryTaskStore(),
});
server.registerResource('note', 'peer://note', {}, async () => ({ contents: [{ uri: 'peer://note', text: 'a note' }] }));
server.server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
server.server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const failed = (what, e) => text(what + ' failed: ' + (e && e.message ? e.message : String(e)));
server.registerTool('touch', { description: 'Says peer://note was updated.' }, async () => {
  await server.server.sendResourceUpdated({ uri: 'peer://note' });
  return text('touched');
});
server.registerTool('sample', { description: 'Asks the client model.' }, async () => {
  try {
    const res = await server.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'say hi' } }], maxTokens: 10 });
    return text('sampled: ' + (res.content && res.content.text));
  } catch (e) { return failed('sampling', e); }
});
server.registerTool('elicit', { description: 'Asks the user for a name.' }, async () => {
  try {
    const res = await server.server.elicitInput({ mode: 'form', message: 'your name?',
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
server.registerTool('progress', { description: 'Reports three steps.' }, async (extra) => {
  const token = extra._meta && extra._meta.progressToken;
  if (token === undefined) return text('no progress token');
  for (let i = 1; i <= 3; i++) {
    await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: 3 } });
  }
  return text('progress sent');
});
server.registerTool('log', { description: 'Logs at info and warning.' }, async (extra) => {
  for (const level of ['info', 'warning']) await server.sendLoggingMessage({ level, logger: 'sdkpeer', data: 'a ' + level }, extra.sessionId);
  return text('logged');
});

server.experimental.tasks.registerToolTask('task', { description: 'Runs as a task.' }, {
  createTask: async (extra) => {
    const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: 50 });
    setTimeout(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', text('task done')), 50);
    return { task };
  },
  getTask: async (extra) => extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (extra) => extra.taskStore.getTaskResult(extra.taskId),
});

await server.connect(new StdioServerTransport());
