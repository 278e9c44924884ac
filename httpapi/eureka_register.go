package httpapi

import (
	"fmt"
	"strings"

	"github.com/heureka-registry/heureka/fsm"
)

// The checks and fix-ups a register gets besides decoding, as
// eureka-server's resource makes them: the body's Content-Type, and the
// Amazon instance-id metadata key.

// checkRegisterType refuses a register body whose Content-Type is neither
// JSON nor XML with 415, as eureka-server's resource (which consumes only
// those two) does. A missing Content-Type is still sniffed from the body.
func checkRegisterType(contentType string) error {
	if strings.TrimSpace(contentType) == "" {
		return nil
	}
	mt, _, _ := strings.Cut(contentType, ";")
	typ, sub, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mt)), "/")
	switch {
	case typ == "application" && (sub == "json" || sub == "xml" || strings.HasSuffix(sub, "+json") || strings.HasSuffix(sub, "+xml")):
		return nil
	case typ == "text" && sub == "xml":
		return nil
	}
	return fmt.Errorf("content type %q: register takes application/json or application/xml: %w", contentType, errMediaType)
}

// normalizeRegister applies eureka-server's register-time fix-ups that are
// not part of decoding: an Amazon dataCenterInfo without an instance-id
// metadata key gets the instance's id there.
func normalizeRegister(in *fsm.Instance) {
	dc := &in.DataCenterInfo
	if dc.Name != "Amazon" {
		return
	}
	if _, ok := dc.Metadata.Get("instance-id"); ok {
		return
	}
	dc.Metadata = dc.Metadata.With(map[string]string{"instance-id": in.ID()})
}
