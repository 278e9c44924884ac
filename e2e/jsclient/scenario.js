'use strict';
// Drives eureka-js-client against a heureka cluster for the e2e test
// (../jsclient_test.go):
//
//   node scenario.js --urls http://127.0.0.1:P1,http://127.0.0.1:P2,... [--timeout-ms 40000]
//
// A URL may carry credentials (http://user:pass@127.0.0.1:P1): the clients
// then send basic auth (through eureka.serviceUrls).
//
// Starts 3 ALPHA and 2 BETA instances, each its own EurekaClient pointed at a
// different node (round robin over --urls), some fetching deltas and some
// full registries every 500 ms. Waits until every client sees all five
// instances by app id and by VIP (through its own fetches), then stops one
// ALPHA instance (deregister) and waits until every other client no longer
// sees it. Prints one JSON line with the result and exits 0 on success, 1 on
// failure or timeout; it always exits by itself.

const { Eureka } = require('eureka-js-client');

function parseArgs(argv) {
  const out = { urls: [], timeoutMs: 40000, servicePath: '/eureka/apps/' };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--urls') { out.urls = v.split(',').filter(Boolean); i++; }
    else if (a === '--timeout-ms') { out.timeoutMs = Number(v); i++; }
    else if (a === '--service-path') { out.servicePath = v; i++; }
    else throw new Error('unknown argument ' + a);
  }
  if (out.urls.length === 0) throw new Error('--urls is required');
  return out;
}

const args = parseArgs(process.argv);
const started = Date.now();
const result = { ok: false, phase: 'start', clients: [], anomalies: [], errors: [] };

function finish(ok, error) {
  result.ok = ok;
  if (error) result.errors.push(String(error && error.stack || error));
  result.elapsedMs = Date.now() - started;
  result.clients = clients.map(describe);
  process.stdout.write(JSON.stringify(result) + '\n');
  // Timers (heartbeats, fetches) would keep node alive: exit explicitly.
  process.exit(ok ? 0 : 1);
}

const overall = setTimeout(() => finish(false, 'timeout in phase ' + result.phase + ' after ' + args.timeoutMs + ' ms'), args.timeoutMs);
overall.unref();

// A logger that keeps warnings and errors (minus the expected "no instances
// yet" chatter) for the result, per client.
function makeLogger(name, sink) {
  const keep = (level) => (...msg) => {
    const text = msg.map((m) => (m instanceof Error ? m.message : typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
    if (/^Unable to retrieve/.test(text)) return;
    if (sink.length < 20) sink.push(level + ': ' + text);
  };
  return { debug() {}, info() {}, warn: keep('warn'), error: keep('error') };
}

// Instances: identity in eureka-js-client is hostName + port.$, so each has
// its own host. Their bodies vary the way real js-client configs do.
const specs = [
  { app: 'jsalpha', host: 'alpha-1.js.test', port: { $: 8081, '@enabled': true }, instanceId: 'alpha-1', delta: true },
  { app: 'jsalpha', host: 'alpha-2.js.test', port: { $: 8082, '@enabled': 'true' }, delta: false }, // id = hostName
  { app: 'jsalpha', host: 'alpha-3.js.test', port: 8083, instanceId: 'alpha-3', delta: true, bareDataCenter: true }, // bare-number port, no @class
  { app: 'jsbeta', host: 'beta-1.js.test', port: { $: 9091, '@enabled': 'true' }, instanceId: 'beta-1', delta: false },
  { app: 'jsbeta', host: 'beta-2.js.test', port: { $: 9092, '@enabled': true }, instanceId: 'beta-2', delta: true },
];
const STOP_HOST = 'alpha-2.js.test'; // the instance that deregisters (its id is its hostName)
const VIPS = { jsalpha: 'jsalpha.vip', jsbeta: 'jsbeta.vip' };
const SHARED_VIP = 'js-all';

const clients = specs.map((spec, i) => {
  const url = new URL(args.urls[i % args.urls.length]);
  const logs = [];
  const instance = {
    app: spec.app,
    hostName: spec.host,
    ipAddr: '10.40.0.' + (i + 1),
    port: spec.port,
    vipAddress: VIPS[spec.app] + ',' + SHARED_VIP,
    statusPageUrl: 'http://' + spec.host + '/info',
    dataCenterInfo: spec.bareDataCenter
      ? { name: 'MyOwn' }
      : { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
    metadata: { zone: 'zone-' + (i % 2), weight: i + 1 }, // a number: js users send them
  };
  if (spec.instanceId) instance.instanceId = spec.instanceId;
  const client = new Eureka({
    instance,
    shouldUseDelta: spec.delta,
    logger: makeLogger(spec.host, logs),
    cwd: __dirname, // no eureka-client.yml here
    eureka: {
      host: url.hostname,
      port: Number(url.port),
      servicePath: args.servicePath,
      registryFetchInterval: 500,
      heartbeatInterval: 1000,
      maxRetries: 3,
      requestRetryDelay: 200,
      // Credentials in a --urls entry (http://user:pass@host:port) go into
      // a service URL, the way users configure basic auth for this client.
      ...(url.username
        ? { serviceUrls: { default: [url.protocol + '//' + url.username + ':' + url.password + '@' + url.host + args.servicePath] } }
        : {}),
    },
  });
  const c = { spec, client, node: url.host, logs, fullFetches: 0, deltaFetches: 0, learnedViaDelta: new Set(), stopped: false };
  // Count fetches, and which instances first appeared through a delta.
  const origFull = client.fetchFullRegistry.bind(client);
  client.fetchFullRegistry = (cb) => origFull((err) => { if (!err) c.fullFetches++; if (cb) cb(err); });
  const origHandle = client.handleDelta.bind(client);
  client.handleDelta = (cache, apps) => {
    const before = new Set(hosts(cache.vip[SHARED_VIP]));
    origHandle(cache, apps);
    c.deltaFetches++;
    for (const h of hosts(cache.vip[SHARED_VIP])) if (!before.has(h)) c.learnedViaDelta.add(h);
  };
  return c;
});

function hosts(list) {
  return (list || []).map((inst) => inst.hostName).sort();
}

function describe(c) {
  const k = c.client;
  return {
    host: c.spec.host,
    node: c.node,
    delta: c.spec.delta,
    stopped: c.stopped,
    fullFetches: c.fullFetches,
    deltaFetches: c.deltaFetches,
    learnedViaDelta: [...c.learnedViaDelta].sort(),
    byApp: { jsalpha: hosts(k.getInstancesByAppId('jsalpha')), jsbeta: hosts(k.getInstancesByAppId('jsbeta')) },
    byVip: {
      [VIPS.jsalpha]: hosts(k.getInstancesByVipAddress(VIPS.jsalpha)),
      [VIPS.jsbeta]: hosts(k.getInstancesByVipAddress(VIPS.jsbeta)),
      [SHARED_VIP]: hosts(k.getInstancesByVipAddress(SHARED_VIP)),
    },
    logs: c.logs,
  };
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// sees reports whether client c's cache holds exactly the expected hosts,
// by app id and by VIP.
function sees(c, alpha, beta) {
  const k = c.client;
  return same(hosts(k.getInstancesByAppId('jsalpha')), alpha)
    && same(hosts(k.getInstancesByAppId('jsbeta')), beta)
    && same(hosts(k.getInstancesByVipAddress(VIPS.jsalpha)), alpha)
    && same(hosts(k.getInstancesByVipAddress(VIPS.jsbeta)), beta)
    && same(hosts(k.getInstancesByVipAddress(SHARED_VIP)), [...alpha, ...beta].sort());
}

// waitUntil polls cond every 100 ms until it holds.
function waitUntil(phase, cond) {
  result.phase = phase;
  return new Promise((resolve) => {
    const t0 = Date.now();
    const tick = () => {
      if (cond()) { result[phase + 'Ms'] = Date.now() - t0; resolve(); return; }
      setTimeout(tick, 100);
    };
    tick();
  });
}

function start(c) {
  return new Promise((resolve, reject) => c.client.start((err) => (err ? reject(new Error(c.spec.host + ': start: ' + (err.message || err))) : resolve())));
}

function stop(c) {
  return new Promise((resolve, reject) => c.client.stop((err) => (err ? reject(new Error(c.spec.host + ': stop: ' + (err.message || err))) : resolve())));
}

async function main() {
  const alpha = specs.filter((s) => s.app === 'jsalpha').map((s) => s.host).sort();
  const beta = specs.filter((s) => s.app === 'jsbeta').map((s) => s.host).sort();

  // Start one after the other: each start registers (204 required) and does
  // its first full fetch before the next instance exists, so the early
  // clients learn about the later ones only through their own later fetches
  // (deltas for the delta clients).
  result.phase = 'start';
  for (const c of clients) await start(c);

  // Every delta client must also have applied at least one delta of its own.
  await waitUntil('allVisible', () => clients.every((c) => sees(c, alpha, beta) && (!c.spec.delta || c.deltaFetches > 0)));
  for (const c of clients) {
    if (!c.spec.delta && c.deltaFetches !== 0) throw new Error(c.spec.host + ': full-fetch client applied a delta');
  }
  if (!clients.some((c) => c.spec.delta && c.learnedViaDelta.size > 0)) {
    throw new Error('no delta client learned of an instance through a delta');
  }

  // Deregister one instance; every other client must stop seeing it.
  const gone = clients.find((c) => c.spec.host === STOP_HOST);
  result.phase = 'deregister';
  await stop(gone);
  gone.stopped = true;
  const alphaLeft = alpha.filter((h) => h !== STOP_HOST);
  const others = clients.filter((c) => c !== gone);
  // eureka-js-client 4.5.0's delta handling removes the wrong entry from its
  // by-app list (it splices index 0, docs/eureka-api.md, "Client traps"); it converges only over the
  // next fetches. Record what the by-app view shows meanwhile.
  const watch = setInterval(() => {
    for (const c of others) {
      const byApp = hosts(c.client.getInstancesByAppId('jsalpha'));
      const missing = alphaLeft.filter((h) => !byApp.includes(h));
      const note = c.spec.host + ' (delta=' + c.spec.delta + '): by-app view briefly lacked ' + missing.join(',');
      if (missing.length > 0 && !result.anomalies.includes(note) && result.anomalies.length < 10) result.anomalies.push(note);
    }
  }, 50);
  await waitUntil('removed', () => others.every((c) => sees(c, alphaLeft, beta)));
  clearInterval(watch);
  finish(true);
}

main().catch((err) => finish(false, err));
