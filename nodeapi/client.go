package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/heureka-registry/heureka/opapi"
)

// Client calls another node's internal endpoints.
type Client struct {
	// HTTP sends the calls (its transport adds TLS and the cluster secret).
	HTTP *http.Client
	// Scheme is "http://" or "https://".
	Scheme string
	// From is this node's id, sent with every call.
	From string
	// Cluster is this node's cluster identity, sent with every call when
	// known (ClusterHeader).
	Cluster string
	// Codes turns error replies back into error values.
	Codes Codes
	// Unavailable is wrapped by every failure that is not an error reply:
	// the other node answered nothing readable (a connection that could not
	// even be made is ErrUnreachable instead).
	Unavailable error
}

// Call sends one internal call to the node at addr and returns the body of
// its 200 answer. Any other answer is a Reply naming the error, returned as
// its error value; a call that did not connect is ErrUnreachable.
func (c *Client) Call(ctx context.Context, method, addr, path, contentType string, body []byte) ([]byte, error) {
	resp, err := c.send(ctx, c.HTTP, method, addr, path, contentType, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read forward reply from %s: %v: %w", addr, err, c.Unavailable)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.replyError(addr, resp.StatusCode, data)
	}
	return data, nil
}

// send builds and sends one call; a transport failure is ErrUnreachable
// when the connection was never made, Unavailable otherwise.
func (c *Client) send(ctx context.Context, hc *http.Client, method, addr, path, contentType string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Scheme+addr+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build forward request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set(forwardedBy, c.From)
	if c.Cluster != "" {
		req.Header.Set(ClusterHeader, c.Cluster)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isDialError(err) {
			return nil, fmt.Errorf("forward to %s: %v: %w", addr, err, ErrUnreachable)
		}
		return nil, fmt.Errorf("forward to %s: %v: %w", addr, err, c.Unavailable)
	}
	return resp, nil
}

// replyError turns an error answer into its error value.
func (c *Client) replyError(addr string, status int, data []byte) error {
	var rep Reply
	if json.Unmarshal(data, &rep) == nil && rep.Code != "" {
		return c.Codes.err(rep.Code, rep.Message)
	}
	return fmt.Errorf("forward to %s: status %d: %w", addr, status, c.Unavailable)
}

func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// reply sends a call whose answer is a Reply and returns its index.
func (c *Client) reply(ctx context.Context, method, addr, path, contentType string, body []byte) (uint64, error) {
	data, err := c.Call(ctx, method, addr, path, contentType, body)
	if err != nil {
		return 0, err
	}
	var rep Reply
	if err := json.Unmarshal(data, &rep); err != nil {
		return 0, fmt.Errorf("forward to %s: unreadable reply: %w", addr, c.Unavailable)
	}
	return rep.Index, nil
}

// Apply forwards one encoded command to the leader at addr and returns the
// index it was applied at.
func (c *Client) Apply(ctx context.Context, addr string, entry []byte) (uint64, error) {
	return c.reply(ctx, http.MethodPost, addr, PathApply, "application/octet-stream", entry)
}

// PostJSON sends v as JSON to path (join, remove) at addr.
func (c *Client) PostJSON(ctx context.Context, addr, path string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode forward body: %w", err)
	}
	_, err = c.reply(ctx, http.MethodPost, addr, path, "application/json", body)
	return err
}

// ApplyBatch sends a sequence of encoded commands (a replayed journal) to
// the leader at addr: one error (nil when applied) per entry, and the
// highest index applied.
func (c *Client) ApplyBatch(ctx context.Context, addr string, entries [][]byte) ([]error, uint64, error) {
	return c.applyBatch(ctx, addr, PathApplyBatch, entries)
}

// ForwardBatch is ApplyBatch for writes of concurrent client requests,
// each judged by the leader as a lone Apply would be (marked in the query,
// so the batch format stays as it is; a leader that does not know the mark
// applies them as a sequence, which gives the same answers, an unknown
// instance's refusal then coming from the log).
func (c *Client) ForwardBatch(ctx context.Context, addr string, entries [][]byte) ([]error, uint64, error) {
	return c.applyBatch(ctx, addr, PathApplyBatch+"?"+forwardedQuery, entries)
}

func (c *Client) applyBatch(ctx context.Context, addr, path string, entries [][]byte) ([]error, uint64, error) {
	data, err := c.Call(ctx, http.MethodPost, addr, path, "application/octet-stream", EncodeEntries(entries))
	if err != nil {
		return nil, 0, err
	}
	var rep batchReply
	if err := json.Unmarshal(data, &rep); err != nil || len(rep.Results) != len(entries) {
		return nil, 0, fmt.Errorf("apply batch at %s: unreadable answer for %d entries: %w", addr, len(entries), c.Unavailable)
	}
	results := make([]error, len(entries))
	for i, r := range rep.Results {
		if r.Code != "" {
			results[i] = c.Codes.err(r.Code, r.Message)
		}
	}
	return results, rep.Index, nil
}

// RenewBatchKind says what the leader is to do with a batch of renewals.
// It travels in the query, so the binary batch format stays as it is.
type RenewBatchKind int

const (
	// RenewJudge: judge each renewal against the leader's state, record
	// those that hold and answer each; a client waits for the answer.
	RenewJudge RenewBatchKind = iota
	// RenewReplicated: as RenewJudge, for heartbeats an Eureka peer
	// replicated to the cluster.
	RenewReplicated
	// RenewAnswered: heartbeats of heureka's own clients that the sender
	// judged against its state and answered already: the leader records
	// them as they are. A leader of an earlier release, which does not
	// know the query, judges them.
	RenewAnswered
)

// renewBatchQueries is the query each kind of batch travels with.
var renewBatchQueries = map[RenewBatchKind]string{RenewReplicated: replicatedQuery, RenewAnswered: answeredQuery}

// renewBatchKindOf reads a batch's kind from its query; anything it does
// not know is judged.
func renewBatchKindOf(rawQuery string) RenewBatchKind {
	for kind, q := range renewBatchQueries {
		if rawQuery == q {
			return kind
		}
	}
	return RenewJudge
}

// RenewBatch sends an encoded batch of renewals of the given kind to the
// leader at addr and returns its encoded results.
func (c *Client) RenewBatch(ctx context.Context, addr string, kind RenewBatchKind, batch []byte) ([]byte, error) {
	path := PathRenewBatch
	if q := renewBatchQueries[kind]; q != "" {
		path += "?" + q
	}
	return c.Call(ctx, http.MethodPost, addr, path, "application/octet-stream", batch)
}

// ReadIndex asks the leader at addr for its read index.
func (c *Client) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	return c.reply(ctx, http.MethodGet, addr, PathReadIndex, "", nil)
}

// LeaseStatus asks the leader at addr for its lease status.
func (c *Client) LeaseStatus(ctx context.Context, addr string) (opapi.LeaseStatus, error) {
	var st opapi.LeaseStatus
	data, err := c.Call(ctx, http.MethodGet, addr, PathLeaseStatus, "", nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("lease status from %s: %w", addr, err)
	}
	return st, nil
}

// MemberView asks the node at addr whether id is a member.
func (c *Client) MemberView(ctx context.Context, addr, id string) (MemberView, error) {
	var v MemberView
	data, err := c.Call(ctx, http.MethodGet, addr, PathMembership+"?id="+url.QueryEscape(id), "", nil)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("membership from %s: %w", addr, err)
	}
	return v, nil
}

// FetchSnapshot downloads the leader's snapshot (at most limit bytes) into
// w. Unlike Call it has no client timeout (a snapshot may be large) and is
// bounded by ctx alone.
func (c *Client) FetchSnapshot(ctx context.Context, addr string, w *bytes.Buffer, limit int64) error {
	resp, err := c.untimed(ctx, http.MethodGet, addr, PathSnapshot, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	w.Reset()
	if _, err := io.Copy(w, io.LimitReader(resp.Body, limit)); err != nil {
		return fmt.Errorf("read snapshot from %s: %v: %w", addr, err, c.Unavailable)
	}
	return nil
}

// Restore sends a snapshot to the leader's restore endpoint, bounded by ctx
// alone like FetchSnapshot.
func (c *Client) Restore(ctx context.Context, addr string, data []byte) error {
	resp, err := c.untimed(ctx, http.MethodPost, addr, PathRestore, data)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// untimed sends a call without the client's timeout and returns its 200
// answer for the caller to read; any other answer is its error.
func (c *Client) untimed(ctx context.Context, method, addr, path string, body []byte) (*http.Response, error) {
	hc := &http.Client{Transport: c.HTTP.Transport}
	resp, err := c.send(ctx, hc, method, addr, path, "application/octet-stream", body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, c.replyError(addr, resp.StatusCode, data)
	}
	return resp, nil
}
