package routes

// ReplaceAll is the registrar's replaceAll, for the benchmark.
func ReplaceAll(r *Registrar) { r.replaceAll() }
