package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/fsm"
)

// newPushServer is a server with the default cache: readOnly on, changes
// pushed into it.
func newPushServer(t *testing.T) (*httptest.Server, *Server) {
	t.Helper()
	return startTestServer(t, DefaultConfig(), &fakeCluster{fsm: fsm.New(0, nil)}, hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}))
}

func register(t *testing.T, base, app, id string) {
	t.Helper()
	if err := registerErr(base, app, id); err != nil {
		t.Fatal(err)
	}
}

// registerErr is register for a goroutine other than the test's, which
// may not call t.Fatal.
func registerErr(base, app, id string) error {
	resp, err := http.Post(base+"/eureka/apps/"+app, "application/json", strings.NewReader(instanceJSON(app, id)))
	if err != nil {
		return fmt.Errorf("register %s/%s: %w", app, id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("register %s/%s: %d %s", app, id, resp.StatusCode, b)
	}
	return nil
}

func index(t *testing.T, hdr http.Header) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(hdr.Get(IndexHeader), 10, 64)
	if err != nil {
		t.Fatalf("%s header %q: %v", IndexHeader, hdr.Get(IndexHeader), err)
	}
	return n
}

type answer struct {
	code int
	body string
	hdr  http.Header
}

// async issues a GET in the background.
func async(t *testing.T, url string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		code, body, hdr := do(t, "GET", url, "", "", "Accept", "application/json")
		out <- answer{code, body, hdr}
	}()
	return out
}

// newShortTimeoutServer is a server whose read and write timeouts (100
// ms) end long before a blocking read's wait.
func newShortTimeoutServer(t *testing.T) (*Server, *httptest.Server) {
	s := newBareServer(t)
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config.ReadTimeout = 100 * time.Millisecond
	ts.Config.WriteTimeout = 100 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	return s, ts
}

// getAlone GETs url on a connection of its own (Go's client would
// silently retry a GET that failed on a reused one, hiding a cut-off
// answer) and sends the answer, or the error as its body.
func getAlone(url string) <-chan answer {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Get(url)
		if err != nil {
			got <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b), resp.Header}
	}()
	return got
}

// waitParked waits until n reads are parked in the server.
func waitParked(t *testing.T, s *Server, n int64) {
	t.Helper()
	for i := 0; i < 500 && s.Waiting() != n; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.Waiting(); got != n {
		t.Fatalf("%d reads waiting, want %d", got, n)
	}
}

func TestBlocking_EveryReadCarriesItsIndex(t *testing.T) {
	ts, _ := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	register(t, ts.URL, "B", "b-1")
	for _, p := range []string{"/apps", "/apps/delta", "/apps/B", "/apps/B/b-1", "/instances/b-1", "/vips/svc", "/svips/none"} {
		code, _, hdr := do(t, "GET", ts.URL+"/eureka"+p, "", "", "Accept", "application/json")
		if code != 200 {
			t.Fatalf("GET %s: %d", p, code)
		}
		// B was registered by the second write, at index 2.
		if got := index(t, hdr); got != 2 {
			t.Fatalf("GET %s: index %d, want 2", p, got)
		}
	}
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "")
	if got := index(t, hdr); got != 1 {
		t.Fatalf("an application's index is its own last change: %d, want 1", got)
	}
}

func TestBlocking_WakesOnChangeOfItsDocumentOnly(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	register(t, ts.URL, "B", "b-1")
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "")
	n := index(t, hdr)
	got := async(t, ts.URL+"/eureka/apps/A?index="+strconv.FormatUint(n, 10)+"&wait=1m")
	waitParked(t, s, 1)
	register(t, ts.URL, "B", "b-2") // another application: no answer
	time.Sleep(50 * time.Millisecond)
	select {
	case a := <-got:
		t.Fatalf("woken by a change of another application: %d %s", a.code, a.body)
	default:
	}
	register(t, ts.URL, "A", "a-2")
	select {
	case a := <-got:
		if a.code != 200 || !strings.Contains(a.body, `"a-2"`) || index(t, a.hdr) <= n {
			t.Fatalf("woken answer: %d %v %s", a.code, a.hdr, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocking read not woken by a change of its application")
	}
	waitParked(t, s, 0)
}

func TestBlocking_CurrentOrOlderIndexAnswersAtOnceAndWaitEnds(t *testing.T) {
	ts, _ := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	if code, _, hdr := do(t, "GET", ts.URL+"/eureka/apps?index=0", "", ""); code != 200 || index(t, hdr) != 1 {
		t.Fatalf("index 0: %d %v", code, hdr)
	}
	code, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/delta?index=1&wait=50ms", "", "")
	if code != 200 || index(t, hdr) != 1 {
		t.Fatalf("wait ended: %d %v", code, hdr)
	}
}

func TestBlocking_MissingDocuments(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	// A missing application with index 0 waits for it to appear.
	got := async(t, ts.URL+"/eureka/apps/NEW?index=0")
	waitParked(t, s, 1)
	register(t, ts.URL, "NEW", "n-1")
	if a := <-got; a.code != 200 || !strings.Contains(a.body, `"n-1"`) {
		t.Fatalf("appeared: %d %s", a.code, a.body)
	}
	// An application that goes away while read with its index answers 404.
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "")
	got = async(t, ts.URL+"/eureka/apps/A?index="+hdr.Get(IndexHeader))
	waitParked(t, s, 1)
	if code, _, _ := do(t, "DELETE", ts.URL+"/eureka/apps/A/a-1", "", ""); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if a := <-got; a.code != 404 {
		t.Fatalf("gone: %d %s", a.code, a.body)
	}
	// ... and an instance read likewise.
	_, _, hdr = do(t, "GET", ts.URL+"/eureka/apps/NEW/n-1", "", "")
	got = async(t, ts.URL+"/eureka/apps/NEW/n-1?index="+hdr.Get(IndexHeader))
	waitParked(t, s, 1)
	do(t, "PUT", ts.URL+"/eureka/apps/NEW/n-1/status?value=OUT_OF_SERVICE", "", "")
	if a := <-got; a.code != 200 || !strings.Contains(a.body, "OUT_OF_SERVICE") {
		t.Fatalf("instance change: %d %s", a.code, a.body)
	}
}

func TestBlocking_ClosedClientReleasesItsWaiter(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/eureka/apps/A?index=1&wait=5m", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitParked(t, s, 1)
	cancel()
	<-done
	waitParked(t, s, 0)
}

func TestBlocking_BadParameters(t *testing.T) {
	ts, _ := newPushServer(t)
	for _, q := range []string{"index=x", "index=-1", "index=1&wait=soon", "index=1&wait=-1s", "wait=10s"} {
		code, body, _ := do(t, "GET", ts.URL+"/eureka/apps?"+q, "", "")
		if code != 400 || !strings.Contains(body, "error") {
			t.Fatalf("?%s: %d %s", q, code, body)
		}
	}
	if b, ok, err := parseBlockingQuery("index=3&wait=900"); err != nil || !ok || b.index != 3 || b.wait != maxBlockingWait {
		t.Fatalf("wait is capped: %+v %v %v", b, ok, err)
	}
	if b, _, _ := parseBlockingQuery("index=3&wait=7"); b.wait != 7*time.Second {
		t.Fatalf("bare seconds: %v", b.wait)
	}
	if b, _, _ := parseBlockingQuery("index=3"); b.wait != defaultBlockingWait {
		t.Fatalf("default wait: %v", b.wait)
	}
}

func parseBlockingQuery(raw string) (blocking, bool, error) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("GET", "/eureka/apps?"+raw, nil)
	return parseBlocking(c)
}

// TestBlocking_OutlastsServerTimeouts: the server's read and write
// timeouts (short here, 30 s and 60 s in `heureka serve`) must not cut a
// blocking read off before its wait ends.
func TestBlocking_OutlastsServerTimeouts(t *testing.T) {
	s, ts := newShortTimeoutServer(t)
	register(t, ts.URL, "A", "a-1")
	got := getAlone(ts.URL + "/eureka/apps/A?index=1&wait=2s")
	waitParked(t, s, 1)
	time.Sleep(500 * time.Millisecond) // past both timeouts
	if s.Waiting() != 1 {
		t.Fatal("the server's timeouts ended the blocking read")
	}
	register(t, ts.URL, "A", "a-2")
	if a := <-got; a.code != 200 || !strings.Contains(a.body, "<instanceId>a-2</instanceId>") {
		t.Fatalf("after the change: %d %.300s", a.code, a.body)
	}
}

func TestBlocking_ParkedAnswerIsACompleteEurekaAnswer(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	got := async(t, ts.URL+"/eureka/apps/A?index=1")
	waitParked(t, s, 1)
	s.lot.mu.Lock()
	n := len(s.lot.all)
	s.lot.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d reads in the parking lot, want the waiting one", n)
	}
	register(t, ts.URL, "A", "a-2")
	a := <-got
	if a.code != 200 || !strings.Contains(a.body, `"a-2"`) || a.hdr.Get("X-Heureka-Node") != "n1" ||
		a.hdr.Get("Content-Type") != "application/json" || a.hdr.Get(IndexHeader) != "2" {
		t.Fatalf("parked answer: %d %v %.200s", a.code, a.hdr, a.body)
	}
	// gzip, and a wait that ends without a change.
	// Asked for explicitly, gzip is not undone by the client.
	code, z, hdr := do(t, "GET", ts.URL+"/eureka/apps/A?index=2&wait=100ms", "", "", "Accept-Encoding", "gzip")
	body := gunzipString(t, []byte(z))
	if code != 200 || hdr.Get(IndexHeader) != "2" || !strings.Contains(body, "<instanceId>a-2</instanceId>") {
		t.Fatalf("wait ended: %d %v %.200s", code, hdr, body)
	}
	waitParked(t, s, 0)
}

func TestBlocking_CloseReleasesParkedReads(t *testing.T) {
	s, err := New(DefaultConfig(), &fakeCluster{fsm: fsm.New(0, nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	register(t, ts.URL, "A", "a-1")
	done := make(chan error, 1)
	// A connection of its own: the client would retry a GET cut off on a
	// reused one.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		resp, err := client.Get(ts.URL + "/eureka/apps/A?index=1&wait=5m")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitParked(t, s, 1)
	s.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a parked read outlived Close")
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d reads still counted as waiting", s.Waiting())
	}
}

// TestBlocking_HTTP2WaitsInTheHandler: HTTP/2 connections cannot be taken
// over; their blocking reads wait in the handler, woken the same way.
func TestBlocking_HTTP2WaitsInTheHandler(t *testing.T) {
	s := newBareServer(t)
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	client := ts.Client()
	get := func(path string) (*http.Response, string) {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/eureka/apps/A", strings.NewReader(instanceJSON("A", "a-1")))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("register: %v %v", resp, err)
	}
	got := make(chan string, 1)
	go func() {
		resp, body := get("/eureka/apps/A?index=1")
		if resp != nil && resp.ProtoMajor != 2 {
			body = "not HTTP/2: " + resp.Proto
		}
		got <- body
	}()
	waitParked(t, s, 1)
	s.lot.mu.Lock()
	parked := len(s.lot.all)
	s.lot.mu.Unlock()
	if parked != 0 {
		t.Fatal("an HTTP/2 read was parked")
	}
	req, _ = http.NewRequest("POST", ts.URL+"/eureka/apps/A", strings.NewReader(instanceJSON("A", "a-2")))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("register: %v %v", resp, err)
	}
	if body := <-got; !strings.Contains(body, "<instanceId>a-2</instanceId>") {
		t.Fatalf("woken answer: %.300s", body)
	}
}

// rawExchange sends a request as written on its own connection and
// returns everything the server sent until it closed the connection.
func rawExchange(t *testing.T, addr, request string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading the answer: %v (got %q)", err, b)
	}
	return string(b)
}

// TestBlocking_ParkedAnswerIsTheReadsOwn: a parked read answers what the
// same read gets without waiting: HEAD gets headers only, and a v1 XML
// read its statuses rewritten (OUT_OF_SERVICE reads as DOWN).
func TestBlocking_ParkedAnswerIsTheReadsOwn(t *testing.T) {
	ts, _ := newPushServer(t)
	register(t, ts.URL, "APP1", "i-1")
	if code, _, _ := do(t, "PUT", ts.URL+"/eureka/apps/APP1/i-1/status?value=OUT_OF_SERVICE", "", ""); code != 200 {
		t.Fatalf("status override: %d", code)
	}

	_, plain, hdr := do(t, "GET", ts.URL+"/eureka/v1/apps/APP1", "", "", "Accept", "application/xml")
	if !strings.Contains(plain, "<status>DOWN</status>") {
		t.Fatalf("v1 read: %s", plain)
	}
	at := strconv.FormatUint(index(t, hdr), 10)
	code, parked, phdr := do(t, "GET", ts.URL+"/eureka/v1/apps/APP1?index="+at+"&wait=100ms", "", "", "Accept", "application/xml")
	if code != 200 || parked != plain || phdr.Get("Content-Length") != hdr.Get("Content-Length") {
		t.Fatalf("parked v1 read: %d %v\n%s\nwant\n%s", code, phdr, parked, plain)
	}

	_, z, hdr := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept-Encoding", "gzip")
	at = strconv.FormatUint(index(t, hdr), 10)
	answer := rawExchange(t, ts.Listener.Addr().String(),
		"HEAD /eureka/apps?index="+at+"&wait=100ms HTTP/1.1\r\nHost: heureka\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
	head, rest, _ := strings.Cut(answer, "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 200 ") || rest != "" {
		t.Fatalf("parked HEAD sent a %d-byte body: %q", len(rest), answer)
	}
	if want := "Content-Length: " + strconv.Itoa(len(z)); !strings.Contains(head, want) {
		t.Fatalf("parked HEAD headers lack %q:\n%s", want, head)
	}
}

// TestBlocking_ParkedConnectionServesTheNextRead: once a parked read is
// answered, its connection serves the client's next request (a follower of
// a document reads again at once), parked or not; a client that asked for
// Connection: close, or sent a request ahead, gets its connection closed.
func TestBlocking_ParkedConnectionServesTheNextRead(t *testing.T) {
	ts, _ := newPushServer(t)
	register(t, ts.URL, "APP1", "i-1")
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/APP1", "", "")
	at := index(t, hdr)

	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	read := func(req string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	get := func(index uint64, extra string) string {
		return "GET /eureka/apps/APP1?index=" + strconv.FormatUint(index, 10) + "&wait=10s HTTP/1.1\r\nHost: heureka\r\nAccept: application/json\r\n" + extra + "\r\n"
	}
	// registerSoon registers id 50 ms from now, while a read is parked;
	// its caller waits for it once the read is answered (the parked read
	// may be answered before the registration's own answer arrives, and
	// the registration must not outlive the test).
	registerSoon := func(id string) (wait func()) {
		done := make(chan error, 1)
		time.AfterFunc(50*time.Millisecond, func() { done <- registerErr(ts.URL, "APP1", id) })
		return func() {
			t.Helper()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 2; i <= 4; i++ {
		registered := registerSoon("i-" + strconv.Itoa(i))
		resp := read(get(at, ""))
		registered()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("parked read %d: %d, close %v", i, resp.StatusCode, resp.Close)
		}
		next := index(t, resp.Header)
		if next <= at {
			t.Fatalf("parked read %d answered version %d, not above %d", i, next, at)
		}
		at = next
	}
	// An ordinary read on the same connection.
	if resp := read("GET /eureka/apps/APP1 HTTP/1.1\r\nHost: heureka\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("plain read on the reused connection: %d", resp.StatusCode)
	}

	// Connection: close is honoured.
	registered := registerSoon("i-5")
	if resp := read(get(at, "Connection: close\r\n")); !resp.Close {
		t.Fatal("a parked read that asked for Connection: close kept its connection")
	}
	registered()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after Connection: close: %v", err)
	}

	// A request sent ahead of the answer: the server read it into the
	// buffer it gives up, so the connection is closed rather than reused.
	_, _, hdr = do(t, "GET", ts.URL+"/eureka/apps/APP1", "", "")
	at = index(t, hdr)
	conn2, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_ = conn2.SetDeadline(time.Now().Add(20 * time.Second))
	registered = registerSoon("i-6")
	if _, err := io.WriteString(conn2, get(at, "")+"GET /eureka/apps/APP1 HTTP/1.1\r\nHost: heureka\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn2)
	if err != nil {
		t.Fatalf("pipelined: %v", err)
	}
	registered()
	if n := strings.Count(string(b), "HTTP/1.1 "); n < 1 || !strings.Contains(string(b), "Connection: close") {
		t.Fatalf("pipelined request: %d answers, want the parked read's with Connection: close:\n%.400s", n, b)
	}
}
