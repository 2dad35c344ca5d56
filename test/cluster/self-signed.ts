// A self-signed certificate and its key, as the tests' TLS servers and foreign CAs need: EC
// P-256, valid one day, made with openssl (Node's crypto signs nothing X.509).
import { execFileSync } from 'node:child_process';

/**
 * Writes the certificate to `cert` and its key to `key`, for the common name `cn` and, when
 * given, the subjectAltName `san` (`DNS:<name>` or `IP:<address>`).
 */
export function selfSignedCertificate(files: { cert: string; key: string }, cn: string, san?: string): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${cn}`,
      ...(san ? ['-addext', `subjectAltName=${san}`] : []),
      '-keyout',
      files.key,
      '-out',
      files.cert,
    ],
    { stdio: 'ignore' },
  );
}
