// Whether a string is an OCI image reference, by the grammar of the distribution project's
// `reference` package (what kubelet and containerd parse): [domain[:port]/]path[:tag][@digest].
// A typo here would otherwise ship in every injected Pod and fail only at image pull.
import { ConfigSyncError } from '../errors.ts';

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = new RegExp(
  `^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?$`,
);
const PATH = /^[a-z0-9]+(?:(?:[_.]|__|[-]+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[_.]|__|[-]+)[a-z0-9]+)*)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;

/** The longest name a registry accepts (the reference package's NameTotalLengthMax). */
const NAME_MAX = 255;

/**
 * Steps: (1) split off `@digest`, then `:tag` (a colon after the last slash); (2) the first
 * component is a registry only if it has a dot or a port, or is `localhost` (as docker and
 * containerd normalize names), else it is part of the lower-case path; (3) check each part.
 */
export function isImageReference(ref: string): boolean {
  // (1)
  const at = ref.indexOf('@');
  const digest = at >= 0 ? ref.slice(at + 1) : undefined;
  const named = at >= 0 ? ref.slice(0, at) : ref;
  const colon = named.lastIndexOf(':');
  const tagged = colon > named.lastIndexOf('/');
  const tag = tagged ? named.slice(colon + 1) : undefined;
  const name = tagged ? named.slice(0, colon) : named;
  // (2)
  const slash = name.indexOf('/');
  const first = slash >= 0 ? name.slice(0, slash) : '';
  const hasDomain = slash >= 0 && (/[.:]/.test(first) || first === 'localhost' || first.startsWith('['));
  const path = hasDomain ? name.slice(slash + 1) : name;
  // (3)
  return (
    name.length > 0 &&
    name.length <= NAME_MAX &&
    (!hasDomain || DOMAIN.test(first)) &&
    PATH.test(path) &&
    (tag === undefined || TAG.test(tag)) &&
    (digest === undefined || DIGEST.test(digest))
  );
}

/** The --image of `command`, refused with a usage error when it is not a reference. */
export function checkImageReference(command: string, image: string): string {
  if (isImageReference(image)) return image;
  throw new ConfigSyncError('CS_USAGE_BAD_IMAGE', `${command}: --image ${image} is not an image reference`, {
    hint: 'give a reference such as registry.example/config-sync:0.1.0 or config-sync@sha256:<digest>',
    details: { image },
  });
}
