package launch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// EurekaServer is how to run one peer of the reference eureka-server (the
// Spring Cloud jar built from e2e/eurekaserver) that the system tests and
// `heureka bench` set beside heureka.
type EurekaServer struct {
	// Jar is the eureka-server jar, JVMArgs the java options before -jar
	// (heap, collector); Argv is what java runs with.
	Jar     string
	JVMArgs []string
	// Host and Port are where it listens. eureka-server tells itself from
	// its peers by host name, so peers on one machine need a loopback
	// address each (127.0.0.1, 127.0.0.2, ...) and Named set.
	Host string
	Port string
	// Named makes Host its instance host name and IP address as well.
	Named bool
	// Peers are the service URLs it replicates to and fetches from
	// (eureka.client.service-url.defaultZone); none keeps the jar's own.
	Peers []string
	// Properties are further Spring properties, each "--name=value".
	Properties []string
}

// Addr is host:port.
func (e EurekaServer) Addr() string { return net.JoinHostPort(e.Host, e.Port) }

// URL is its base URL; the Eureka API is under URL()+"/eureka/".
func (e EurekaServer) URL() string { return "http://" + e.Addr() }

// NoEmptyRegistryWait is the property every peer starts with: without it a
// server that finds no registry at its peers on start refuses reads for
// five minutes, which heureka never does.
const NoEmptyRegistryWait = "--eureka.server.wait-time-in-ms-when-sync-empty=0"

// Argv is the java command line after the program name.
func (e EurekaServer) Argv() []string {
	argv := append(append([]string(nil), e.JVMArgs...), "-jar", e.Jar,
		"--server.port="+e.Port, "--server.address="+e.Host, NoEmptyRegistryWait)
	if e.Named {
		argv = append(argv, "--eureka.instance.hostname="+e.Host, "--eureka.instance.ip-address="+e.Host)
	}
	if len(e.Peers) > 0 {
		argv = append(argv, "--eureka.client.service-url.defaultZone="+strings.Join(e.Peers, ","))
	}
	return append(argv, e.Properties...)
}

// WaitEurekaServer polls GET base/eureka/apps until it answers 200. It
// fails early when running reports that the process has exited, and when
// timeout or ctx ends first, with the last answer or error.
func WaitEurekaServer(ctx context.Context, base string, timeout time.Duration, running func() bool) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		code, _, _, err := Send(ctx, client, http.MethodGet, base+"/eureka/apps", nil, nil)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("GET %s/eureka/apps: %d", base, code)
		}
		switch {
		case !running():
			return fmt.Errorf("eureka-server at %s exited before it served: %w", base, err)
		case time.Now().After(deadline):
			return fmt.Errorf("eureka-server at %s did not serve within %v: %w", base, timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for eureka-server at %s: %w", base, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
