package nodeapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestRequireSecret(t *testing.T) {
	const secret = "0123456789abcdef"
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs})
	h := requireSecret(secret, log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range []struct {
		client *http.Client
		want   int
	}{
		{http.DefaultClient, http.StatusUnauthorized},
		{&http.Client{Transport: WithSecret(http.DefaultTransport, "0123456789abcdeX")}, http.StatusForbidden},
		{&http.Client{Transport: WithSecret(http.DefaultTransport, secret+"x")}, http.StatusForbidden},
		{&http.Client{Transport: WithSecret(http.DefaultTransport, secret)}, 299},
	} {
		resp, err := c.client.Post(srv.URL+PathApply, "application/octet-stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("status %d, want %d", resp.StatusCode, c.want)
		}
	}
	// The refusals are logged once for the host (rate-limited), naming
	// the caller and the call.
	if n := strings.Count(logs.String(), "cluster call refused"); n != 1 {
		t.Fatalf("%d refusal lines, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "call=\"POST "+PathApply+"\"") || !strings.Contains(logs.String(), "remote=127.0.0.1:") {
		t.Fatalf("refusal line: %s", logs.String())
	}
	if SecretMatches(httptest.NewRequest("GET", "/", nil), "") {
		t.Fatal("an empty secret matched")
	}
}
