// Baseline of measure 9 (restart mode): the least a restarter can do, in bare Node, as a process
// of its own like the agent, over one keep-alive TLS pool as the agent's transport does. It lists
// then watches one ConfigMap, and on each change patches one Deployment's pod template
// annotation. `reads` says what it reads first:
//  - 'none': nothing; a merge patch, no precondition, no check of the files (Reloader's job);
//  - 'source': the ConfigMap again (a quorum GET), the one round trip issue 12 requires of the
//    agent before it acts, then the same merge patch;
//  - 'agent': the requests the agent makes, with no decision between them: the ConfigMap, the
//    Deployment and the agent's Pod read at once, each answer parsed, then the agent's JSON
//    patch testing the template's annotations as read (src/heal/executor.ts). What is left of
//    the agent's time beyond this one's is its own work.
// Usage: RAW_RESTART='{"server","tls":{ca,cert,key},"headers","namespace","configMap","deployment","pod","reads"}'
import https from 'node:https';

const { server, tls, headers, namespace, configMap, deployment, pod, reads } = JSON.parse(
  process.env.RAW_RESTART,
);
const base = new URL(server);
const agent = new https.Agent({ keepAlive: true, ...tls });

function send(method, path, body, contentType, onResponse) {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const request = https.request(
    {
      hostname: base.hostname,
      port: base.port,
      path,
      method,
      agent,
      headers: {
        ...headers,
        accept: 'application/json',
        ...(payload ? { 'content-type': contentType, 'content-length': String(payload.length) } : {}),
      },
    },
    onResponse,
  );
  request.on('error', (error) => process.stderr.write(`raw-restart: ${method} ${path}: ${error.message}\n`));
  request.end(payload);
}

const collection = `/api/v1/namespaces/${namespace}/configmaps`;
const workloadPath = `/apis/apps/v1/namespaces/${namespace}/deployments/${deployment}`;

/** A GET whose whole answer goes to `then`. */
function get(at, then) {
  send('GET', at, undefined, undefined, (res) => {
    let text = '';
    res.on('data', (chunk) => {
      text += chunk;
    });
    res.on('end', () => then(text));
  });
}

function mergePatch(version) {
  const patch = {
    spec: { template: { metadata: { annotations: { 'config-sync.io/config-hash': version } } } },
  };
  send('PATCH', workloadPath, patch, 'application/merge-patch+json', (res) => res.resume());
}

/**
 * The agent's restart patch: a test of the template's annotations as read, then the three it
 * writes (restartedAt, the config hash, the restart history). The history keeps the restarts
 * of the last hour as the agent's does (src/heal/executor.ts, restartHistory): in the bench
 * every restart of the run, so the object grows as the agent's workload does.
 */
function testAndPatch(workload, version) {
  const at = '/spec/template/metadata/annotations';
  const asRead = workload.spec.template.metadata.annotations ?? null;
  const now = new Date();
  const hourAgo = now.getTime() - 3_600_000;
  const history = (asRead?.['config-sync.io/restarts'] ?? '')
    .split(/\s+/)
    .filter((t) => Date.parse(t) > hourAgo);
  const annotations = {
    'kubectl.kubernetes.io/restartedAt': now.toISOString(),
    'config-sync.io/config-hash': version,
    'config-sync.io/restarts': [...history, now.toISOString()].join(' '),
  };
  const writes =
    asRead === null
      ? [{ op: 'add', path: at, value: annotations }]
      : Object.entries(annotations).map(([key, value]) => ({
          op: 'add',
          path: `${at}/${key.replaceAll('/', '~1')}`,
          value,
        }));
  send(
    'PATCH',
    workloadPath,
    [{ op: 'test', path: at, value: asRead }, ...writes],
    'application/json-patch+json',
    (res) => res.resume(),
  );
}

const selector = `fieldSelector=${encodeURIComponent(`metadata.name=${configMap}`)}`;
get(`${collection}?${selector}`, (text) => {
  const listed = JSON.parse(text).metadata.resourceVersion;
  send(
    'GET',
    `${collection}?${selector}&watch=1&resourceVersion=${listed}`,
    undefined,
    undefined,
    (watch) => {
      process.stdout.write('watching\n');
      let buffered = '';
      watch.on('data', (chunk) => {
        buffered += chunk;
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const event = JSON.parse(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          if (event.type !== 'MODIFIED') continue;
          const version = event.object.metadata.resourceVersion;
          if (reads === 'none') mergePatch(version);
          else if (reads === 'source') get(`${collection}/${configMap}`, () => mergePatch(version));
          else {
            const paths = [
              `${collection}/${configMap}`,
              workloadPath,
              `/api/v1/namespaces/${namespace}/pods/${pod}`,
            ];
            const answers = [];
            for (const [i, at] of paths.entries())
              get(at, (answer) => {
                answers[i] = JSON.parse(answer);
                if (answers.filter(Boolean).length === paths.length) testAndPatch(answers[1], version);
              });
          }
        }
      });
    },
  );
});
