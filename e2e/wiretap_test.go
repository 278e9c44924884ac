package e2e

// A recording proxy in front of each node, so a test can show which wire
// format a client really used: heureka's metrics do not break requests down
// by format, and the clients' own logs do not say what they sent.

import (
	"fmt"
	"mime"
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
	client, method, path string
	accept, contentType  string // the request's
	status               int
	answerType           string // the response's Content-Type
}

// wireTap is one loopback reverse proxy per node, recording every request.
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
				w.record(resp.Request, resp.StatusCode, resp.Header.Get("Content-Type"))
				return nil
			},
			ErrorHandler: func(rw http.ResponseWriter, r *http.Request, err error) {
				w.record(r, http.StatusBadGateway, "")
				http.Error(rw, "wire tap: "+err.Error(), http.StatusBadGateway)
			},
		}
		w.srvs[nd] = httptest.NewServer(rp)
	}
	t.Cleanup(func() {
		for nd := range w.srvs {
			w.close(nd)
		}
	})
	return w
}

func (w *wireTap) record(r *http.Request, status int, answerType string) {
	client := r.Header.Get(clientTagHeader)
	if client == "" {
		client = "spring"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, wireRecord{client: client, method: r.Method, path: r.URL.Path,
		accept: r.Header.Get("Accept"), contentType: r.Header.Get("Content-Type"),
		status: status, answerType: answerType})
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

// check fails the test unless every registry read client made was answered
// in want (a media type), every registration it sent was written in want,
// and it made at least one full fetch, one delta fetch and one
// registration. It returns a one-line summary for the log.
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
		p := strings.TrimSuffix(r.path, "/")
		switch {
		case r.method == "GET" && r.status == 200 && (strings.HasSuffix(p, "/eureka/apps") || strings.HasSuffix(p, "/eureka/apps/delta")):
			if strings.HasSuffix(p, "/delta") {
				delta++
			} else {
				full++
			}
			if got := mediaType(r.answerType); got != want {
				bad = append(bad, fmt.Sprintf("GET %s answered %q", r.path, r.answerType))
			}
		case r.method == "POST" && strings.Count(p, "/") == 3: // /eureka/apps/{app}
			register++
			if got := mediaType(r.contentType); got != want {
				bad = append(bad, fmt.Sprintf("POST %s sent as %q", r.path, r.contentType))
			}
		case r.method == "PUT" && r.status == 200 && strings.Count(p, "/") == 4: // /eureka/apps/{app}/{id}
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
	return fmt.Sprintf("wire %s: %d registration(s) sent as %s, %d full + %d delta fetches answered %s, %d heartbeats; Accept sent: %s",
		client, register, want, full, delta, want, heartbeats, strings.Join(keys, ", "))
}
