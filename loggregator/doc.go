// Package loggregator is the sending side of opi's log and metrics pipeline: it builds
// Loggregator v2 envelopes as Diego's cells send them (app logs, container metrics), sends them
// over mutual TLS to a Loggregator v2 ingress with acknowledged delivery and bounded buffering
// (Sender), and bounds each instance's log rate (RateBound) with a notice in the instance's own
// stream saying how much was dropped.
//
// The Sender uses the module's generated v2 client (loggregator_v2.NewIngressClient(conn).Send):
// a Send that returns without error counts as delivered, so a caller can advance its read
// positions only past what Loggregator has. The module's batching IngressClient is not used: it
// drops a batch it failed to send without telling anyone.
package loggregator
