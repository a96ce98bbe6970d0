package runsc

// Exported for the external tests.
var (
	PseudoVersionTime = pseudoVersionTime
)
