package launch

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// Send sends one request through client and reads the whole answer: its
// status code, body and headers. Accept is application/json and, when body
// is non-nil, so is Content-Type; hdr adds headers or replaces these.
func Send(ctx context.Context, client *http.Client, method, url string, body []byte, hdr http.Header) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	return Read(client, req)
}

// Read sends req through client and reads the whole answer: its status
// code, body and headers. The body is nil when it could not be read.
func Read(client *http.Client, req *http.Request) (int, []byte, http.Header, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, resp.Header, err
	}
	return resp.StatusCode, body, resp.Header, nil
}
