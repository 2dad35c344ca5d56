# The decision config-sync asks for before a restart (its --policy-url names this package:
# http://<opa>:8181/v1/data/configsync/restart). The input is the plan, with names, versions and
# keyed digests only (docs/configuration.md, "The policy gate"). Each example policy in this directory adds
# reasons to `deny`; the restart is allowed when none does.
package configsync.restart

default allow := false

allow if count(deny) == 0

default reason := "no policy refuses it"

reason := concat("; ", sort(deny)) if count(deny) > 0
