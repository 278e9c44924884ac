package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/heureka-registry/heureka/internal/launch"
)

// EurekaServerLocalArgs are the Spring properties a local bench
// eureka-server gets besides its addresses and peers: the same tuning
// HeurekaLocalArgs gives heureka (1 s eviction and cache refresh, 5 s delta
// retention, self-preservation off), plus no five-minute wait before serving
// reads on an empty registry (heureka has none).
var EurekaServerLocalArgs = []string{
	"--eureka.server.eviction-interval-timer-in-ms=1000",
	"--eureka.server.response-cache-update-interval-ms=1000",
	"--eureka.server.retention-time-in-m-s-in-delta-queue=5000",
	"--eureka.server.delta-retention-timer-interval-in-ms=1000",
	"--eureka.server.enable-self-preservation=false",
	"--eureka.server.wait-time-in-ms-when-sync-empty=0",
	"--logging.level.root=WARN",
}

// eurekaServerJVMArgs bound each peer's heap; RSS is reported as measured.
var eurekaServerJVMArgs = []string{"-Xmx1g", "-XX:+UseSerialGC"}

// StartEurekaServer starts n peers of the Spring Cloud eureka-server jar
// (e2e/eurekaserver) with java, peer i on 127.0.0.(i+1) so that each
// recognises the others as peers (eureka-server tells itself from its peers
// by host name), each listing the others as its service URLs. readOnly
// false turns its readOnly response cache off. It waits until every peer
// answers GET /eureka/apps.
func StartEurekaServer(ctx context.Context, java, jar string, n int, readOnly bool, tmp string) (*Local, error) {
	dir, err := os.MkdirTemp(tmp, "eurekaserver-bench-")
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir}
	args := append([]string(nil), EurekaServerLocalArgs...)
	args = append(args, fmt.Sprintf("--eureka.server.use-read-only-response-cache=%t", readOnly))
	l.Settings = fmt.Sprintf("%d local peers of Spring Cloud's eureka-server (e2e/eurekaserver), JVM %s, %s",
		n, strings.Join(eurekaServerJVMArgs, " "), strings.Join(args, " "))
	hosts := make([]string, n)
	for i := range hosts {
		addr, err := launch.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		hosts[i] = net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i+1), port)
	}
	for i, h := range hosts {
		host, port, _ := net.SplitHostPort(h)
		var peers []string
		for j, o := range hosts {
			if j != i {
				peers = append(peers, "http://"+o+"/eureka/")
			}
		}
		if len(peers) == 0 {
			peers = []string{"http://" + h + "/eureka/"}
		}
		a := append(append([]string(nil), eurekaServerJVMArgs...), "-jar", jar,
			"--server.port="+port, "--server.address="+host,
			"--eureka.instance.hostname="+host, "--eureka.instance.ip-address="+host,
			fmt.Sprintf("--eureka.client.register-with-eureka=%t", n > 1),
			fmt.Sprintf("--eureka.client.fetch-registry=%t", n > 1),
			"--eureka.client.service-url.defaultZone="+strings.Join(peers, ","))
		p, err := startProc(fmt.Sprintf("es%d", i+1), java, append(a, args...), filepath.Join(dir, fmt.Sprintf("es%d.log", i+1)))
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.Procs = append(l.Procs, p)
		l.URLs = append(l.URLs, "http://"+h)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	err = waitFor(ctx, 3*time.Minute, 500*time.Millisecond, func() (bool, error) {
		for i, u := range l.URLs {
			if !l.Procs[i].Running() {
				return false, fmt.Errorf("%s exited before it served", l.Procs[i].Name)
			}
			resp, err := client.Get(u + "/eureka/apps")
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("GET %s/eureka/apps: %d", u, resp.StatusCode)
			}
		}
		return true, nil
	})
	if err != nil {
		err = l.failure(err)
		l.Stop()
		return nil, err
	}
	return l, nil
}

// eurekaServerColumn starts the local eureka-server peers and prepares their
// steps: the heureka column's Eureka REST code paths, driven the same way.
// A missing java or jar marks the column not run.
func (s *Suite) eurekaServerColumn(ctx context.Context, es *System) (*column, error) {
	path, err := exec.LookPath(cmp.Or(s.Java, "java"))
	if err != nil {
		es.NotRun = "java not installed"
		return nil, nil
	}
	if _, err := os.Stat(s.EurekaServerJar); err != nil {
		es.NotRun = "eureka-server jar not built (make deps)"
		return nil, nil
	}
	s.logf("eureka-server", "starting %d local peers", s.LocalEurekaServer)
	l, err := StartEurekaServer(ctx, path, s.EurekaServerJar, s.LocalEurekaServer, !s.EurekaServerNoReadOnly, s.TempDir)
	if err != nil {
		es.NotRun = "local peers did not start"
		return nil, err
	}
	stop := s.started("eureka-server", "peers", "peers", l)
	es.Settings = l.Settings
	t := &HeurekaTarget{URLs: l.URLs, PIDs: l.PIDs(), Settings: l.Settings,
		DeltaRetention: 5 * time.Second, CacheRefresh: time.Second, EvictionInterval: time.Second}
	// The limit column measures what heureka serves; it is not run again.
	noLimit := &System{Name: ColumnLimit, NotRun: "measured against heureka"}
	steps, closeFn, err := s.heurekaSteps(ctx, t, es, noLimit)
	return newColumn(ColumnEurekaServer, steps, closeFn, err, stop)
}
