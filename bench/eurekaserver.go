package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// EurekaServerLocalArgs are the Spring properties a local bench
// eureka-server gets besides its addresses and peers: the same tuning
// HeurekaLocalArgs gives heureka (1 s eviction and cache refresh, 5 s delta
// retention, self-preservation off). Each peer also starts with
// launch.NoEmptyRegistryWait.
var EurekaServerLocalArgs = []string{
	"--eureka.server.eviction-interval-timer-in-ms=1000",
	"--eureka.server.response-cache-update-interval-ms=1000",
	"--eureka.server.retention-time-in-m-s-in-delta-queue=5000",
	"--eureka.server.delta-retention-timer-interval-in-ms=1000",
	"--eureka.server.enable-self-preservation=false",
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
	l.Settings = fmt.Sprintf("%d local peers of Spring Cloud's eureka-server (e2e/eurekaserver), JVM %s, %s %s",
		n, strings.Join(eurekaServerJVMArgs, " "), launch.NoEmptyRegistryWait, strings.Join(args, " "))
	peers := make([]launch.EurekaServer, n)
	for i := range peers {
		addr, err := launch.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		peers[i] = launch.EurekaServer{Jar: jar, JVMArgs: eurekaServerJVMArgs,
			Host: fmt.Sprintf("127.0.0.%d", i+1), Port: port, Named: true,
			Properties: append([]string{
				fmt.Sprintf("--eureka.client.register-with-eureka=%t", n > 1),
				fmt.Sprintf("--eureka.client.fetch-registry=%t", n > 1),
			}, args...)}
	}
	for i := range peers {
		for j, o := range peers {
			if j != i || n == 1 {
				peers[i].Peers = append(peers[i].Peers, o.URL()+"/eureka/")
			}
		}
		name := fmt.Sprintf("es%d", i+1)
		p, err := startProc(name, java, peers[i].Argv(), filepath.Join(dir, name+".log"))
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.Procs = append(l.Procs, p)
		l.URLs = append(l.URLs, peers[i].URL())
	}
	for i, u := range l.URLs {
		if err := launch.WaitEurekaServer(ctx, u, 3*time.Minute, l.Procs[i].Running); err != nil {
			err = l.failure(err)
			l.Stop()
			return nil, err
		}
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
		DeltaRetention: 5 * time.Second, CacheRefresh: time.Second, EvictionInterval: time.Second,
		NoRestart: "not run: eureka-server keeps its registry in memory only, so after every peer restarts it holds nothing until clients register again"}
	// The limit column measures what heureka serves; it is not run again.
	noLimit := &System{Name: ColumnLimit, NotRun: "measured against heureka"}
	steps, closeFn, err := s.heurekaSteps(ctx, t, es, noLimit)
	return newColumn(ColumnEurekaServer, steps, closeFn, err, stop)
}
