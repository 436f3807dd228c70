package main

import (
	"fmt"
	"strings"
)

// urlList is the repeatable --cc-callback-url flag: each value is one URL or a comma-separated
// list of them. The first value given replaces the list the config file set; later ones add to
// it.
type urlList struct {
	urls *[]string
	set  bool
}

func (l *urlList) String() string {
	if l == nil || l.urls == nil {
		return ""
	}
	return strings.Join(*l.urls, ",")
}

// Set adds a flag's value.
func (l *urlList) Set(s string) error {
	if !l.set {
		*l.urls = nil
		l.set = true
	}
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			*l.urls = append(*l.urls, u)
		}
	}
	return nil
}

// validateCallbacks checks the cc section's callback settings; the URLs themselves are checked
// by cc.New at start-up (scheme, host, the plain-http rule).
func (c CCConfig) validateCallbacks() error {
	if c.MaxDeliveriesPerEndpoint < 1 {
		return fmt.Errorf("cc.max_deliveries_per_endpoint must be at least 1")
	}
	return nil
}
