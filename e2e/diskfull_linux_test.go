package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// diskModeEnv=inject makes TestDiskFull_RefusedVisibleRecovered use the
// injected full disk even where it could mount one (to try that path).
const diskModeEnv = "HEUREKA_E2E_DISK"

// faultDiskFullEnv is store.FaultDiskFullEnv: in a binary built with the
// diskfault tag, the store's writes fail with ENOSPC while the file it
// names exists (e2e does not import the server's packages).
const faultDiskFullEnv = "HEUREKA_FAULT_DISK_FULL"

// fullDisk is a disk the test can fill and free under a node.
type fullDisk struct {
	what    string
	dataDir string   // the node's data directory, on that disk
	binary  string   // "": the usual binary
	env     []string // for the node
	fill    func(t *testing.T)
	free    func(t *testing.T)
}

// smallDisk mounts a 20 MiB tmpfs for the node's data directory. It needs
// root (CAP_SYS_ADMIN); the mount is undone after the node stopped.
func smallDisk(t *testing.T) (*fullDisk, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("mounting a small tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return nil, err
	}
	if err := syscall.Mount("heureka-e2e", mnt, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=20m"); err != nil {
		return nil, fmt.Errorf("mount a 20 MiB tmpfs: %w", err)
	}
	// Registered before the cluster's cleanups, so it runs after the node
	// stopped, and before t.TempDir's removal.
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount the test's tmpfs: %v", err)
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	filler := filepath.Join(mnt, "filler")
	return &fullDisk{
		what:    "a 20 MiB tmpfs",
		dataDir: filepath.Join(mnt, "n1"),
		fill: func(t *testing.T) {
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Large writes, then small ones for what is left.
			for _, size := range []int{1 << 20, 4 << 10} {
				buf := bytes.Repeat([]byte{'f'}, size)
				for {
					if _, err := f.Write(buf); err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("fill the disk: %v", err)
						}
						break
					}
				}
			}
		},
		free: func(t *testing.T) {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		},
	}, nil
}

// injectedDisk runs the node on a binary built with the diskfault tag:
// its store fails writes with ENOSPC while a trigger file exists.
func injectedDisk(t *testing.T) *fullDisk {
	bin, err := launch.Build(t.TempDir(), "heureka-diskfault", "diskfault")
	if err != nil {
		t.Fatalf("build heureka with the diskfault tag: %v", err)
	}
	trigger := filepath.Join(t.TempDir(), "disk-full")
	return &fullDisk{
		what:    "an injected full disk (diskfault build)",
		dataDir: filepath.Join(t.TempDir(), "n1"),
		binary:  bin,
		env:     []string{faultDiskFullEnv + "=" + trigger},
		fill: func(t *testing.T) {
			if err := os.WriteFile(trigger, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		free: func(t *testing.T) {
			if err := os.Remove(trigger); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// A single node whose data directory's disk fills up: writes get 503 with
// Retry-After and a message naming the full disk (not 500), /v1/status,
// /metrics and the dashboard say so, the node keeps its leadership while
// the disk stays full, and once space is freed it takes writes again by
// itself and every read shows them. After a restart every write it
// acknowledged is there.
//
// The disk is a 20 MiB tmpfs the test mounts (as root). Where it cannot
// mount one, the test skips, except under HEUREKA_REQUIRE_TOOLS=1, where it
// runs the node on a diskfault build instead (HEUREKA_E2E_DISK=inject
// chooses that build anyway).
func TestDiskFull_RefusedVisibleRecovered(t *testing.T) {
	skipShort(t)
	var disk *fullDisk
	if os.Getenv(diskModeEnv) == "inject" {
		disk = injectedDisk(t)
	} else if d, err := smallDisk(t); err == nil {
		disk = d
	} else if os.Getenv(RequireToolsEnv) == "1" {
		t.Logf("no small disk (%v): %s=1, so the node runs on an injected full disk", err, RequireToolsEnv)
		disk = injectedDisk(t)
	} else {
		t.Skipf("skipping the full-disk test: %v (run as root, or set %s=1 or %s=inject to run it on an injected full disk)",
			err, RequireToolsEnv, diskModeEnv)
	}
	t.Logf("the node's data directory is on %s", disk.what)

	c := StartCluster(t, 1, Options{Binary: disk.binary, Env: disk.env,
		NodeArgs: func(string) []string { return []string{"--data-dir", disk.dataDir} }})
	nd := c.WaitLeader(t, 10*time.Second)
	var acked, refused []string
	for i := range 5 {
		id := fmt.Sprintf("before-%d", i)
		RegisterJSON(t, nd.BaseURL(), "diskfull", id, nil)
		acked = append(acked, "DISKFULL/"+id)
	}

	disk.fill(t)
	// Registrations with 8 KiB of metadata each need new pages of the log
	// store soon, however many it can still reuse.
	pad := map[string]any{"metadata": map[string]any{"pad": strings.Repeat("p", 8<<10)}}
	var refusal string
	for i := 0; refusal == "" && i < 300; i++ {
		id := fmt.Sprintf("full-%d", i)
		code, body, hdr := Do(t, "POST", nd.URL("/eureka/apps/diskfull"), RegisterBody("diskfull", id, pad))
		switch {
		case code == http.StatusNoContent:
			acked = append(acked, "DISKFULL/"+id) // it found room after all
		case code == http.StatusServiceUnavailable && hdr.Get("Retry-After") != "" && bytes.Contains(body, []byte("disk full")):
			refused = append(refused, "DISKFULL/"+id)
			refusal = string(body)
		default:
			t.Fatalf("register %s on a full disk: %d %s (Retry-After %q), want 503 with Retry-After naming the full disk",
				id, code, body, hdr.Get("Retry-After"))
		}
	}
	if refusal == "" {
		t.Fatal("300 registrations with 8 KiB of metadata each all found room on the full disk")
	}
	t.Logf("refused after %d acknowledged writes: %s", len(acked), refusal)

	st := nd.Status(t)
	if !st.DiskFull || st.DiskFullRefused == 0 || !strings.Contains(st.DiskFullCause, "no space left on device") {
		t.Fatalf("/v1/status on a full disk: disk_full %v, disk_full_refused %d, disk_full_cause %q",
			st.DiskFull, st.DiskFullRefused, st.DiskFullCause)
	}
	if code, body, _ := Do(t, "GET", nd.URL("/metrics"), nil); code != 200 || !bytes.Contains(body, []byte("\nheureka_disk_full 1\n")) {
		t.Fatalf("/metrics on a full disk: %d, heureka_disk_full 1 missing", code)
	}
	if code, body, _ := Do(t, "GET", nd.URL("/"), nil, "Accept", "text/html"); code != 200 || !bytes.Contains(body, []byte(`id="disk-full"`)) {
		t.Fatalf("dashboard on a full disk: %d, no DISK FULL banner", code)
	}

	// The leader stays in office: writes are refused before they reach the
	// log, where a failure would make raft step it down.
	leader := c.WaitLeader(t, 10*time.Second)
	term := leader.Status(t).Term
	for i := range 5 {
		id := fmt.Sprintf("refused-%d", i)
		code, body, _ := Do(t, "POST", nd.URL("/eureka/apps/diskfull"), RegisterBody("diskfull", id, pad))
		if code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("disk full")) {
			t.Fatalf("register %s while the disk stays full: %d %s, want 503 naming the full disk", id, code, body)
		}
		refused = append(refused, "DISKFULL/"+id)
		time.Sleep(200 * time.Millisecond)
	}
	if st := nd.Status(t); st.State != "Leader" || st.Term != term {
		t.Fatalf("while the disk stayed full: %s in term %d, was leader in term %d", st.State, st.Term, term)
	}

	disk.free(t)
	WaitFor(t, 10*time.Second, func() bool {
		st, err := nd.TryStatus()
		return err == nil && !st.DiskFull
	}, "the node to find room on its disk again")
	code, body, _ := Do(t, "POST", nd.URL("/eureka/apps/diskfull"), RegisterBody("diskfull", "after", pad))
	if code != http.StatusNoContent {
		t.Fatalf("register after space was freed: %d %s, want 204", code, body)
	}
	acked = append(acked, "DISKFULL/after")

	// Every read shows what was acknowledged, the write after the
	// recovery included; a refused write may be there only if it reached
	// the log after all.
	for _, query := range []string{"", "?consistency=linearizable"} {
		var got []string
		ok := Eventually(5*time.Second, func() bool {
			code, body, _, err := TryDo("GET", nd.URL("/eureka/apps"+query), nil)
			if err != nil || code != http.StatusOK {
				return false
			}
			apps, err := ParseApps(body)
			got = appKeys(apps)
			return err == nil && len(missing(acked, got)) == 0
		})
		if !ok {
			t.Fatalf("GET /eureka/apps%s after the recovery: %d instances, missing %v", query, len(got), missing(acked, got))
		}
		if extra := missing(got, append(slices.Clone(acked), refused...)); len(extra) > 0 {
			t.Fatalf("GET /eureka/apps%s shows instances never registered: %v", query, extra)
		}
	}

	// Nothing acknowledged is lost across a restart.
	nd.Restart(t)
	c.WaitLeader(t, 10*time.Second)
	var got []string
	if !Eventually(10*time.Second, func() bool {
		apps, err := TryGetApps(nd.BaseURL())
		got = appKeys(apps)
		return err == nil && len(missing(acked, got)) == 0
	}) {
		t.Fatalf("after a restart: missing acknowledged writes %v", missing(acked, got))
	}
}

// missing returns the keys of want that got lacks.
func missing(want, got []string) []string {
	var out []string
	for _, k := range want {
		if !slices.Contains(got, k) {
			out = append(out, k)
		}
	}
	return out
}
