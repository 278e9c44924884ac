package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// importSource serves an eureka-server's GET /eureka/apps with the
// instances named by ids (app APP).
func importSource(t *testing.T, ids ...string) *httptest.Server {
	var entries []*fsm.Entry
	for _, id := range ids {
		in := &fsm.Instance{InstanceID: id, HostName: id + ".local", App: "APP", IPAddr: "10.0.0.1", Status: fsm.StatusUp,
			OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"},
			LastDirtyTimestamp: 1000}
		entries = append(entries, &fsm.Entry{App: in.App, ID: id, Instance: in})
	}
	doc := eureka.AppendApplications(nil, eureka.JSON, "1", "", [][]byte{eureka.AppendApplication(nil, eureka.JSON, "APP", entries)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestImportCmd: import exits 0 only when the target recorded every
// instance; a refusal names the instance and exits 1, and so does a target
// that answers anything but 204 (a peer batch's 200 included); an import
// that stopped prints no summary on stdout.
func TestImportCmd(t *testing.T) {
	src := importSource(t, "i-1", "bad")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if strings.Contains(body.String(), `"bad"`) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"Missing instanceId"}`))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	batchy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"responseList":[]}`))
	}))
	defer batchy.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	for _, tc := range []struct {
		name            string
		args            []string
		code            int
		stdout, stderrs string
	}{
		{"all recorded", []string{"--from", importSource(t, "i-1", "i-2").URL + "/eureka/", "--to", target.URL + "/eureka/"}, 0,
			"instances 2 registered 2 failed 0\n", ""},
		{"one refused", []string{"--from", src.URL + "/eureka/", "--to", target.URL + "/eureka/"}, 1,
			"instances 2 registered 1 failed 1\n", "APP/bad not registered: 400 Bad Request: Missing instanceId"},
		{"200 for a register", []string{"--from", src.URL + "/eureka/", "--to", batchy.URL + "/eureka/"}, 1,
			"instances 2 registered 0 failed 2\n", "2 of 2 instances not registered"},
		{"target down", []string{"--from", src.URL + "/eureka/", "--to", down.URL + "/eureka/"}, 1, "", "import stopped after 0 of 2"},
		{"source down", []string{"--from", down.URL + "/eureka/", "--to", target.URL + "/eureka/"}, 1, "", "fetch apps"},
		{"help", []string{"--help"}, 0, "Usage: heureka import --from URL", ""},
		{"no --from", nil, 2, "", "--from is required"},
		{"bad --to", []string{"--from", src.URL, "--to", "http://[::1"}, 2, "", "--to"},
		{"stray argument", []string{"--from", src.URL, "extra"}, 2, "", "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		code := importCmd(tc.args, &out, &errb)
		if code != tc.code || !strings.HasPrefix(out.String(), tc.stdout) || (tc.stdout == "" && out.Len() > 0) ||
			!strings.Contains(errb.String(), tc.stderrs) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tc.name, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderrs)
		}
	}
}
