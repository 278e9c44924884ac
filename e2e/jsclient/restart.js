'use strict';
// Watches eureka-js-client's local registry while the heureka cluster
// restarts, for the e2e test ../restart_clients_test.go:
//
//   node restart.js --urls http://127.0.0.1:P1,... --apps A,B --want N --duration-ms D
//
// Two fetch-only EurekaClients (one fetching full registries, one deltas),
// each given every node as service URL (a different one first), fetch every
// 100 ms. Every 20 ms the script counts the instances of --apps in each
// client's local registry. It prints the line "ready" once every client
// holds N, and after D ms one JSON line: the smallest count each client held
// after it was ready. It always exits by itself.

const { Eureka } = require('eureka-js-client');

function parseArgs(argv) {
  const out = { urls: [], apps: [], want: 0, durationMs: 30000 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--urls') { out.urls = v.split(',').filter(Boolean); i++; }
    else if (a === '--apps') { out.apps = v.split(',').filter(Boolean); i++; }
    else if (a === '--want') { out.want = Number(v); i++; }
    else if (a === '--duration-ms') { out.durationMs = Number(v); i++; }
    else throw new Error('unknown argument ' + a);
  }
  if (out.urls.length === 0 || out.apps.length === 0 || !out.want) throw new Error('--urls, --apps and --want are required');
  return out;
}

const args = parseArgs(process.argv);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

const clients = [false, true].map((delta, i) => {
  const urls = args.urls.slice(i % args.urls.length).concat(args.urls.slice(0, i % args.urls.length));
  const client = new Eureka({
    instance: {},
    shouldUseDelta: delta,
    logger: quiet,
    cwd: __dirname, // no eureka-client.yml here
    eureka: {
      serviceUrls: { default: urls.map((u) => u + '/eureka/apps/') },
      registerWithEureka: false,
      fetchRegistry: true,
      registryFetchInterval: 100,
      maxRetries: 3,
      requestRetryDelay: 100,
    },
  });
  return { delta, client, ready: false, min: Infinity, last: 0, samples: 0 };
});

function count(c) {
  let n = 0;
  for (const app of args.apps) n += (c.client.getInstancesByAppId(app) || []).length;
  return n;
}

let announced = false;
const sampler = setInterval(() => {
  for (const c of clients) {
    const n = count(c);
    c.last = n;
    if (!c.ready && n >= args.want) c.ready = true;
    if (c.ready) {
      c.samples++;
      c.min = Math.min(c.min, n);
    }
  }
  if (!announced && clients.every((c) => c.ready)) {
    announced = true;
    process.stdout.write('ready\n');
  }
}, 20);

setTimeout(() => {
  clearInterval(sampler);
  const out = clients.map((c) => ({ delta: c.delta, ready: c.ready, min: c.ready ? c.min : -1, last: c.last, samples: c.samples }));
  process.stdout.write(JSON.stringify({ ok: clients.every((c) => c.ready && c.min >= args.want), clients: out }) + '\n');
  process.exit(0);
}, args.durationMs).unref();

for (const c of clients) c.client.start(() => {});
