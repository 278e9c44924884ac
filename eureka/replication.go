package eureka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// ReplicationHeader marks a request an Eureka peer replicated to this server
// (value "true"): eureka-server applies it with its replication rules and
// never replicates it further.
const ReplicationHeader = "x-netflix-discovery-replication"

// Replication actions, as eureka-server names them in a batch.
const (
	ActionRegister             = "Register"
	ActionHeartbeat            = "Heartbeat"
	ActionCancel               = "Cancel"
	ActionStatusUpdate         = "StatusUpdate"
	ActionDeleteStatusOverride = "DeleteStatusOverride"
)

// ValidAction reports whether a is one of the five replication actions.
func ValidAction(a string) bool {
	switch a {
	case ActionRegister, ActionHeartbeat, ActionCancel, ActionStatusUpdate, ActionDeleteStatusOverride:
		return true
	}
	return false
}

// ReplicationList is the body of POST /peerreplication/batch.
type ReplicationList struct {
	ReplicationList []ReplicationInstance `json:"replicationList"`
}

// ReplicationInstance is one replicated change. InstanceInfo is the bare
// instance object (no {"instance": ...} wrapper), set for Register.
type ReplicationInstance struct {
	AppName            string          `json:"appName"`
	ID                 string          `json:"id"`
	LastDirtyTimestamp *Millis         `json:"lastDirtyTimestamp,omitempty"`
	OverriddenStatus   *string         `json:"overriddenStatus,omitempty"`
	Status             *string         `json:"status,omitempty"`
	InstanceInfo       json.RawMessage `json:"instanceInfo,omitempty"`
	Action             *string         `json:"action"`
}

// ReplicationListResponse is the answer to a batch: one response per item,
// in order.
type ReplicationListResponse struct {
	ResponseList []ReplicationInstanceResponse `json:"responseList"`
}

// ReplicationInstanceResponse is the answer to one item. ResponseEntity is
// the receiver's record on a 409 to a heartbeat (bare instance object).
type ReplicationInstanceResponse struct {
	StatusCode     int             `json:"statusCode"`
	ResponseEntity json.RawMessage `json:"responseEntity,omitempty"`
}

// Millis is an epoch-millisecond value that, like Jackson's Long, reads from
// a JSON number or a numeric string.
type Millis int64

// UnmarshalJSON implements json.Unmarshaler.
func (m *Millis) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '"' {
		b = b[1 : len(b)-1]
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("lastDirtyTimestamp %s is not a number", b)
	}
	*m = Millis(n)
	return nil
}

// DecodeReplicationList decodes a batch body strictly: a body that is not
// JSON, is cut short, names an unknown action or has a field of the wrong
// type is refused as a whole (as eureka-server's Jackson reader refuses it),
// so nothing of a bad batch is applied. A missing action or instanceInfo is
// left for the caller: eureka-server answers such an item with 500.
func DecodeReplicationList(body []byte) (ReplicationList, error) {
	var l ReplicationList
	if err := json.Unmarshal(body, &l); err != nil {
		return l, badRequest("cannot parse request body: %v", err)
	}
	for i, it := range l.ReplicationList {
		if it.Action != nil && !ValidAction(*it.Action) {
			return l, badRequest("cannot parse request body: item %d: unknown action %q", i, *it.Action)
		}
	}
	return l, nil
}
