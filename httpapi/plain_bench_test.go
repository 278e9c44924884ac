package httpapi

import "testing"

// BenchmarkServeCachedPlainStreamed is BenchmarkServeCachedPlain with no
// plain copy kept (cache.Config.PlainBudget 0): every read inflates the
// document's pieces as it writes them, the cost of a document larger than
// the budget.
func BenchmarkServeCachedPlainStreamed(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Cache.PlainBudget = 0
	benchLoopback(b, benchServerConfig(b, 10000, 500, cfg), false)
}

// BenchmarkServeFullRegistryPlain measures the handler alone (no socket)
// serving the full registry of 10,000 instances without gzip, from the
// kept copy and inflated per read.
func BenchmarkServeFullRegistryPlain(b *testing.B) {
	for _, tc := range []struct {
		name   string
		budget int
	}{{"kept", DefaultConfig().Cache.PlainBudget}, {"streamed", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Cache.PlainBudget = tc.budget
			benchHandler(b, benchServerConfig(b, 10000, 500, cfg).Handler(), "/eureka/apps", false)
		})
	}
}
