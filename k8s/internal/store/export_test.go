package store

import "time"

// SetWrittenTTL sets how long s serves a written workload the watch has not confirmed.
func SetWrittenTTL(s *Store, ttl time.Duration) { s.written.ttl = ttl }
