// The SDK matrix's TypeScript clients (tests/sdkmatrix_test.go), driven by the
// Go test over this process's stdin and stdout.
//
//   node sdkclient-ts.mjs MODE URL             over streamable HTTP
//   node sdkclient-ts.mjs MODE -- CMD ARGS...  over stdio (starts CMD)
//
// MODE: v1 (@modelcontextprotocol/sdk's client, legacy only), v2
// (@modelcontextprotocol/client in its default mode, which is legacy) or
// v2-modern (pinned to 2026-07-28). The client answers sampling, elicitation
// and roots from its own handlers, and asks for logs at info: with
// logging/setLevel on a legacy connection, with _meta logLevel on each call
// on a 2026-07-28 one (which has no logging/setLevel).
//
// Once connected it prints {"ready":true,"era":...} (or {"error":...} and
// exits), then reads one JSON command a line and answers each with one line
// {"id":ID,"reply":TEXT}:
//
//   {"id":ID,"op":"call","name":TOOL,"progress":BOOL}  calls TOOL (with a progress token)
//   {"id":ID,"op":"subscribe","uri":URI}               resources/subscribe, or on a
//                                                      2026-07-28 connection a
//                                                      subscriptions/listen stream
//   {"id":ID,"op":"task","name":TOOL}                  v1 only: calls TOOL as a
//                                                      2025-11-25 task (the SDK's
//                                                      experimental callToolStream)
//                                                      and waits for its result; v2's
//                                                      client (2.4.0) has no tasks
//
// What arrives beside replies is a line of its own: {"event":"progress"},
// {"event":"log","level":L} or {"event":"updated"}. Progress is counted by a
// notification handler, with the token in _meta as the Go clients send it:
// the SDKs' onprogress callbacks drop a notification that reaches the client
// in the same read as the call's result (they dispatch notifications a
// microtask later, after the result has removed the callback).
import { createInterface } from 'node:readline';

const [mode, target, ...rest] = process.argv.slice(2);
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const message = (e) => String(e && e.message ? e.message : e);

const answers = {
  sampling: () => ({ role: 'assistant', content: { type: 'text', text: 'hi from the model' }, model: 'matrix' }),
  elicitation: () => ({ action: 'accept', content: { name: 'Ada' } }),
  roots: () => ({ roots: [{ uri: 'file:///matrix-root', name: 'matrix' }] }),
};
const info = { name: 'matrix', version: '1' };
const capabilities = { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } };
const stdio = target === '--' ? { command: rest[0], args: rest.slice(1), env: process.env, stderr: 'inherit' } : undefined;

// Each SDK's client behind one shape: its client and transport, era, call,
// subscribe and what to close.
async function v1() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const types = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client(info, { capabilities });
  client.setRequestHandler(types.CreateMessageRequestSchema, answers.sampling);
  client.setRequestHandler(types.ElicitRequestSchema, answers.elicitation);
  client.setRequestHandler(types.ListRootsRequestSchema, answers.roots);
  client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => print({ event: 'log', level: n.params.level }));
  client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, () => print({ event: 'updated' }));
  client.setNotificationHandler(types.ProgressNotificationSchema, () => print({ event: 'progress' }));
  let transport;
  if (stdio) {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    transport = new StdioClientTransport(stdio);
  } else {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    transport = new StreamableHTTPClientTransport(new URL(target));
  }
  await client.connect(transport);
  await client.setLoggingLevel('info').catch((e) => process.stderr.write('v1 client: logging/setLevel: ' + message(e) + '\n'));
  return {
    client,
    transport,
    era: 'legacy',
    call: (params) => client.callTool(params),
    subscribe: (uri) => client.subscribeResource({ uri }),
    // "task created; TEXT" when the server made a task, "no task; TEXT" when
    // it answered at once.
    task: async (params) => {
      let created = false;
      for await (const m of client.experimental.tasks.callToolStream(params, undefined, { task: { ttl: 60000 } })) {
        if (m.type === 'taskCreated') created = true;
        if (m.type === 'error') throw m.error;
        if (m.type === 'result') return (created ? 'task created; ' : 'no task; ') + (m.result.content || []).filter((x) => x.type === 'text').map((x) => x.text).join(' ');
      }
      throw new Error('the stream ended without a result');
    },
  };
}

async function v2(pinned) {
  const sdk = await import('@modelcontextprotocol/client');
  const client = new sdk.Client(info, {
    capabilities,
    versionNegotiation: pinned ? { mode: { pin: '2026-07-28' } } : undefined,
  });
  client.setRequestHandler('sampling/createMessage', answers.sampling);
  client.setRequestHandler('elicitation/create', answers.elicitation);
  client.setRequestHandler('roots/list', answers.roots);
  client.setNotificationHandler('notifications/message', (n) => print({ event: 'log', level: n.params.level }));
  client.setNotificationHandler('notifications/resources/updated', () => print({ event: 'updated' }));
  client.setNotificationHandler('notifications/progress', () => print({ event: 'progress' }));
  let transport;
  if (stdio) {
    const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
    transport = new StdioClientTransport(stdio);
  } else {
    transport = new sdk.StreamableHTTPClientTransport(new URL(target));
  }
  await client.connect(transport);
  const era = client.getProtocolEra();
  if (era !== 'modern') {
    await client.setLoggingLevel('info').catch((e) => process.stderr.write('v2 client: logging/setLevel: ' + message(e) + '\n'));
  }
  const listens = [];
  return {
    client,
    transport,
    era,
    call: (params) => client.callTool(era === 'modern' ? { ...params, _meta: { ...params._meta, [sdk.LOG_LEVEL_META_KEY]: 'info' } } : params),
    subscribe: async (uri) => {
      if (era !== 'modern') return client.subscribeResource({ uri });
      listens.push(await client.listen({ resourceSubscriptions: [uri] }));
    },
    close: () => Promise.all(listens.map((l) => l.close().catch(() => {}))),
  };
}

let c;
try {
  c = mode === 'v1' ? await v1() : mode === 'v2' ? await v2(false) : mode === 'v2-modern' ? await v2(true) : null;
  if (!c) throw new Error('usage: sdkclient-ts.mjs v1|v2|v2-modern URL | -- CMD ARGS... (not ' + mode + ')');
} catch (e) {
  print({ error: message(e) });
  process.exit(0);
}
print({ ready: true, era: c.era });

// Commands run one at a time, in order.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  queue = queue.then(async () => {
    const cmd = JSON.parse(line);
    try {
      if (cmd.op === 'subscribe') {
        await c.subscribe(cmd.uri);
        print({ id: cmd.id, reply: 'ok' });
        return;
      }
      const params = { name: cmd.name, arguments: {} };
      if (cmd.op === 'task') {
        if (!c.task) throw new Error('this client has no tasks');
        print({ id: cmd.id, reply: await c.task(params) });
        return;
      }
      if (cmd.progress) params._meta = { progressToken: 'matrix-progress' };
      const res = await c.call(params);
      print({ id: cmd.id, reply: (res.content || []).filter((x) => x.type === 'text').map((x) => x.text).join(' ') });
    } catch (e) {
      print({ id: cmd.id, reply: 'error: ' + message(e) });
    }
  });
});
// At the end of its input it leaves as the Go clients do: over HTTP it ends
// its session (DELETE) before it closes the connection.
lines.on('close', async () => {
  await queue;
  if (c.close) await c.close();
  if (!stdio) await c.transport.terminateSession().catch((e) => process.stderr.write('ending the session: ' + message(e) + '\n'));
  await c.client.close().catch(() => {});
  process.exit(0);
});
