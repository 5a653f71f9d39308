// Producer: the Vercel AI SDK (`ai`) with its own OpenTelemetry spans (`experimental_telemetry`),
// the real `@ai-sdk/openai` Chat Completions model, against tests/producers/fake_openai.py.
//
// One scenario per run: `plain` (generateText) or `stream` (streamText), each the weather tool loop
// of common.py (system + user message, two parallel get_weather calls, their results, the final
// answer: two model calls, `stopWhen: stepCountIs(5)`). The spans go through the OTel SDK's real
// OTLP/HTTP exporters — protobuf (`@opentelemetry/exporter-trace-otlp-proto`) and JSON
// (`@opentelemetry/exporter-trace-otlp-http`) — to a receiver in this process, which writes the
// request bodies as sent: OUT/traces.pb and OUT/traces.json (one export request each).
//
// Usage: node run.mjs --base-url URL --scenario plain|stream --out DIR
// Prints one JSON line: {"versions": {...}, "node": "...", "requests": {...}}.

import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { createOpenAI } from '@ai-sdk/openai';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';

// The conversation of common.py, word for word.
const SYSTEM = 'You are a weather assistant. Call get_weather once per city, then answer briefly.';
const USER = "What's the weather in Paris and in Zürich right now?";
const RESULTS = {
  Paris: '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
  Zürich: '12 °C, light rain',
};
const PARAMETERS = {
  type: 'object',
  properties: {
    city: { type: 'string', description: 'City name' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city'],
  additionalProperties: false,
};
const REQUEST_MODEL = 'gpt-4o-mini';
const PACKAGES = [
  'ai',
  '@ai-sdk/openai',
  '@ai-sdk/provider',
  '@ai-sdk/provider-utils',
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/sdk-trace-node',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/otlp-transformer',
];

const here = dirname(fileURLToPath(import.meta.url));

function versions() {
  const out = {};
  for (const name of PACKAGES) {
    const pkg = JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8'));
    out[name] = pkg.version;
  }
  return out;
}

/** A local OTLP/HTTP receiver: keeps the body of every request, by path and content type. */
function receiver() {
  const requests = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', c => chunks.push(c));
    req.on('end', () => {
      requests.push({
        path: req.url,
        contentType: req.headers['content-type'] ?? '',
        encoding: req.headers['content-encoding'] ?? '',
        body: Buffer.concat(chunks),
      });
      const json = (req.headers['content-type'] ?? '').includes('json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : '');
    });
  });
  return new Promise(resolve =>
    server.listen(0, '127.0.0.1', () => resolve({ server, requests, port: server.address().port })),
  );
}

async function main() {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      scenario: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const scenario = values.scenario;
  if (!['plain', 'stream'].includes(scenario) || !values['base-url'] || !values.out) {
    throw new Error('usage: node run.mjs --base-url URL --scenario plain|stream --out DIR');
  }
  const { server, requests, port } = await receiver();
  const endpoint = path => ({ url: `http://127.0.0.1:${port}${path}`, compression: 'none' });
  // One export request per exporter and scenario: nothing is sent before forceFlush.
  const batch = { maxExportBatchSize: 4096, maxQueueSize: 4096, scheduledDelayMillis: 600_000 };
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'lithify-producer-vercel-ai' }),
    spanProcessors: [
      new BatchSpanProcessor(new ProtoExporter(endpoint('/proto/v1/traces')), batch),
      new BatchSpanProcessor(new JsonExporter(endpoint('/json/v1/traces')), batch),
    ],
  });
  provider.register(); // the global tracer provider (the AI SDK's tracer) and async context

  const openai = createOpenAI({
    baseURL: values['base-url'],
    apiKey: 'sk-test-not-a-real-key-0000',
  });
  const options = {
    // The Chat Completions model (the provider's default is the Responses API).
    model: openai.chat(REQUEST_MODEL),
    system: SYSTEM,
    prompt: USER,
    tools: {
      get_weather: tool({
        description: 'Current weather for one city.',
        inputSchema: jsonSchema(PARAMETERS),
        execute: async ({ city }) => RESULTS[city],
      }),
    },
    stopWhen: stepCountIs(5),
    temperature: 0.2,
    maxOutputTokens: 256,
    seed: 7,
    maxRetries: 0,
    experimental_telemetry: {
      isEnabled: true,
      functionId: 'weather-agent',
      metadata: { sessionId: `weather-session-${scenario}` },
    },
  };
  let steps;
  if (scenario === 'plain') {
    const result = await generateText(options);
    steps = result.steps.length;
  } else {
    const result = streamText(options);
    await result.consumeStream();
    steps = (await result.steps).length;
  }
  await provider.forceFlush();
  await provider.shutdown();
  server.close();

  mkdirSync(values.out, { recursive: true });
  const by = path => requests.filter(r => r.path === path);
  const proto = by('/proto/v1/traces');
  const json = by('/json/v1/traces');
  if (proto.length !== 1 || json.length !== 1) {
    throw new Error(`expected one export request per encoding, got ${proto.length} + ${json.length}`);
  }
  writeFileSync(join(values.out, 'traces.pb'), proto[0].body);
  // As sent; re-indented only, so the file reads like the Python producers' traces.json.
  const doc = JSON.parse(json[0].body.toString('utf8'));
  writeFileSync(join(values.out, 'traces.json'), `${JSON.stringify(doc, null, 2)}\n`);
  process.stdout.write(
    `${JSON.stringify({
      versions: versions(),
      node: process.versions.node,
      steps,
      requests: Object.fromEntries(
        [...proto, ...json].map(r => [r.path, { contentType: r.contentType, bytes: r.body.length }]),
      ),
    })}\n`,
  );
}

main().catch(error => {
  console.error(error);
  process.exit(1);
});
