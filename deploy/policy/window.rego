# Restart only inside a window: Monday to Friday, 06:00 to 20:00 UTC. (The agent's own
# --restart-window does the same without OPA; a policy here can differ per namespace or team.)
package configsync.restart

restart_days := {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"}

restart_hours := [6, 20]

in_window if {
	t := time.parse_rfc3339_ns(input.time)
	time.weekday(t) in restart_days
	[hour, _, _] := time.clock(t)
	hour >= restart_hours[0]
	hour < restart_hours[1]
}

deny contains msg if {
	not in_window
	msg := sprintf("%s is outside the restart window (Mon-Fri %02d:00-%02d:00 UTC)", [input.time, restart_hours[0], restart_hours[1]])
}
