package cli

// LogReleased is logReleased, for the specs of what a partial release logs.
var LogReleased = logReleased
