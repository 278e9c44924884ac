package bench

import (
	"net/http"
	"strconv"
)

// LimitHandler answers every request with the same bytes and headers: the
// least work an HTTP server on this machine can do per request, as the
// yardstick for cached reads.
func LimitHandler(body []byte, header http.Header) http.Handler {
	length := strconv.Itoa(len(body))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for k, v := range header {
			h[k] = v
		}
		h.Set("Content-Length", length)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
}
