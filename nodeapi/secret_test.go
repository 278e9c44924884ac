package nodeapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequireSecret(t *testing.T) {
	const secret = "0123456789abcdef"
	h := requireSecret(secret, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
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
	if SecretMatches(httptest.NewRequest("GET", "/", nil), "") {
		t.Fatal("an empty secret matched")
	}
}
