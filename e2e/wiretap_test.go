package e2e

// A recording proxy in front of each node, so a test can show which wire
// format a client really used: heureka's metrics do not break requests down
// by format, and the clients' own logs do not say what they sent.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// clientTagHeader names the client that sent a request; the Java clients'
// test filter (e2e/springclient WireFilter) sets it. Requests without it come
// from Spring's own RestTemplate transport.
const clientTagHeader = "X-Heureka-E2E-Client"

// wireRecord is one request a client sent through the tap.
type wireRecord struct {
	node                 string // the ID of the node behind the proxy
	client, method, path string
	accept, contentType  string // the request's
	body                 string // the request body's first non-blank character
	status               int
	answerType           string // the response's Content-Type
	answer               string // the response body's first non-blank character
}

// bodyKey carries a request body's first character from the handler to
// ModifyResponse (the proxied request keeps the incoming one's context).
type bodyKey struct{}

// firstChar is the first non-blank character of b, after gunzip when
// encoding says gzip ("" for an empty or unreadable body).
func firstChar(b []byte, encoding string) string {
	if strings.EqualFold(encoding, "gzip") && len(b) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return ""
		}
		if b, err = io.ReadAll(io.LimitReader(zr, 1<<10)); err != nil && len(b) == 0 {
			return ""
		}
	}
	if b = bytes.TrimSpace(b); len(b) == 0 {
		return ""
	}
	return string(b[:1])
}

// wireTap is one loopback reverse proxy per node (on a FreeAddr port),
// recording every request.
type wireTap struct {
	mu   sync.Mutex
	recs []wireRecord
	srvs map[*Node]*httptest.Server
}

// startWireTap starts a proxy in front of each node; they are closed at the
// end of the test.
func startWireTap(t *testing.T, nodes []*Node) *wireTap {
	t.Helper()
	w := &wireTap{srvs: map[*Node]*httptest.Server{}}
	for _, nd := range nodes {
		target, err := url.Parse(nd.BaseURL())
		if err != nil {
			t.Fatalf("node URL %q: %v", nd.BaseURL(), err)
		}
		rp := &httputil.ReverseProxy{
			Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
			Transport: &http.Transport{Proxy: nil},
			ModifyResponse: func(resp *http.Response) error {
				var answer string
				if resp.Request.Method == "GET" && resp.StatusCode == 200 {
					raw, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						return fmt.Errorf("wire tap: read the answer: %w", err)
					}
					resp.Body = io.NopCloser(bytes.NewReader(raw))
					answer = firstChar(raw, resp.Header.Get("Content-Encoding"))
				}
				w.record(nd.ID, resp.Request, resp.StatusCode, resp.Header.Get("Content-Type"), answer)
				return nil
			},
			ErrorHandler: func(rw http.ResponseWriter, r *http.Request, err error) {
				w.record(nd.ID, r, http.StatusBadGateway, "", "")
				http.Error(rw, "wire tap: "+err.Error(), http.StatusBadGateway)
			},
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" {
				raw, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(rw, "wire tap: read the request: "+err.Error(), http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(raw))
				r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, firstChar(raw, r.Header.Get("Content-Encoding"))))
			}
			rp.ServeHTTP(rw, r)
		}))
		addr := FreeAddr(t)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		w.srvs[nd] = srv
	}
	t.Cleanup(func() {
		for nd := range w.srvs {
			w.close(nd)
		}
	})
	return w
}

func (w *wireTap) record(node string, r *http.Request, status int, answerType, answer string) {
	client := r.Header.Get(clientTagHeader)
	if client == "" {
		client = "spring"
	}
	body, _ := r.Context().Value(bodyKey{}).(string)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, wireRecord{node: node, client: client, method: r.Method, path: r.URL.Path,
		accept: r.Header.Get("Accept"), contentType: r.Header.Get("Content-Type"), body: body,
		status: status, answerType: answerType, answer: answer})
}

// wireKind is what a Eureka client's request through the tap did:
// wireFull and wireDelta read the registry (GET /eureka/apps/,
// /eureka/apps/delta), wireRegister is POST /eureka/apps/{app},
// wireHeartbeat PUT /eureka/apps/{app}/{id}; wireOther is anything else.
type wireKind string

const (
	wireFull      wireKind = "full"
	wireDelta     wireKind = "delta"
	wireRegister  wireKind = "register"
	wireHeartbeat wireKind = "heartbeat"
	wireOther     wireKind = "other"
)

func (r wireRecord) kind() wireKind {
	p := strings.TrimSuffix(r.path, "/")
	switch {
	case r.method == "GET" && strings.HasSuffix(p, "/eureka/apps"):
		return wireFull
	case r.method == "GET" && strings.HasSuffix(p, "/eureka/apps/delta"):
		return wireDelta
	case r.method == "POST" && strings.Count(p, "/") == 3: // /eureka/apps/{app}
		return wireRegister
	case r.method == "PUT" && strings.Count(p, "/") == 4: // /eureka/apps/{app}/{id}
		return wireHeartbeat
	}
	return wireOther
}

// wireCounts is how many requests of each kind reached each node through
// the tap: node ID -> kind -> requests. answered counts those the node
// answered with a 2xx status; all counts every request.
type wireCounts struct {
	answered, all map[string]map[wireKind]int
}

// total is how many requests of any kind reached node.
func (c wireCounts) total(node string) int {
	n := 0
	for _, v := range c.all[node] {
		n += v
	}
	return n
}

// counts counts client's requests by node and kind.
func (w *wireTap) counts(client string) wireCounts {
	c := wireCounts{answered: map[string]map[wireKind]int{}, all: map[string]map[wireKind]int{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.recs {
		if r.client != client {
			continue
		}
		if c.all[r.node] == nil {
			c.all[r.node], c.answered[r.node] = map[wireKind]int{}, map[wireKind]int{}
		}
		c.all[r.node][r.kind()]++
		if r.status >= 200 && r.status < 300 {
			c.answered[r.node][r.kind()]++
		}
	}
	return c
}

// URL is the proxied form of nd.URL(path).
func (w *wireTap) URL(nd *Node, path string) string { return w.srvs[nd].URL + path }

// close stops nd's proxy: its clients then see a refused connection, as for
// the dead node behind it.
func (w *wireTap) close(nd *Node) {
	if s := w.srvs[nd]; s != nil {
		s.CloseClientConnections()
		s.Close()
		delete(w.srvs, nd)
	}
}

// mediaType is a Content-Type's media type ("" when there is none).
func mediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return v
	}
	return mt
}

// wireFirst is the first character of a document in each media type.
var wireFirst = map[string]string{"application/json": "{", "application/xml": "<"}

// check fails the test unless every registry read client made was answered
// in want (a media type, checked on the Content-Type and on the body's first
// character), every registration it sent was written in want, and it made at
// least one full fetch, one delta fetch, one registration and one
// heartbeat. It returns a one-line summary for the log.
func (w *wireTap) check(t *testing.T, client, want string) string {
	t.Helper()
	w.mu.Lock()
	recs := append([]wireRecord(nil), w.recs...)
	w.mu.Unlock()
	var full, delta, register, heartbeats int
	accepts := map[string]int{}
	var bad []string
	for _, r := range recs {
		if r.client != client {
			continue
		}
		accepts[r.accept]++
		switch k := r.kind(); {
		case (k == wireFull || k == wireDelta) && r.status == 200:
			if k == wireDelta {
				delta++
			} else {
				full++
			}
			if got := mediaType(r.answerType); got != want || r.answer != wireFirst[want] {
				bad = append(bad, fmt.Sprintf("GET %s answered %q starting with %q", r.path, r.answerType, r.answer))
			}
		case k == wireRegister:
			register++
			if got := mediaType(r.contentType); got != want || r.body != wireFirst[want] {
				bad = append(bad, fmt.Sprintf("POST %s sent as %q starting with %q", r.path, r.contentType, r.body))
			}
		case k == wireHeartbeat && r.status == 200:
			heartbeats++
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s: %d request(s) not in %s, e.g. %s", client, len(bad), want, strings.Join(head(bad, 5), "; "))
	}
	if full == 0 || delta == 0 || register == 0 || heartbeats == 0 {
		t.Errorf("%s: want at least one full fetch, delta, registration and heartbeat through the tap; got %d, %d, %d, %d",
			client, full, delta, register, heartbeats)
	}
	keys := make([]string, 0, len(accepts))
	for k := range accepts {
		keys = append(keys, fmt.Sprintf("%q×%d", k, accepts[k]))
	}
	sort.Strings(keys)
	return fmt.Sprintf("wire %s: %d registration(s) sent as %s (bodies starting %q), %d full + %d delta fetches answered %s (bodies starting %q), %d heartbeats; Accept sent: %s",
		client, register, want, wireFirst[want], full, delta, want, wireFirst[want], heartbeats, strings.Join(keys, ", "))
}
