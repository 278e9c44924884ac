package nodeapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

var (
	errNotLeader = errors.New("not the leader")
	errNoLeader  = errors.New("no leader")
	testCodes    = Codes{{Name: "not_leader", Err: errNotLeader}, {Name: "bad_command", Err: fsm.ErrBadCommand}}
)

// fakeBackend leads or not; it remembers what reached it.
type fakeBackend struct {
	leader    bool
	applied   [][]byte
	forwarded []bool // the mark of each ApplyBatch call
}

func (b *fakeBackend) lead() error {
	if !b.leader {
		return errNotLeader
	}
	return nil
}

func (b *fakeBackend) Apply(entry []byte) (uint64, error) {
	if err := b.lead(); err != nil {
		return 0, err
	}
	b.applied = append(b.applied, entry)
	return uint64(len(b.applied)), nil
}

func (b *fakeBackend) ApplyBatch(entries [][]byte, forwarded bool) ([]error, uint64, error) {
	b.forwarded = append(b.forwarded, forwarded)
	res := make([]error, len(entries))
	res[len(res)-1] = errNotLeader
	return res, 7, b.lead()
}

func (b *fakeBackend) RenewBatch(batch []byte, kind RenewBatchKind) ([]byte, error) {
	return append([]byte{"jra"[kind]}, batch...), b.lead()
}

func (b *fakeBackend) ReadIndex() (uint64, error) { return 42, b.lead() }

func (b *fakeBackend) LeaseStatus() (opapi.LeaseStatus, error) { return opapi.LeaseStatus{}, b.lead() }

func (b *fakeBackend) Join(context.Context, fsm.Member) error { return b.lead() }

func (b *fakeBackend) Remove(context.Context, string) error { return b.lead() }
func (b *fakeBackend) SetMembership(Membership) error       { return nil }
func (b *fakeBackend) MemberView(id string) (MemberView, error) {
	return MemberView{ID: id, Member: id == "n1", InTouch: true, LeaderHTTP: "127.0.0.1:1"}, nil
}

func (b *fakeBackend) SaveSnapshot(w io.Writer) error {
	if err := b.lead(); err != nil {
		return err
	}
	_, err := w.Write([]byte("snapshot"))
	return err
}

func (b *fakeBackend) RestoreSnapshot(r io.Reader) error {
	if _, err := io.ReadAll(r); err != nil {
		return err
	}
	return b.lead()
}

func serve(t *testing.T, b Backend, secret string) (*Client, string, *[]int) {
	t.Helper()
	var statuses []int
	h := Handler(b, HandlerConfig{Secret: secret, Codes: testCodes, Status: func(err error) int {
		statuses = append(statuses, http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	hc := &http.Client{}
	if secret != "" {
		hc.Transport = WithSecret(http.DefaultTransport, secret)
	}
	c := &Client{HTTP: hc, Scheme: "http://", From: "n1", Codes: testCodes, Unavailable: errNoLeader}
	return c, strings.TrimPrefix(srv.URL, "http://"), &statuses
}

// TestCallsRoundTrip: each call reaches the backend, and an error reply
// comes back as the error value its code names, with the status the
// caller's table gave it.
func TestCallsRoundTrip(t *testing.T) {
	b := &fakeBackend{leader: true}
	c, addr, statuses := serve(t, b, "a-secret")
	ctx := context.Background()
	entry, err := fsm.Encode(fsm.CmdSetMode, fsm.ModeBody{Mode: "cp"})
	if err != nil {
		t.Fatal(err)
	}
	if idx, err := c.Apply(ctx, addr, entry); err != nil || idx != 1 {
		t.Fatalf("Apply: %d, %v", idx, err)
	}
	if _, err := c.Apply(ctx, addr, []byte("not a command")); !errors.Is(err, fsm.ErrBadCommand) {
		t.Fatalf("Apply of junk: %v, want ErrBadCommand", err)
	}
	res, idx, err := c.ApplyBatch(ctx, addr, [][]byte{entry, entry})
	if err != nil || idx != 7 || res[0] != nil || !errors.Is(res[1], errNotLeader) {
		t.Fatalf("ApplyBatch: %v %d %v", res, idx, err)
	}
	res, idx, err = c.ForwardBatch(ctx, addr, [][]byte{entry, entry})
	if err != nil || idx != 7 || res[0] != nil || !errors.Is(res[1], errNotLeader) {
		t.Fatalf("ForwardBatch: %v %d %v", res, idx, err)
	}
	if !slices.Equal(b.forwarded, []bool{false, true}) {
		t.Fatalf("batches marked forwarded: %v, want [false true]", b.forwarded)
	}
	for kind, want := range map[RenewBatchKind]string{RenewJudge: "jx", RenewReplicated: "rx", RenewAnswered: "ax"} {
		if got, err := c.RenewBatch(ctx, addr, kind, []byte("x")); err != nil || string(got) != want {
			t.Fatalf("RenewBatch of kind %d: %q %v, want %q", kind, got, err, want)
		}
	}
	if got, err := c.ReadIndex(ctx, addr); err != nil || got != 42 {
		t.Fatalf("ReadIndex: %d %v", got, err)
	}
	// An id that needs escaping arrives as it was sent.
	for id, member := range map[string]bool{"n1": true, "n 2/?&": false} {
		if v, err := c.MemberView(ctx, addr, id); err != nil || v.ID != id || v.Member != member || !v.InTouch {
			t.Fatalf("MemberView(%q): %+v %v", id, v, err)
		}
	}
	var buf bytes.Buffer
	if err := c.FetchSnapshot(ctx, addr, &buf, 1<<20); err != nil || buf.String() != "snapshot" {
		t.Fatalf("FetchSnapshot: %q %v", buf.String(), err)
	}
	if len(*statuses) != 1 {
		t.Fatalf("status table asked %d times, want once (for the junk entry)", len(*statuses))
	}

	b.leader = false
	for name, err := range map[string]error{
		"Apply":       func() error { _, err := c.Apply(ctx, addr, entry); return err }(),
		"ReadIndex":   func() error { _, err := c.ReadIndex(ctx, addr); return err }(),
		"LeaseStatus": func() error { _, err := c.LeaseStatus(ctx, addr); return err }(),
		"Join":        c.PostJSON(ctx, addr, PathJoin, fsm.Member{ID: "n4"}),
		"Snapshot":    c.FetchSnapshot(ctx, addr, &buf, 1<<20),
		"Restore":     c.Restore(ctx, addr, []byte("snapshot")),
	} {
		if !errors.Is(err, errNotLeader) {
			t.Errorf("%s on a follower: %v, want the not-leader error", name, err)
		}
	}
}

func TestUnreachableAndUnreadable(t *testing.T) {
	c := &Client{HTTP: &http.Client{}, Scheme: "http://", Codes: testCodes, Unavailable: errNoLeader}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := c.ReadIndex(context.Background(), addr); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call to a closed port: %v, want ErrUnreachable", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gateway trouble", http.StatusBadGateway)
	}))
	defer srv.Close()
	if _, err := c.ReadIndex(context.Background(), strings.TrimPrefix(srv.URL, "http://")); !errors.Is(err, errNoLeader) {
		t.Fatalf("answer that is not a reply: %v, want Unavailable", err)
	}
}

// TestBodySizeHint: room is made ahead for a declared length only within
// the limit and the hint's own bound, so that a caller declaring large
// bodies does not make the node hold what it has not sent.
func TestBodySizeHint(t *testing.T) {
	for _, c := range []struct {
		n, limit int64
		want     int
	}{
		{-1, maxBody, 0}, {0, maxBody, 0}, {2500, maxBody, 2500}, {maxBodyHint, maxBody, maxBodyHint},
		{maxBodyHint + 1, maxBody, 0}, {maxBody, maxBody, 0}, {2500, 1000, 0},
	} {
		if got := bodySizeHint(c.n, c.limit); got != c.want {
			t.Errorf("bodySizeHint(%d, %d) = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
}
