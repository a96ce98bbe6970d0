package runsc

// Exported for the external tests.
var (
	PseudoVersionTime = pseudoVersionTime
)

// StopGuard stops id's memory guard, as a hutchd that exits does.
func (r *Runtime) StopGuard(id string) { r.stopGuard(id) }
