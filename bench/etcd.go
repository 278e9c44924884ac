//go:build etcdclient

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// The etcd mapping: the same workload expressed in etcd's v3 API, as a
// registry built on etcd stores it (docs/bench.md says the same).
//
//   - instance   = key /registry/<APP>/<instanceId> holding the instance's
//     JSON document, attached to a lease of its own whose TTL is the
//     instance's lease duration. Registering = LeaseGrant + Put(WithLease):
//     two round trips, counted as one registration.
//   - renew      = LeaseKeepAliveOnce on the instance's lease.
//   - full read  = Range over the prefix /registry/, from a follower, both
//     serializable (the member's own state, like heureka's follower reads)
//     and linearizable (ReadIndex through the leader). The answer is read
//     as raw bytes (gRPC codec that does not decode), as heureka's answers
//     are, so the client's protobuf decoding does not eat the shared CPU.
//   - one app    = Range over /registry/<APP>/.
//   - delta      = no equivalent read: etcd clients Watch the prefix. The
//     delta row says N/A; the W6 watch row measures what clients see.
//   - propagation = Put (or lease revoke) acknowledged by member A, then a
//     serializable Get on member B until the key shows the new revision (or
//     is gone); and, as clients see it, the event on a Watch held on B.
//   - crash detection = stop keep-alives; time until a serializable Range
//     on B no longer lists the key (the leader revokes expired leases).
//   - memory     = RSS from /proc when the PIDs are known, else
//     process_resident_memory_bytes from the member's /metrics.

type etcdRun struct {
	s       *Suite
	t       *EtcdTarget
	sys     *System
	clients []*clientv3.Client // one per member, each bound to that member only
	a, b    int
	leases  []clientv3.LeaseID
	term    uint64 // highest Raft term before W1
}

func newEtcdClient(ep string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:          []string{ep},
		DialTimeout:        5 * time.Second,
		Logger:             zap.NewNop(),
		MaxCallRecvMsgSize: math.MaxInt32,
	})
}

// etcdSteps prepares the etcd column: one step per workload, in the same
// order as heurekaSteps; close closes the clients.
func (s *Suite) etcdSteps(ctx context.Context, t *EtcdTarget, sys *System) ([]step, func(), error) {
	if len(t.Endpoints) == 0 {
		sys.NotRun = "no endpoints"
		return nil, nil, errors.New("no etcd endpoints")
	}
	r := &etcdRun{s: s, t: t, sys: sys}
	closeAll := func() {
		for _, c := range r.clients {
			c.Close()
		}
	}
	for _, ep := range t.Endpoints {
		c, err := newEtcdClient(ep)
		if err != nil {
			closeAll()
			sys.NotRun = "cannot connect"
			return nil, nil, err
		}
		r.clients = append(r.clients, c)
	}
	if err := r.roles(ctx); err != nil {
		closeAll()
		sys.NotRun = "cannot read member status"
		return nil, nil, err
	}
	s.logf("etcd", "writer A = %s, reader B = %s", t.Endpoints[r.a], t.Endpoints[r.b])
	steps := []step{
		r.register,
		func(ctx context.Context) error { r.renew(ctx); return nil },
		func(ctx context.Context) error { r.full(ctx); return nil },
		func(ctx context.Context) error {
			r.sys.Set(RowDelta, NotApplicable("N/A (no delta read: clients Watch, see W6 watch row)"))
			return nil
		},
		func(ctx context.Context) error { r.app(ctx); return nil },
		func(ctx context.Context) error {
			r.sys.Set(RowFullChurn, NotApplicable("— (not measured)"))
			return nil
		},
		func(ctx context.Context) error {
			r.sys.Set(RowAppChurn, NotApplicable("— (not measured)"))
			return nil
		},
		func(ctx context.Context) error { r.propagation(ctx, RowPropagation); return nil },
		func(ctx context.Context) error { r.propagation(ctx, RowPropClient); return nil },
		func(ctx context.Context) error {
			// etcd's answer to a blocking read is the watch W6C measured.
			if m, ok := r.sys.Rows[RowPropClient]; ok {
				m.Note = "the W6 watch row's watch"
				r.sys.Set(RowPropBlock, m)
			}
			return nil
		},
		func(ctx context.Context) error { r.memory(ctx); return nil },
		r.crash,
		func(ctx context.Context) error { r.elections(ctx); return nil },
	}
	return steps, closeAll, nil
}

// roles picks B as the first follower and A as another follower.
func (r *etcdRun) roles(ctx context.Context) error {
	var followers []int
	for i, c := range r.clients {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(cctx, r.t.Endpoints[i])
		cancel()
		if err != nil {
			return fmt.Errorf("status of %s: %w", r.t.Endpoints[i], err)
		}
		if st.Header.MemberId != st.Leader {
			followers = append(followers, i)
		}
		r.term = max(r.term, st.RaftTerm)
	}
	r.a, r.b = pickRoles(followers, len(r.clients))
	return nil
}

// W1: LeaseGrant + Put per instance, Writers clients spread over members.
// instanceJSON is instance i's document inside its register body: what
// the etcd mapping stores under the instance's key.
func (s *Suite) instanceJSON(i int) []byte {
	b := s.registerBodies()[i]
	return b[len(`{"instance":`) : len(b)-1]
}

func (r *etcdRun) register(ctx context.Context) error {
	s, wl, n := r.s, r.s.Workload, len(r.clients)
	r.leases = make([]clientv3.LeaseID, wl.Instances)
	cpu := newCPUMeter(r.t.PIDs)
	var res Result
	cpu.measure(func() {
		res = s.timed(ctx, "etcd", "W1 register (grant + put)", LoadConfig{Concurrency: s.Writers, Duration: s.RegisterTimeout, MaxRequests: int64(wl.Instances)}, func(ctx context.Context, w, _ int, seq int64) (int64, error) {
			c := r.clients[w%n]
			i := int(seq)
			lr, err := c.Grant(ctx, int64(wl.LeaseSecs))
			if err != nil {
				return 0, err
			}
			v := s.instanceJSON(i)
			if _, err := c.Put(ctx, EtcdKey(wl.App(i), wl.ID(i)), string(v), clientv3.WithLease(lr.ID)); err != nil {
				return 0, err
			}
			r.leases[i] = lr.ID
			return int64(len(v)), nil
		})
	})
	return s.registered(ctx, "etcd", "keys", r.sys, res, cpu, int64(wl.Instances)-res.Errors, func(ctx context.Context) (int64, error) {
		resp, err := r.clients[r.b].Get(ctx, EtcdPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		if err != nil {
			return 0, err
		}
		return resp.Count, nil
	})
}

// W2: KeepAliveOnce as fast as Renewers clients can go.
func (r *etcdRun) renew(ctx context.Context) {
	s, n := r.s, len(r.clients)
	cpu := newCPUMeter(r.t.PIDs)
	var res Result
	cpu.measure(func() {
		res = s.timed(ctx, "etcd", "W2 renew (keep-alive once)", LoadConfig{Concurrency: s.Renewers, Duration: s.Duration, Drain: drain},
			func(ctx context.Context, w, _ int, seq int64) (int64, error) {
				id := r.leases[seq%int64(len(r.leases))]
				if id == 0 {
					return 0, errors.New("instance was not registered")
				}
				_, err := r.clients[w%n].KeepAliveOnce(ctx, id)
				return 0, err
			})
	})
	m := FromResult(res)
	m.CPUPerOp = cpu.perOp(res.Requests)
	r.sys.Set(RowRenew, m)
}

// W3: ranges over the whole prefix on follower B, serializable and
// linearizable.
func (r *etcdRun) full(ctx context.Context) {
	s := r.s
	lc := LoadConfig{Concurrency: s.FullReaders, Duration: s.Duration, Drain: drain}
	all := func(w, i int) string { return EtcdPrefix }
	r.rangeRow(ctx, RowFull, "range /registry/ serializable", lc, all, true)
	r.rangeRow(ctx, RowFullLinear, "range /registry/ linearizable", lc, all, false)
}

// W5: ranges over one application's prefix, over all applications.
func (r *etcdRun) app(ctx context.Context) {
	s, wl := r.s, r.s.Workload
	lc := LoadConfig{Concurrency: s.Readers, Duration: s.Duration, Drain: drain}
	app := func(w, i int) string { return EtcdAppPrefix(wl.AppName((i*s.Readers + w) % wl.Apps)) }
	r.rangeRow(ctx, RowApp, "range /registry/<APP>/ serializable", lc, app, true)
	r.rangeRow(ctx, RowAppLinear, "range /registry/<APP>/ linearizable", lc, app, false)
}

func (r *etcdRun) rangeRow(ctx context.Context, row, label string, lc LoadConfig, prefix func(w, i int) string, serializable bool) {
	conn := r.clients[r.b].ActiveConnection()
	size, err := rawRange(ctx, conn, prefix(0, 0), serializable)
	if err != nil {
		r.sys.Set(row, NotApplicable("failed: "+err.Error()))
		return
	}
	// Serializable reads are served by B alone; linearizable ones also
	// cost the leader a ReadIndex round: count every member.
	pids := r.t.PIDs
	if serializable && r.b < len(pids) {
		pids = []int{pids[r.b]}
	}
	cpu := newCPUMeter(pids)
	var res Result
	cpu.measure(func() {
		res = r.s.timed(ctx, "etcd", row+" "+label, lc, func(ctx context.Context, w, i int, _ int64) (int64, error) {
			return rawRange(ctx, conn, prefix(w, i), serializable)
		})
	})
	m := FromResult(res)
	m.BodyBytes = size
	m.CPUPerOp = cpu.perOp(res.Requests)
	r.sys.Set(row, m)
}

// rawCodec sends protobuf requests and keeps answers as bytes (it only
// counts them), so the bench does not spend CPU decoding what it reads.
type rawCodec struct{}

type rawReply struct{ n int64 }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawReply).n = int64(data.Len())
	return nil
}

func (rawCodec) Name() string { return "proto" }

// rawRange ranges over prefix and returns the size of the answer.
func rawRange(ctx context.Context, conn *grpc.ClientConn, prefix string, serializable bool) (int64, error) {
	var out rawReply
	req := &pb.RangeRequest{Key: []byte(prefix), RangeEnd: []byte(PrefixEnd(prefix)), Serializable: serializable}
	err := conn.Invoke(ctx, pb.KV_Range_FullMethodName, req, &out, grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	return out.n, err
}

// W6: put, put (status change) and lease revoke on A, each timed from A's
// answer until B shows it: a serializable Get (RowPropagation) or the event
// on a Watch held on B (RowPropClient).
func (r *etcdRun) propagation(ctx context.Context, row string) {
	s := r.s
	A, B := r.clients[r.a], r.clients[r.b]
	direct := row == RowPropagation
	prefix := EtcdAppPrefix(PropApp + "-" + strings.ToLower(row))
	var wl *timedLog[watchEv]
	label := row + " propagation (serializable get)"
	if !direct {
		label = row + " propagation (watch)"
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wl = newTimedLog[watchEv]()
		wch := B.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix())
		go func() {
			for resp := range wch {
				at := time.Now()
				for _, ev := range resp.Events {
					wl.add(watchEv{key: string(ev.Kv.Key), rev: ev.Kv.ModRevision, del: ev.Type == clientv3.EventTypeDelete}, at)
				}
			}
		}()
		// The watch is registered once B answers a progress request.
		_ = B.RequestProgress(wctx)
	}
	const timeout = 10 * time.Second
	visible := func(ctx context.Context, key string, rev int64, del bool, ack time.Time) (time.Duration, bool) {
		if !direct {
			at, ok := wl.wait(ctx, 0, timeout, func(e watchEv) bool { return e.key == key && e.del == del && (del || e.rev >= rev) })
			return max(at.Sub(ack), 0), ok
		}
		err := waitFor(ctx, timeout, time.Millisecond, func() (bool, error) {
			resp, err := B.Get(ctx, key, clientv3.WithSerializable())
			if err != nil {
				return false, err
			}
			if del {
				return len(resp.Kvs) == 0, nil
			}
			return len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision >= rev, nil
		})
		return time.Since(ack), err == nil
	}
	cycle := func(ctx context.Context, w, n int, record func(time.Duration, bool)) error {
		id := fmt.Sprintf("prop-%d-%d", w, n)
		key := prefix + id
		sp := Spec{App: PropApp, ID: id, IP: ipOf(1<<23 + w<<12 + n), LeaseSecs: r.s.Workload.LeaseSecs,
			RenewalSecs: r.s.Workload.RenewalSecs, Metadata: Metadata(n, 256), DirtyMillis: time.Now().UnixMilli()}
		// seen records how long B takes to show a write acknowledged just
		// now; false once ctx has ended (the sample is cut off, not failed).
		seen := func(rev int64, del bool) bool {
			d, ok := visible(ctx, key, rev, del, time.Now())
			if ctx.Err() != nil {
				return false
			}
			record(d, ok)
			return true
		}
		lr, err := A.Grant(ctx, int64(sp.LeaseSecs))
		if err != nil {
			return err
		}
		put, err := A.Put(ctx, key, string(InstanceJSON(sp)), clientv3.WithLease(lr.ID))
		if err != nil {
			return err
		}
		if !seen(put.Header.Revision, false) {
			return nil
		}
		sp.Status = "OUT_OF_SERVICE"
		put, err = A.Put(ctx, key, string(InstanceJSON(sp)), clientv3.WithLease(lr.ID))
		if err != nil {
			return err
		}
		if !seen(put.Header.Revision, false) {
			return nil
		}
		rv, err := A.Revoke(ctx, lr.ID)
		if err != nil {
			return err
		}
		seen(rv.Header.Revision, true)
		return nil
	}
	r.sys.Set(row, s.sample(ctx, "etcd", label, s.PropWorkers, 0, cycle))
}

// watchEv is one event of the W6 watch.
type watchEv struct {
	key string
	rev int64
	del bool
}

// elections records a change of Raft term since W1 began.
func (r *etcdRun) elections(ctx context.Context) {
	var term uint64
	for i, c := range r.clients {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if st, err := c.Status(cctx, r.t.Endpoints[i]); err == nil {
			term = max(term, st.RaftTerm)
		}
		cancel()
	}
	r.s.termChange("etcd", &r.sys.Events, r.term, term)
}

// W7: RSS from /proc, else process_resident_memory_bytes from /metrics.
func (r *etcdRun) memory(ctx context.Context) {
	m := r.s.memory("etcd", "m", r.t.PIDs, len(r.t.Endpoints), func(i int) (int64, string, bool) {
		v, err := metricValue(ctx, r.t.Endpoints[i]+"/metrics", "process_resident_memory_bytes")
		return int64(v), "rss from /metrics", err == nil
	})
	r.sys.Set(RowMemory, m)
}

// metricValue reads one unlabelled sample from a Prometheus text page.
func metricValue(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}

// W8: keys on short leases kept alive for three rounds, then abandoned;
// each timed from its last acknowledged keep-alive until a serializable
// range on B no longer lists it.
func (r *etcdRun) crash(ctx context.Context) error {
	s, n := r.s, len(r.clients)
	k := s.CrashInstances
	prefix := EtcdAppPrefix(CrashApp)
	keys := make([]string, k)
	leases := make([]clientv3.LeaseID, k)
	var grantedTTL int64
	var mu sync.Mutex
	s.logf("etcd", "W8: putting %d keys with a %d s lease", k, s.CrashLeaseSecs)
	err := parallel(ctx, min(k, 32), k, func(ctx context.Context, i int) error {
		c := r.clients[i%n]
		lr, err := c.Grant(ctx, int64(s.CrashLeaseSecs))
		if err != nil {
			return err
		}
		keys[i] = prefix + fmt.Sprintf("crash-%d", i)
		sp := Spec{App: CrashApp, ID: fmt.Sprintf("crash-%d", i), IP: ipOf(1<<22 + i), LeaseSecs: s.CrashLeaseSecs, RenewalSecs: 1,
			Metadata: Metadata(i, s.Workload.MetadataBytes)}
		if _, err := c.Put(ctx, keys[i], string(InstanceJSON(sp)), clientv3.WithLease(lr.ID)); err != nil {
			return err
		}
		mu.Lock()
		leases[i], grantedTTL = lr.ID, lr.TTL
		mu.Unlock()
		return nil
	})
	if err != nil {
		r.sys.Set(RowCrash, NotApplicable("failed: "+err.Error()))
		return fmt.Errorf("W8 put: %w", err)
	}
	m := s.crashDetection(ctx, "etcd", "keep-alive", keys, func(ctx context.Context, i int) error {
		_, err := r.clients[i%n].KeepAliveOnce(ctx, leases[i])
		return err
	}, func(ctx context.Context) (map[string]bool, error) {
		resp, err := r.clients[r.b].Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
		if err != nil {
			return nil, err
		}
		present := map[string]bool{}
		for _, kv := range resp.Kvs {
			present[string(kv.Key)] = true
		}
		return present, nil
	})
	m.Note = fmt.Sprintf("lease TTL %d s (granted %d s)", s.CrashLeaseSecs, grantedTTL)
	r.sys.Set(RowCrash, m)
	s.logf("etcd", "W8 crash detection: %s", FormatCell(KindLatency, m))
	return nil
}

// StartEtcd starts an n-member etcd cluster of bin on free 127.0.0.1
// ports with data under a new directory in tmp, and waits until every
// member reports the same leader.
func StartEtcd(ctx context.Context, bin string, n int, tmp string) (*Local, error) {
	dir, err := os.MkdirTemp(tmp, "etcd-bench-")
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir, Settings: fmt.Sprintf("%d local members, etcd defaults (heartbeat 100 ms, election 1000 ms, fsync on every commit)", n)}
	type member struct{ name, client, peer string }
	ms := make([]member, n)
	var initial []string
	for i := range ms {
		c, err := launch.FreeAddr()
		if err != nil {
			return nil, err
		}
		p, err := launch.FreeAddr()
		if err != nil {
			return nil, err
		}
		ms[i] = member{fmt.Sprintf("m%d", i+1), "http://" + c, "http://" + p}
		initial = append(initial, ms[i].name+"="+ms[i].peer)
	}
	for _, m := range ms {
		args := []string{"--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "heureka-bench", "--logger", "zap", "--log-level", "warn"}
		p, err := startProc(m.name, bin, args, filepath.Join(dir, m.name+".log"))
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.Procs = append(l.Procs, p)
		l.URLs = append(l.URLs, m.client)
	}
	if err := waitEtcdLeader(ctx, l, 60*time.Second); err != nil {
		err = l.failure(err)
		l.Stop()
		return nil, err
	}
	return l, nil
}

func waitEtcdLeader(ctx context.Context, l *Local, timeout time.Duration) error {
	var clients []*clientv3.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, u := range l.URLs {
		c, err := newEtcdClient(u)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	return waitFor(ctx, timeout, 100*time.Millisecond, func() (bool, error) {
		leaders := map[uint64]bool{}
		for i, c := range clients {
			if !l.Procs[i].Running() {
				return false, fmt.Errorf("%s exited", l.Procs[i].Name)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := c.Status(cctx, l.URLs[i])
			cancel()
			if err != nil {
				return false, err
			}
			leaders[st.Leader] = true
		}
		return len(leaders) == 1 && !leaders[0], nil
	})
}

// etcdVersion is the first line of `etcd --version`.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	line := firstLine(string(out))
	if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
		return v
	}
	return line
}
