# At most `max_restarts_per_hour` restarts of a workload by config-sync in an hour: a config that
# keeps changing, or a restart that keeps not healing, must not turn into a restart loop.
# config-sync sends `restartsLastHour` for the workload it would restart. A namespace-wide limit
# needs the other workloads' counts: load them as data.configsync.namespace_restarts[<namespace>]
# (an OPA bundle, or a job that pushes them) and the second rule applies.
package configsync.restart

max_restarts_per_hour := 3

max_namespace_restarts_per_hour := 10

deny contains msg if {
	input.restartsLastHour >= max_restarts_per_hour
	msg := sprintf("%s %s was restarted %d times in the last hour (at most %d)", [input.workload.kind, input.workload.name, input.restartsLastHour, max_restarts_per_hour])
}

deny contains msg if {
	restarts := data.configsync.namespace_restarts[input.workload.namespace]
	restarts >= max_namespace_restarts_per_hour
	msg := sprintf("namespace %s saw %d restarts in the last hour (at most %d)", [input.workload.namespace, restarts, max_namespace_restarts_per_hour])
}
