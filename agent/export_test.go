package agent

// HeldPods are the objects the namespace's pod informer holds (for the specs).
func HeldPods(a *Agent) []any { return a.factory.Core().V1().Pods().Informer().GetStore().List() }
