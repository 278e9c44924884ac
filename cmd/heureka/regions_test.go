package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The remote-region flags: repeatable, from the environment when not
// given, checked, and handed to the HTTP API and the syncer.
func TestParseServe_RemoteRegions(t *testing.T) {
	c, _, err := parseServe([]string{"--remote-region", "West=http://w1:8761/eureka/,http://w2:8761/eureka",
		"--remote-region", "legacy=http://e1:8761/eureka/", "--remote-region-whitelist", "legacy=orders, payments",
		"--remote-region-whitelist", "global=", "--remote-region-no-fallback", "--remote-region-fetch-interval", "5s"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := c.regions
	if len(r.parsed) != 2 || r.parsed[0].Name != "west" || !slices.Equal(r.parsed[0].URLs, []string{"http://w1:8761/eureka/", "http://w2:8761/eureka/"}) {
		t.Fatalf("regions %+v", r.parsed)
	}
	hc := c.httpConfig().Regions
	global, hasGlobal := hc.Whitelist["global"]
	if !slices.Equal(hc.Names, []string{"west", "legacy"}) || !hc.NoFallback ||
		!slices.Equal(hc.Whitelist["legacy"], []string{"ORDERS", "PAYMENTS"}) || !hasGlobal || len(global) != 0 {
		t.Fatalf("read config %+v", hc)
	}
	if r.fetchInterval != 5*time.Second {
		t.Fatalf("fetch interval %v", r.fetchInterval)
	}

	env := map[string]string{"HEUREKA_REMOTE_REGIONS": "west=http://w1:8761/eureka/;legacy=http://e1:8761/eureka/"}
	c, _, err = parseServe(nil, func(k string) string { return env[k] })
	if err != nil || len(c.regions.parsed) != 2 {
		t.Fatalf("from the environment: %+v %v", c.regions.parsed, err)
	}
	c, _, err = parseServe([]string{"--remote-region", "east=http://x:1/eureka/"}, func(k string) string { return env[k] })
	if err != nil || len(c.regions.parsed) != 1 || c.regions.parsed[0].Name != "east" {
		t.Fatalf("a flag beats the environment: %+v %v", c.regions.parsed, err)
	}

	for _, bad := range [][]string{
		{"--remote-region", "west"},
		{"--remote-region", "west=ftp://w/"},
		{"--remote-region", "w=http://a/", "--remote-region", "W=http://b/"},
		{"--remote-region-whitelist", "west=ORDERS"},
		{"--remote-region", "w=http://a/", "--remote-region-whitelist", "=ORDERS"},
		{"--remote-region", "w=http://a/", "--remote-region-fetch-interval", "10ms"},
	} {
		if _, _, err := parseServe(bad, noEnv); err == nil || !strings.Contains(err.Error(), "remote-region") {
			t.Errorf("%q: %v, want a remote-region error", bad, err)
		}
	}
}
