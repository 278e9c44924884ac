package e2e

// A fleet's parked blocking reads over a 3-node cluster: 10,000 client apps
// each watching 5 applications (heureka.subset of
// clients/spring-boot-starter-heureka) is 50,000 parked
// GET /eureka/apps/NAME?index=N&wait=5m. One application is watched by
// 10,000 of them, the other 40,000 are spread over 999 applications. Each
// round changes the watched-by-10,000 application once (an instance
// registered, then cancelled), and measures the time from the write's ack
// until every one of its watchers has its answer, the nodes' CPU from the
// write until every watcher has parked again with the new index (as the
// starter does), and that no watcher of another application was woken.
//
// The watchers run in three child processes (this test binary, started
// with HEUREKA_FLEET_WATCHER set), one per node, each holding its
// node's third of the connections: one process may not have 50,000 open
// files here.
//
//	go test ./e2e -run XXX -bench ParkedReadsFleet -benchtime 1x -v -timeout 30m
//
// BENCH_FLEET_WATCHERS, BENCH_FLEET_HOT, BENCH_FLEET_APPS and
// BENCH_FLEET_ROUNDS change the 50,000, 10,000, 1,000 and 10.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const fleetWatcherEnv = "HEUREKA_FLEET_WATCHER"

// fleetReport is a watcher process's answer to "count" and "times".
type fleetReport struct {
	Hot    int     `json:"hot"`    // answers with a new version to watchers of the hot application
	Cold   int     `json:"cold"`   // and to the others
	Errors int     `json:"errors"` // failed requests (each retried)
	Times  []int64 `json:"times"`  // "times": the hot answers' arrival, Unix ns
}

func BenchmarkParkedReadsFleet(b *testing.B) {
	watchers := envInt("BENCH_FLEET_WATCHERS", 50000)
	hot := envInt("BENCH_FLEET_HOT", 10000)
	apps := envInt("BENCH_FLEET_APPS", 1000)
	rounds := envInt("BENCH_FLEET_ROUNDS", 10)
	c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--pprof"}})
	leader := c.WaitLeader(b, 15*time.Second)
	appName := func(a int) string { return fmt.Sprintf("FLEET-%04d", a) }
	hotApp := appName(0)

	// Two instances per application.
	var wg sync.WaitGroup
	var regErr atomic.Value
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				for i := range 2 {
					if err := TryRegisterJSON(leader.BaseURL(), appName(a), fmt.Sprintf("fleet-%04d-%d", a, i), nil); err != nil {
						regErr.Store(err)
					}
				}
			}
		}()
	}
	for a := range apps {
		work <- a
	}
	close(work)
	wg.Wait()
	if err, _ := regErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	for _, nd := range c.Nodes {
		WaitFor(b, time.Minute, func() bool {
			a, err := TryGetApps(nd.BaseURL())
			return err == nil && len(a.Instances) == 2*apps
		}, nd.ID+" holding every instance")
	}
	var before []float64
	for _, nd := range c.Nodes {
		before = append(before, settledRSS(nd))
	}

	// The watcher processes, one per node.
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
		hot int
	}
	var children []*child
	for i, nd := range c.Nodes {
		n := watchers / 3
		h := hot / 3
		if i == 0 {
			n += watchers % 3
			h += hot % 3
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fleetWatcherEnv+"="+nd.BaseURL(),
			fmt.Sprintf("FLEET_WATCHERS=%d", n), fmt.Sprintf("FLEET_HOT=%d", h), fmt.Sprintf("FLEET_APPS=%d", apps))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatalf("start watcher process: %v", err)
		}
		ch := &child{cmd: cmd, in: in, out: bufio.NewScanner(out), hot: h}
		ch.out.Buffer(make([]byte, 1<<20), 64<<20)
		b.Cleanup(func() {
			_ = in.Close()
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill() // by its PID
				<-done
			}
		})
		children = append(children, ch)
	}
	ask := func(ch *child, cmd string) fleetReport {
		var r fleetReport
		if _, err := io.WriteString(ch.in, cmd+"\n"); err != nil {
			b.Fatalf("watcher process: %v", err)
		}
		if !ch.out.Scan() {
			b.Fatalf("watcher process ended: %v", ch.out.Err())
		}
		if err := json.Unmarshal(ch.out.Bytes(), &r); err != nil {
			b.Fatalf("watcher process said %q: %v", ch.out.Text(), err)
		}
		return r
	}
	parked := func() int {
		n := 0
		for _, nd := range c.Nodes {
			n += int(parkedReads(nd))
		}
		return n
	}
	start := time.Now()
	WaitFor(b, 5*time.Minute, func() bool { return parked() >= watchers }, "every read parked")
	parkedAfter := time.Since(start)
	var with []float64
	var added float64
	for i, nd := range c.Nodes {
		with = append(with, settledRSS(nd))
		added += with[i] - before[i]
		b.Logf("%s with %d parked: %s", nd.ID, int(parkedReads(nd)), goMemory(nd))
	}
	b.Logf("%d reads parked in %v (%d on the hot application); RSS before %.1f/%.1f/%.1f MB, settled with them parked %.1f/%.1f/%.1f MB: +%.1f MB, %.2f KB per parked read",
		watchers, parkedAfter.Round(time.Millisecond), hot, before[0], before[1], before[2], with[0], with[1], with[2],
		added, added*1024/float64(watchers))
	idle0, idleAt := clusterCPU(c), time.Now()
	time.Sleep(5 * time.Second)
	idleRate := (clusterCPU(c) - idle0) / time.Since(idleAt).Seconds()
	b.Logf("the three nodes idle with them parked: %.1f ms CPU per second", idleRate*1000)

	var allAnswered, perWatcher, cpu, cpuNet ssStats
	var cold, errs int
	b.ResetTimer()
	for r := range rounds {
		time.Sleep(time.Second) // a change after a quiet spell: the push's leading edge
		cpu0, began := clusterCPU(c), time.Now()
		var code int
		var body []byte
		var err error
		if r%2 == 0 {
			err = TryRegisterJSON(leader.BaseURL(), hotApp, "fleet-change", nil)
			code = 204
		} else {
			code, body, _, err = TryDo("DELETE", leader.URL("/eureka/apps/"+hotApp+"/fleet-change"), nil)
		}
		acked := time.Now()
		if err != nil || (code != 200 && code != 204) {
			b.Fatalf("round %d: the change: %d %s %v", r+1, code, body, err)
		}
		// Every hot watcher answered, then every read parked again.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			done := true
			for _, ch := range children {
				if rep := ask(ch, "count"); rep.Hot < ch.hot {
					done = false
				}
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("round %d: not every watcher of %s answered within 2 min", r+1, hotApp)
			}
			time.Sleep(20 * time.Millisecond)
		}
		WaitFor(b, 2*time.Minute, func() bool { return parked() >= watchers }, "every read parked again")
		used := clusterCPU(c) - cpu0
		window := time.Since(began)
		var last time.Duration
		for _, ch := range children {
			rep := ask(ch, "times")
			cold += rep.Cold
			errs += rep.Errors
			if rep.Hot != ch.hot {
				b.Errorf("round %d: %d answers to %d watchers of %s", r+1, rep.Hot, ch.hot, hotApp)
			}
			for _, at := range rep.Times {
				d := time.Duration(at - acked.UnixNano())
				perWatcher = append(perWatcher, d)
				last = max(last, d)
			}
		}
		allAnswered = append(allAnswered, last)
		cpu = append(cpu, time.Duration(used*float64(time.Second)))
		net := time.Duration((used - idleRate*window.Seconds()) * float64(time.Second))
		cpuNet = append(cpuNet, net)
		b.Logf("round %2d: all %d watchers answered %4dms after the ack; the nodes' CPU until all parked again (%dms) %4dms, %4dms above idle",
			r+1, hot, last.Milliseconds(), window.Milliseconds(), time.Duration(used*float64(time.Second)).Milliseconds(), net.Milliseconds())
	}
	b.StopTimer()
	b.Logf("time until every watcher of the changed application had its answer, per change: %v", allAnswered)
	b.Logf("each watcher's answer after the ack (%d answers): p50 %v, p99 %v, max %v",
		len(perWatcher), perWatcher.pct(50).Round(time.Millisecond), perWatcher.pct(99).Round(time.Millisecond), perWatcher.pct(100).Round(time.Millisecond))
	b.Logf("the three nodes' CPU per change (answering %d, and %d parked again): %v; above idle: %v", hot, hot, cpu, cpuNet)
	b.Logf("watchers of other applications woken: %d; failed requests (retried): %d", cold, errs)
	if cold > 0 {
		b.Errorf("%d watchers of unchanged applications were answered", cold)
	}
}

// runFleetWatcher is a watcher process of BenchmarkParkedReadsFleet: it
// parks FLEET_WATCHERS blocking reads on the node at the environment's
// HEUREKA_FLEET_WATCHER, FLEET_HOT of them on FLEET-0000 and the others on
// FLEET-0001 onwards, each parking again at once with the version its
// answer carried; it answers the commands "count" and "times" on stdin
// with one JSON line each, and ends when stdin closes.
func runFleetWatcher() {
	base := os.Getenv(fleetWatcherEnv)
	n, _ := strconv.Atoi(os.Getenv("FLEET_WATCHERS"))
	hot, _ := strconv.Atoi(os.Getenv("FLEET_HOT"))
	apps, _ := strconv.Atoi(os.Getenv("FLEET_APPS"))
	host := strings.TrimPrefix(base, "http://")
	appName := func(a int) string { return fmt.Sprintf("FLEET-%04d", a) }

	// Each application's version, read once.
	index := map[string]string{}
	for a := range apps {
		resp, err := http.Get(base + "/eureka/apps/" + appName(a))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet watcher:", err)
			os.Exit(1)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		index[appName(a)] = resp.Header.Get("X-Heureka-Index")
	}
	var mu sync.Mutex
	var rep fleetReport
	for i := range n {
		app := appName(0)
		if i >= hot {
			app = appName(1 + (i-hot)%max(1, apps-1))
		}
		idx := index[app]
		go func() {
			for {
				status, next, err := parkOnce(host, app, idx)
				mu.Lock()
				switch {
				case err != nil:
					rep.Errors++
				case status == 200 && next != idx:
					if app == appName(0) {
						rep.Hot++
						rep.Times = append(rep.Times, time.Now().UnixNano())
					} else {
						rep.Cold++
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if next != "" {
					idx = next
				}
			}
		}()
		if i%500 == 499 {
			time.Sleep(50 * time.Millisecond) // do not overflow the listen backlog
		}
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		mu.Lock()
		out := rep
		if in.Text() == "times" {
			rep = fleetReport{}
		} else {
			out.Times = nil
		}
		line, _ := json.Marshal(out)
		mu.Unlock()
		fmt.Println(string(line))
	}
	os.Exit(0)
}

// parkOnce sends one blocking read of app's document on a connection of
// its own and returns the answer's status and X-Heureka-Index.
func parkOnce(host, app, idx string) (int, string, error) {
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(6 * time.Minute))
	if _, err := fmt.Fprintf(conn, "GET /eureka/apps/%s?index=%s&wait=5m HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", app, idx, host); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), nil)
	if err != nil {
		return 0, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Heureka-Index"), nil
}
