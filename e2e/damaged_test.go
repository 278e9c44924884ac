package e2e

// A data directory is never silently replaced: a node whose log is damaged
// refuses to start and says how to recover, and the recovery (wipe the
// directory, start the node again with --join) brings it back with every
// instance (docs/operations.md, "A damaged data directory").

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/store"
)

// damagedRegs are n instances with leases long enough to outlive the test.
func damagedRegs(n int, prefix string) []reg {
	lease := map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}
	regs := make([]reg, 0, n)
	for i := range n {
		regs = append(regs, reg{app: fmt.Sprintf("%s-%02d", prefix, i%10), id: fmt.Sprintf("%s-%04d", prefix, i),
			extra: map[string]any{"leaseInfo": lease}})
	}
	return regs
}

// logDamages are the ways the issue found a node's raft.db damaged.
var logDamages = []struct {
	name   string
	damage func(t *testing.T, path string)
}{
	{"truncated to 0 bytes", func(t *testing.T, path string) { truncateFile(t, path, 0) }},
	{"truncated to half", func(t *testing.T, path string) { truncateFile(t, path, fileSizeOf(t, path)/2) }},
	{"4 KiB of random bytes in the middle", func(t *testing.T, path string) {
		writeAt(t, path, middle(t, path, 4096, true), randomBytes(t, 4096))
	}},
	{"64 KiB of zeros in the middle", func(t *testing.T, path string) {
		writeAt(t, path, middle(t, path, 64<<10, true), make([]byte, 64<<10))
	}},
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// middle returns the offset of the page nearest the middle of the log
// file at path where n bytes touch a page bolt uses (inUse), or touch none
// (!inUse). bolt keeps no checksum of its pages and a free page may hold
// anything: bytes written over free pages harm nothing, and a node rightly
// starts on them. Where the middle of the file falls (a page in use, or one
// freed by the last writes) depends on how the writes were batched, so the
// test picks the page, with the check Open makes (store.CheckLogFile).
func middle(t *testing.T, path string, n int64, inUse bool) int64 {
	t.Helper()
	c, err := store.CheckLogFile(path)
	if err != nil {
		t.Fatalf("the undamaged log does not pass the check: %v", err)
	}
	ps, size := int64(c.PageSize), fileSizeOf(t, path)
	mid := size / 2 / ps * ps
	for d := int64(0); d < size; d += ps {
		for _, off := range []int64{mid + d, mid - d} {
			if off >= 2*ps && off+n <= size && c.InUse(off, n) == inUse {
				if off != mid {
					t.Logf("the page in the middle of the file (at %d) is not one the case needs (in use: %v); the nearest is at %d", mid, inUse, off)
				}
				return off
			}
		}
	}
	t.Fatalf("no %d bytes of %s (%d bytes) with inUse=%v", n, path, size, inUse)
	return 0
}

func fileSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the regular files under src to dst (created), keeping
// the tree.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return launch.CopyFile(path, target, 0o600)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", src, dst, err)
	}
}

// replaceDir makes dir a copy of src.
func replaceDir(t *testing.T, src, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, src, dir)
}

// answerWatch asks addr for the registry (GET /eureka/apps) every 20 ms
// until stop is called, and counts the HTTP answers, of any status. It
// counts answers, not connections: serve binds its HTTP port before it
// opens the data directory (so a start that fails on a port in use claims
// no directory), and the kernel completes a dial to a bound port that is
// never served; such a dial gets no answer, only a closed connection. A
// connection also completes when another test process probes the port for
// itself while the node is down.
func answerWatch(addr string) (stop func() int) {
	var answered atomic.Int64
	done := make(chan struct{})
	client := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if resp, err := client.Get("http://" + addr + "/eureka/apps"); err == nil {
				resp.Body.Close()
				answered.Add(1)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return int(answered.Load())
	}
}

// TestDamagedLogRefused: a single node holding 500 instances is stopped
// and its raft.db damaged in each of the four ways the issue found (on
// the code before the fix: a new, empty leader for the empty file, a Go
// panic and exit 2 for the others). `heureka serve` on the damaged
// directory must exit 1 at once, with a message that names the file and
// the recovery, no panic, and without ever answering a request on its
// HTTP port.
// Random bytes over a page bolt does not use harm nothing, and the node
// starts on them; the undamaged directory starts and serves all 500.
func TestDamagedLogRefused(t *testing.T) {
	c := StartCluster(t, 1, Options{ExtraArgs: cacheArgs})
	nd := c.WaitLeader(t, 10*time.Second)
	regs := damagedRegs(500, "dmg")
	registerAll(t, nd.BaseURL(), regs, 8)
	want := keySet(regs)
	waitAppsKeys(t, nd, want, 10*time.Second)
	if code := nd.Stop(); code != 0 {
		t.Fatalf("stop: exit code %d", code)
	}
	pristine := filepath.Join(t.TempDir(), "pristine")
	copyDir(t, nd.DataDir, pristine)
	logPath := filepath.Join(nd.DataDir, "raft.db")

	for _, d := range logDamages {
		t.Run(d.name, func(t *testing.T) {
			replaceDir(t, pristine, nd.DataDir)
			d.damage(t, logPath)
			stop := answerWatch(nd.HTTPAddr)
			res := RunBinary(t, 20*time.Second, nil, nd.Args()...)
			answered := stop()
			out := res.Stdout + res.Stderr
			t.Logf("exit %d after %v; stderr:\n%s", res.ExitCode, res.Elapsed.Round(time.Millisecond),
				strings.Join(head(strings.Split(res.Stderr, "\n"), 5), "\n"))
			if res.TimedOut {
				t.Errorf("heureka serve still running after 20 s on a raft.db %s (killed)", d.name)
			} else if res.ExitCode != 1 {
				t.Errorf("exit code %d, want 1", res.ExitCode)
			}
			for _, says := range []string{logPath, "wipe it", "--join", "sends it a snapshot"} {
				if !strings.Contains(res.Stderr, says) {
					t.Errorf("stderr does not say %q", says)
				}
			}
			for _, bad := range []string{"panic", "goroutine "} {
				if strings.Contains(strings.ToLower(out), bad) {
					t.Errorf("output holds %q", bad)
				}
			}
			if answered > 0 {
				t.Errorf("the HTTP port %s answered %d requests", nd.HTTPAddr, answered)
			}
		})
	}

	// Random bytes over pages bolt does not use harm nothing: the node
	// starts and serves every instance.
	t.Run("4 KiB of random bytes over a free page", func(t *testing.T) {
		replaceDir(t, pristine, nd.DataDir)
		writeAt(t, logPath, middle(t, logPath, 4096, false), randomBytes(t, 4096))
		nd.Restart(t)
		c.WaitLeader(t, 10*time.Second)
		waitAppsKeys(t, nd, want, 20*time.Second)
		nd.Stop()
	})

	// The same directory, undamaged, starts and serves every instance: the
	// refusals above were the damage's doing, and the watch that found no
	// answer there finds them here.
	replaceDir(t, pristine, nd.DataDir)
	stop := answerWatch(nd.HTTPAddr)
	nd.Restart(t)
	c.WaitLeader(t, 10*time.Second)
	waitAppsKeys(t, nd, want, 20*time.Second)
	time.Sleep(100 * time.Millisecond)
	if answered := stop(); answered == 0 {
		t.Errorf("the watch counted no answer from the running node at %s", nd.HTTPAddr)
	}
}

// TestWipedFollowerRejoins follows docs/operations.md, "A damaged data
// directory": in a 3-node cluster holding 300 instances, a follower is
// stopped, its data directory wiped, and it is started again with the
// same id and addresses and --join <a running member> instead of
// --initial-cluster. It must come back as a voter and serve every
// instance, from a snapshot the leader sends (the snapshot settings make
// the leader's log start well after the entries the instances were
// registered in), take part in writes, and start again on the directory
// it was given. Then the same with another follower started with its
// flags unchanged (--initial-cluster, as docker compose does), which the
// docs allow for a node of the initial cluster.
func TestWipedFollowerRejoins(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: append(slices.Clone(cacheArgs), snapshotArgs...)})
	leader := c.WaitLeader(t, 10*time.Second)
	regs := damagedRegs(300, "rejoin")
	registerAll(t, leader.BaseURL(), regs, 8)
	want := keySet(regs)
	for _, nd := range c.Nodes {
		waitAppsKeys(t, nd, want, 20*time.Second)
	}
	waitTruncated(t, leader)

	var done []string
	for round, how := range []string{"--join", "--initial-cluster"} {
		leader = c.WaitLeader(t, 10*time.Second)
		var f *Node
		for _, nd := range c.Followers(leader) {
			if !slices.Contains(done, nd.ID) {
				f = nd
			}
		}
		done = append(done, f.ID)
		if code := f.Stop(); code != 0 {
			t.Fatalf("stop %s: exit code %d", f.ID, code)
		}
		if err := os.RemoveAll(f.DataDir); err != nil {
			t.Fatal(err)
		}
		if how == "--join" {
			// The documented restart: the same flags, with --join <HTTP
			// address of a running member> in place of --initial-cluster.
			args := f.Args()
			i := slices.Index(args, "--initial-cluster")
			if i < 0 {
				t.Fatalf("test bug: %s has no --initial-cluster in %q", f.ID, args)
			}
			f.Argv = slices.Replace(args, i, i+2, "--join", leader.HTTPAddr)
		}
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
		f.waitReady(t)

		// Bounded: the leader's Raft backs off from a follower that
		// failed for a while, up to about 10 s between tries.
		waitAppsKeys(t, f, want, 60*time.Second)
		st := f.Status(t)
		if st.LastSnapshotIndex == 0 {
			t.Errorf("%s rejoined (%s) without a snapshot (last_snapshot_index 0): the test did not exercise the snapshot the docs promise", f.ID, how)
		}
		t.Logf("%s rejoined with %s: snapshot at %d, commit %d, leader %s", f.ID, how, st.LastSnapshotIndex, st.CommitIndex, st.Leader)
		if ms := f.Members(t).Members; Voters(ms) != 3 {
			t.Errorf("%s after the rejoin: %d voters, want 3: %+v", f.ID, Voters(ms), ms)
		}

		// It takes part in writes: some through it, seen on every node.
		more := damagedRegs(300+10*(round+1), "rejoin")[300+10*round:]
		registerAll(t, f.BaseURL(), more, 4)
		regs = append(regs, more...)
		want = keySet(regs)
		for _, nd := range c.Nodes {
			waitAppsKeys(t, nd, want, 20*time.Second)
		}

		// And it starts again on the directory it was given (the snapshot
		// it was sent, the log after it).
		f.Restart(t)
		waitAppsKeys(t, f, want, 30*time.Second)
	}
}
