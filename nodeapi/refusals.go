package nodeapi

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// RefusalLogEvery is how often a refused remote host is logged at most.
const RefusalLogEvery = 10 * time.Second

// RefusalLog rate-limits log lines about refused connections and calls per
// key (a remote host), so that a scanner or a misconfigured peer retrying
// every few milliseconds cannot flood the log; the next line logged for a
// key says how many were left out.
type RefusalLog struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[string]*refusalEntry
}

type refusalEntry struct {
	last       time.Time
	suppressed int
}

// maxRefusalKeys bounds the map; past it, it starts afresh (a flood from
// many addresses then logs more, never grows memory).
const maxRefusalKeys = 1024

// NewRefusalLog logs each key at most once per every.
func NewRefusalLog(every time.Duration) *RefusalLog {
	return &RefusalLog{every: every, seen: map[string]*refusalEntry{}}
}

// Allow reports whether to log for key now, and how many were suppressed.
func (l *RefusalLog) Allow(key string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.seen[key]
	if !ok {
		if len(l.seen) >= maxRefusalKeys {
			l.seen = map[string]*refusalEntry{}
		}
		l.seen[key] = &refusalEntry{last: now}
		return 0, true
	}
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return 0, false
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return n, true
}

// CallRefused logs a call refused for want of the cluster secret, at most
// once per remote host per the log's interval: the remote address, the
// node the caller names (CallerHeader, "" for a caller that names none),
// the call and why. A nil l or log logs nothing.
func (l *RefusalLog) CallRefused(log hclog.Logger, r *http.Request, reason string) {
	if l == nil || log == nil {
		return
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if suppressed, ok := l.Allow(host, time.Now()); ok {
		log.Warn("cluster call refused", "remote", r.RemoteAddr, "claimed_node", r.Header.Get(CallerHeader),
			"call", r.Method+" "+r.URL.Path, "reason", reason, "suppressed_since_last", suppressed)
	}
}
