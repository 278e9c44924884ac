// Package instance writes a Eureka instance the way the Netflix Java
// client's JSON codec does: timestamps and isCoordinatingDiscoveryServer as
// strings, port objects with a numeric "$" and a string "@enabled", a MyOwn
// dataCenterInfo and the empty-metadata marker. The system tests (e2e) and
// `heureka bench` both register such instances and may not import each
// other, so the shape is kept here once; AppIDs reads back the instance
// ids of an application document, for the tools that check what a node
// lists (the lab, the compose tests).
//
// It imports no heureka package.
package instance

import "encoding/json"

// Fields are the parts of an instance its callers choose; the rest of the
// document is fixed.
type Fields struct {
	ID     string
	App    string
	Host   string // hostName; the URLs are http://<Host>:8080/...
	IP     string
	Status string
	// VIP is both vipAddress and secureVipAddress.
	VIP         string
	RenewalSecs int
	LeaseSecs   int
	// Metadata is the metadata object; nil writes the empty-map marker.
	Metadata map[string]any
	// Timestamp is lastUpdatedTimestamp and lastDirtyTimestamp, in
	// milliseconds written as a string.
	Timestamp string
}

// Doc returns the instance object (the value of "instance" in a register
// body) as a map the caller may change before encoding it.
func Doc(f Fields) map[string]any {
	base := "http://" + f.Host + ":8080"
	md := f.Metadata
	if md == nil {
		md = map[string]any{"@class": "java.util.Collections$EmptyMap"}
	}
	return map[string]any{
		"instanceId":       f.ID,
		"hostName":         f.Host,
		"app":              f.App,
		"ipAddr":           f.IP,
		"status":           f.Status,
		"overriddenStatus": "UNKNOWN",
		"port":             map[string]any{"$": 8080, "@enabled": "true"},
		"securePort":       map[string]any{"$": 8443, "@enabled": "false"},
		"countryId":        1,
		"dataCenterInfo": map[string]any{
			"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
			"name":   "MyOwn",
		},
		"leaseInfo": map[string]any{
			"renewalIntervalInSecs": f.RenewalSecs,
			"durationInSecs":        f.LeaseSecs,
			"registrationTimestamp": 0,
			"lastRenewalTimestamp":  0,
			"evictionTimestamp":     0,
			"serviceUpTimestamp":    0,
		},
		"metadata":                      md,
		"homePageUrl":                   base + "/",
		"statusPageUrl":                 base + "/actuator/info",
		"healthCheckUrl":                base + "/actuator/health",
		"vipAddress":                    f.VIP,
		"secureVipAddress":              f.VIP,
		"isCoordinatingDiscoveryServer": "false",
		"lastUpdatedTimestamp":          f.Timestamp,
		"lastDirtyTimestamp":            f.Timestamp,
	}
}

// AppIDs returns the instance ids of a JSON application document
// ({"application": {"instance": [...]}}, as heureka and eureka-server write
// it), in document order.
func AppIDs(body []byte) ([]string, error) {
	var doc struct {
		Application struct {
			Instance []struct {
				InstanceID string `json:"instanceId"`
			} `json:"instance"`
		} `json:"application"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(doc.Application.Instance))
	for _, in := range doc.Application.Instance {
		ids = append(ids, in.InstanceID)
	}
	return ids, nil
}
