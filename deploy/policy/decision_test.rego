package configsync.restart_test

import data.configsync.restart

# A plan as config-sync sends it: Thursday noon UTC, nothing frozen, no restart yet this hour.
plan := {
	"workload": {"kind": "Deployment", "name": "web", "namespace": "shop", "labels": {"app": "web"}},
	"pod": {"name": "web-1", "namespace": "shop"},
	"reasons": [{"target": "app:/etc/app", "reason": "SubPathStale", "message": "stale"}],
	"sources": [{"kind": "ConfigMap", "name": "web-config", "resourceVersion": "41", "digest": "abcdef012345"}],
	"configHash": "cfg-1",
	"time": "2026-12-03T12:00:00Z",
	"restartsLastHour": 0,
}

test_allowed_when_nothing_refuses if {
	restart.allow with input as plan
	restart.reason == "no policy refuses it" with input as plan
}

test_frozen if {
	frozen := object.union(plan, {"workload": object.union(plan.workload, {"labels": {"config-sync.io/frozen": "true"}})})
	not restart.allow with input as frozen
	restart.reason == "Deployment web is frozen (label config-sync.io/frozen=true)" with input as frozen
}

test_frozen_false_is_not_frozen if {
	thawed := object.union(plan, {"workload": object.union(plan.workload, {"labels": {"config-sync.io/frozen": "false"}})})
	restart.allow with input as thawed
}

test_too_many_restarts if {
	busy := object.union(plan, {"restartsLastHour": 3})
	not restart.allow with input as busy
	restart.reason == "Deployment web was restarted 3 times in the last hour (at most 3)" with input as busy
}

test_namespace_limit_from_data if {
	not restart.allow with input as plan with data.configsync.namespace_restarts as {"shop": 10}
	restart.allow with input as plan with data.configsync.namespace_restarts as {"other": 10}
}

test_outside_the_window if {
	night := object.union(plan, {"time": "2026-12-03T21:30:00Z"})
	not restart.allow with input as night
	restart.reason == "2026-12-03T21:30:00Z is outside the restart window (Mon-Fri 06:00-20:00 UTC)" with input as night
	saturday := object.union(plan, {"time": "2026-12-05T12:00:00Z"})
	not restart.allow with input as saturday
}

test_every_reason_is_given if {
	worst := object.union(plan, {"time": "2026-12-05T12:00:00Z", "restartsLastHour": 5})
	count(restart.deny) == 2 with input as worst
}
