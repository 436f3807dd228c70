package lifecycle

// Begin begins a term, as Run does first.
func (r *Reporter) Begin() { r.begin() }
