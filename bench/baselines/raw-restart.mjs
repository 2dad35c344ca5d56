// Baseline of measure 9 (restart mode): the least a restarter can do, in bare Node, as a process
// of its own like the agent. Reloader's job: list then watch one ConfigMap, and on each change
// patch one Deployment's pod template annotation (a merge patch, no precondition, no check of
// the files), over one keep-alive TLS pool as the agent's transport does. With `readFirst`, it
// first reads the ConfigMap again (a quorum GET), the one round trip issue 12 requires of the
// agent before it acts, and patches when the answer comes.
// Usage: RAW_RESTART='{"server","tls":{ca,cert,key},"headers","namespace","configMap","deployment","readFirst"}'
import https from 'node:https';

const { server, tls, headers, namespace, configMap, deployment, readFirst } = JSON.parse(
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
const selector = `fieldSelector=${encodeURIComponent(`metadata.name=${configMap}`)}`;
send('GET', `${collection}?${selector}`, undefined, undefined, (res) => {
  let text = '';
  res.on('data', (chunk) => {
    text += chunk;
  });
  res.on('end', () => {
    const version = JSON.parse(text).metadata.resourceVersion;
    send(
      'GET',
      `${collection}?${selector}&watch=1&resourceVersion=${version}`,
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
            const patch = {
              spec: {
                template: {
                  metadata: {
                    annotations: { 'config-sync.io/config-hash': event.object.metadata.resourceVersion },
                  },
                },
              },
            };
            const restart = () =>
              send(
                'PATCH',
                `/apis/apps/v1/namespaces/${namespace}/deployments/${deployment}`,
                patch,
                'application/merge-patch+json',
                (res) => res.resume(),
              );
            if (!readFirst) restart();
            else
              send('GET', `${collection}/${configMap}`, undefined, undefined, (res) => {
                res.resume();
                res.on('end', restart);
              });
          }
        });
      },
    );
  });
});
