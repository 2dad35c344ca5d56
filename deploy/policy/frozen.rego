# Never restart a workload labelled config-sync.io/frozen (any value but "false"): a team freezes
# a workload during an incident or a release, and config-sync only alerts.
package configsync.restart

deny contains msg if {
	value := input.workload.labels["config-sync.io/frozen"]
	value != "false"
	msg := sprintf("%s %s is frozen (label config-sync.io/frozen=%s)", [input.workload.kind, input.workload.name, value])
}
