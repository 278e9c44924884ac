package e2e

// Commands from peers pass the checks commands from clients pass
// (docs/security.md, "What the tests show"): whatever reaches the leader through
// the node-to-node API is decoded and checked again there, so a caller of
// /internal/v1/apply or apply-batch (a member, or anyone on a cluster
// without a secret) cannot store what the public API refuses.

import (
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e/intruder"
	"github.com/heureka-registry/heureka/fsm"
)

func encodeRegister(t *testing.T, app, id string) []byte {
	t.Helper()
	entry, err := intruder.EncodeRegister(app, id)
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// entryBatch is nodeapi's apply-batch body: each entry after its uvarint
// length.
func entryBatch(entries ...[]byte) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

func TestPeerCommandsChecked(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--cluster-secret", e2eSecret}})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	secret := []string{"Content-Type", "application/octet-stream", "X-Heureka-Cluster-Secret", e2eSecret}

	evil := encodeRegister(t, "EVIL/../X", "evil-1")
	for _, nd := range []*Node{leader, f} {
		for _, app := range intruder.BadAppNames {
			code, b, _ := Do(t, "POST", nd.URL("/internal/v1/apply"), encodeRegister(t, app, "evil-1"), secret...)
			if why := map[string]string{"EVIL/../X": "slash", "EVIL\x01CTRL": "control"}[app]; code != http.StatusBadRequest || !strings.Contains(string(b), why) {
				t.Errorf("%s: /internal/v1/apply of app %q: %d %s, want 400 naming the %s", nd.ID, app, code, b, why)
			}
		}
	}
	// A metadata update without the entry limit, and an eviction (the
	// leader's own command), are refused too.
	md, _ := fsm.Encode(fsm.CmdMetadata, &fsm.MetadataBody{App: "GOOD", ID: "good-1", Metadata: map[string]string{"k": "v"}})
	ev, _ := fsm.Encode(fsm.CmdEvict, &fsm.EvictBody{Keys: []fsm.KeyBody{{App: "GOOD", ID: "good-1"}}})
	for name, e := range map[string][]byte{"metadata without limit": md, "evict": ev} {
		if code, b, _ := Do(t, "POST", leader.URL("/internal/v1/apply"), e, secret...); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, code, b)
		}
	}
	// A batch with a good and a bad registration: the good one is stored,
	// the bad one refused with its own result.
	code, b, _ := Do(t, "POST", leader.URL("/internal/v1/apply-batch"), entryBatch(encodeRegister(t, "GOOD", "good-1"), evil), secret...)
	if code != http.StatusOK || !strings.Contains(string(b), `"code":"bad_command"`) || strings.Count(string(b), `"code"`) != 1 {
		t.Fatalf("apply-batch: %d %s, want one bad_command result", code, b)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			code, _, _ := Do(t, "GET", nd.URL("/eureka/apps/GOOD/good-1?consistency=stale"), nil)
			return code == 200
		}, "GOOD/good-1 on "+nd.ID)
		_, apps, _ := Do(t, "GET", nd.URL("/eureka/apps?consistency=stale"), nil)
		if strings.Contains(string(apps), "EVIL") || strings.Contains(string(apps), "evil-1") {
			t.Fatalf("%s stored the refused registration: %s", nd.ID, apps)
		}
	}
	// The public API refuses the same name, as before.
	if code, _, _ := Do(t, "POST", f.URL("/eureka/apps/X"), RegisterBody("EVIL/../X", "evil-2", nil)); code != http.StatusBadRequest {
		t.Fatalf("public register of EVIL/../X: %d", code)
	}
}
