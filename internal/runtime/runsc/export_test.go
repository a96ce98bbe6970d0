package runsc

// Exported for the external tests.
var (
	PseudoVersionTime = pseudoVersionTime
)

// StopGuard stops id's memory guard, as a hutchd that exits does.
func (r *Runtime) StopGuard(id string) { r.stopGuard(id) }

// SetOnGuardKill sets Config.OnGuardKill of a runtime made by New; call it before Start.
func (r *Runtime) SetOnGuardKill(f func(GuardKill)) { r.onGuardKill = f }
