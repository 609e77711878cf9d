// A client for Nexus's era tests, on the TypeScript SDK v2 (@modelcontextprotocol/client).
//
//   node era-client.mjs modern|legacy URL            over streamable HTTP
//   node era-client.mjs modern|legacy -- CMD ARGS... over stdio (starts CMD)
//
// modern pins protocol version 2026-07-28, legacy keeps the initialize handshake.
// It lists the tools, calls fx__echo, and calls fx__ask for a sampling, an
// elicitation and the roots, answering each from its own handlers, then prints
// one JSON line of what it saw.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [era, target, ...rest] = process.argv.slice(2);
const client = new Client({ name: 'ts-era-client', version: '1.0.0' }, {
  capabilities: { sampling: {}, elicitation: { form: {} }, roots: {} },
  versionNegotiation: { mode: era === 'modern' ? { pin: '2026-07-28' } : 'legacy' },
});
const asked = [];
client.setRequestHandler('sampling/createMessage', async () => {
  asked.push('sampling');
  return { role: 'assistant', content: { type: 'text', text: 'the model says hi' }, model: 'ts-model' };
});
client.setRequestHandler('elicitation/create', async () => {
  asked.push('elicitation');
  return { action: 'accept', content: { name: 'ann' } };
});
client.setRequestHandler('roots/list', async () => {
  asked.push('roots');
  return { roots: [{ uri: 'file:///ts-root', name: 'ts' }] };
});

const transport = target === '--'
  ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(target));
const out = {};
try {
  await client.connect(transport);
  out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name);
  const echo = await client.callTool({ name: 'fx__echo', arguments: { message: 'hello' } });
  out.echo = echo.content.map((c) => c.text).join('');
  for (const what of ['sampling', 'elicitation', 'roots']) {
    const r = await client.callTool({ name: 'fx__ask', arguments: { what } });
    out[what] = r.content.map((c) => c.text).join('');
  }
  out.asked = asked;
} catch (err) {
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
await client.close().catch(() => {});
process.exit(0);
