package e2e

import (
	"strings"
	"testing"
	"time"
)

// regionsSetup is the remote-regions layout of TestRemoteRegions and
// TestSpringRemoteRegions on 127.0.0.1: two heureka clusters, east and
// west, three nodes each, and a three-peer eureka-server ring, legacy.
// East copies west and legacy (--remote-region); its regions= reads merge
// them.
type regionsSetup struct {
	east, west *Cluster
	// legacyAddrs are the eureka-servers' host:port, legacyURLs their
	// service URLs (http://host:port/eureka/).
	legacyAddrs, legacyURLs []string
	legacy                  []*Proc
}

// regionsFetchInterval is east's --remote-region-fetch-interval:
// eureka-server's is 30 s, the tests do not wait that long.
const regionsFetchInterval = "2s"

// startRegions starts legacy, west and east (in that order, each waited
// for: the eureka-servers answer, the clusters have a leader). It ends the
// test (ToolOrSkip) when java or the eureka-server jar is missing; what
// names the test in that message.
func startRegions(t *testing.T, what string) *regionsSetup {
	t.Helper()
	skipShort(t)
	java, jar := eurekaServerTools(t, what)
	s := &regionsSetup{legacyAddrs: []string{FreeAddr(t), FreeAddr(t), FreeAddr(t)}}
	s.legacy = startEurekaRing(t, java, jar, s.legacyAddrs, nil)
	for _, a := range s.legacyAddrs {
		s.legacyURLs = append(s.legacyURLs, "http://"+a+"/eureka/")
	}
	s.west = StartCluster(t, 3, Options{})
	s.west.WaitLeader(t, 20*time.Second)
	s.east = StartCluster(t, 3, Options{ExtraArgs: []string{
		"--remote-region", "west=" + serviceURLs(s.west.Nodes),
		"--remote-region", "legacy=" + strings.Join(s.legacyURLs, ","),
		"--remote-region-fetch-interval", regionsFetchInterval,
	}})
	s.east.WaitLeader(t, 20*time.Second)
	return s
}

// legacyBase is the base URL (http://host:port, no /eureka) of the i-th
// eureka-server, for RegisterJSON and TryDo.
func (s *regionsSetup) legacyBase(i int) string { return "http://" + s.legacyAddrs[i] }
