package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/faultproxy"
	"github.com/heureka-registry/heureka/opapi"
)

// node is one heureka process the lab started.
type node struct {
	id, httpAddr, raftAddr, dataDir string
	args                            []string
	cmd                             *exec.Cmd
	exited                          chan struct{}
	logFile                         *os.File
}

// cluster is the lab's set of processes and their Raft proxy.
type cluster struct {
	bin   string
	dir   string
	nodes []*node
	proxy *faultproxy.Proxy
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startCluster starts n nodes in mode with their Raft links through a proxy.
func startCluster(bin, dir string, n int, mode string) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, proxy: faultproxy.New()}
	var members []string
	for i := 1; i <= n; i++ {
		nd := &node{id: fmt.Sprintf("n%d", i), dataDir: filepath.Join(dir, fmt.Sprintf("n%d", i))}
		var err error
		if nd.httpAddr, err = freeAddr(); err != nil {
			return c, err
		}
		if nd.raftAddr, err = freeAddr(); err != nil {
			return c, err
		}
		front, err := c.proxy.Front(nd.id, nd.raftAddr)
		if err != nil {
			return c, err
		}
		nd.args = []string{"serve", "--node-id", nd.id, "--http-addr", nd.httpAddr, "--raft-addr", nd.raftAddr,
			"--raft-advertise", front, "--data-dir", nd.dataDir, "--mode", mode,
			"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--raft-leader-lease-timeout", "250ms",
			"--response-cache-update-interval", "200ms", "--log-level", "warn"}
		members = append(members, fmt.Sprintf("%s=%s@%s", nd.id, front, nd.httpAddr))
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		nd.args = append(nd.args, "--initial-cluster", strings.Join(members, ","))
		if err := c.start(nd); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *cluster) start(nd *node) error {
	if nd.logFile == nil {
		f, err := os.Create(filepath.Join(c.dir, nd.id+".log"))
		if err != nil {
			return err
		}
		nd.logFile = f
	}
	cmd := exec.Command(c.bin, nd.args...)
	cmd.Stdout, cmd.Stderr = nd.logFile, nd.logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", nd.id, err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	go func(ch chan struct{}) { _ = cmd.Wait(); close(ch) }(nd.exited)
	return nil
}

func (nd *node) running() bool {
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// kill stops a node at once (SIGKILL, by PID).
func (nd *node) kill() {
	if nd.running() {
		_ = nd.cmd.Process.Signal(syscall.SIGKILL)
		<-nd.exited
	}
}

// stop ends every process (SIGTERM, then SIGKILL) and the proxy.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		if nd.running() {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range c.nodes {
		if nd.running() {
			select {
			case <-nd.exited:
			case <-time.After(5 * time.Second):
				nd.kill()
			}
		}
		if nd.logFile != nil {
			nd.logFile.Close()
		}
	}
	c.proxy.Close()
}

var client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

func (nd *node) status() (opapi.Status, error) {
	var st opapi.Status
	resp, err := client.Get("http://" + nd.httpAddr + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader returns the node every running node agrees leads, or nil.
func (c *cluster) leader(among []*node) *node {
	var lead *node
	ids := map[string]bool{}
	for _, nd := range among {
		if !nd.running() {
			continue
		}
		st, err := nd.status()
		if err != nil {
			return nil
		}
		if st.State == "Leader" {
			lead = nd
		}
		ids[st.Leader] = true
	}
	if lead == nil || len(ids) != 1 || !ids[lead.id] {
		return nil
	}
	return lead
}

var errTimeout = errors.New("timed out")

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errTimeout
}
