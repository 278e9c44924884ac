package eureka

import (
	"strings"
	"unicode/utf8"

	"github.com/heureka-registry/heureka/fsm"
)

// The fixtures mirror the registry of docs/eureka-api.md, "Example": ORDER-SERVICE with
// two instances (one OUT_OF_SERVICE with empty metadata) and PAYMENTS on
// Amazon without an instanceId.

// orderService is an UP ORDER-SERVICE instance on ip, without metadata or
// timestamps: what the two ORDER-SERVICE fixtures share.
func orderService(ip string) *fsm.Entry {
	id, base := ip+":order-service:8080", "http://"+ip+":8080"
	return &fsm.Entry{
		App: "ORDER-SERVICE", ID: id,
		Instance: &fsm.Instance{
			InstanceID: id, HostName: ip, App: "ORDER-SERVICE",
			IPAddr: ip, Sid: "na", Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown,
			Port: 8080, PortEnabled: true, SecurePort: 443, CountryID: 1,
			DataCenterInfo:      fsm.DataCenterInfo{Class: classDefaultInfo, Name: "MyOwn"},
			RenewalIntervalSecs: 30, DurationSecs: 90,
			HomePageURL:    base + "/",
			StatusPageURL:  base + "/actuator/info",
			HealthCheckURL: base + "/actuator/health",
			VIPAddress:     "order-service", SecureVIPAddress: "order-service",
		},
	}
}

func orderA() *fsm.Entry {
	e := orderService("10.20.1.15")
	e.Instance.Metadata = fsm.MetadataOf(map[string]string{"management.port": "8081", "zone": "rack-a"})
	e.Instance.LastDirtyTimestamp = 1717999998877
	e.RegistrationTs, e.LastRenewalTs, e.ServiceUpTs = 1718000000123, 1718000480311, 1718000000120
	e.LastUpdatedTs, e.ActionType = 1718000000123, fsm.ActionAdded
	return e
}

func orderB() *fsm.Entry {
	e := orderService("10.20.1.16")
	e.Override, e.Instance.Status, e.Instance.OverriddenStatus = fsm.StatusOutOfService, fsm.StatusOutOfService, fsm.StatusOutOfService
	e.Instance.LastDirtyTimestamp = 1718000004410
	e.RegistrationTs, e.LastRenewalTs, e.ServiceUpTs = 1718000005001, 1718000485990, 1718000005001
	e.LastUpdatedTs, e.ActionType = 1718000300002, fsm.ActionModified
	return e
}

func payments() *fsm.Entry {
	return &fsm.Entry{
		App: "PAYMENTS", ID: "i-0abc12de34f567890",
		Instance: &fsm.Instance{
			HostName: "ip-172-31-8-40.ec2.internal", App: "PAYMENTS", IPAddr: "172.31.8.40", Sid: "na",
			Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown,
			Port: 7001, PortEnabled: true, SecurePort: 7002, CountryID: 1,
			DataCenterInfo: fsm.DataCenterInfo{Class: classAmazonInfo, Name: "Amazon", Metadata: fsm.MetadataOf(map[string]string{
				"instance-id":       "i-0abc12de34f567890",
				"availability-zone": "us-east-1c",
				"local-ipv4":        "172.31.8.40",
				"local-hostname":    "ip-172-31-8-40.ec2.internal",
				"instance-type":     "m5.large",
				"ami-id":            "ami-0fedcba9876543210",
			})},
			RenewalIntervalSecs: 30, DurationSecs: 90,
			AppGroupName:       "CHECKOUT",
			HomePageURL:        "http://ip-172-31-8-40.ec2.internal:7001/",
			StatusPageURL:      "http://ip-172-31-8-40.ec2.internal:7001/Status",
			HealthCheckURL:     "http://ip-172-31-8-40.ec2.internal:7001/healthcheck",
			VIPAddress:         "payments,payments-internal",
			LastDirtyTimestamp: 1718000100250,
			ASGName:            "payments-v042",
		},
		RegistrationTs: 1718000100500, LastRenewalTs: 1718000490700, ServiceUpTs: 1718000100498,
		LastUpdatedTs: 1718000100500, ActionType: fsm.ActionAdded,
	}
}

// paymentsDeleted is payments as a DELETED delta entry (docs/eureka-api.md, "Delta").
func paymentsDeleted() *fsm.Entry {
	e := payments()
	e.EvictionTs, e.LastUpdatedTs, e.ActionType = 1718000600100, 1718000600100, fsm.ActionDeleted
	return e
}

// registry encodes the docs/eureka-api.md, "Example" registry.
func registry(f Format) []byte {
	return AppendApplications(nil, f, "1", "OUT_OF_SERVICE_1_UP_2_", [][]byte{
		AppendApplication(nil, f, "ORDER-SERVICE", []*fsm.Entry{orderA(), orderB()}),
		AppendApplication(nil, f, "PAYMENTS", []*fsm.Entry{payments()}),
	})
}

// oddEntry exercises escaping, optional fields and XStream name escaping.
func oddEntry() *fsm.Entry {
	return &fsm.Entry{
		App: "ODD_APP", ID: `id <&> "quoted" 'x'`, Override: fsm.StatusDown,
		Instance: &fsm.Instance{
			InstanceID: `id <&> "quoted" 'x'`, HostName: "höst\t\n\r\\/", App: "ODD_APP", IPAddr: "::1",
			Sid: "s-1", Status: fsm.StatusStarting, OverriddenStatus: fsm.StatusDown,
			Port: -1, PortEnabled: false, SecurePort: 65535, SecurePortEnabled: true, CountryID: -7,
			DataCenterInfo:      fsm.DataCenterInfo{Class: classAmazonInfo, Name: "Amazon"},
			RenewalIntervalSecs: 5, DurationSecs: 2147483647,
			Metadata: fsm.MetadataOf(map[string]string{
				"a_b": "under", "$dollar": "d", "x.y-z": "]]>", "emoji": "😀 ünïcödé", "empty": "",
				"__": "double", "_-": "mixed", "ws": "  spaced  ",
			}),
			AppGroupName: "GROUP", HomePageURL: "h", StatusPageURL: "s", HealthCheckURL: "c",
			SecureHealthCheckURL: "sc", VIPAddress: "a,b", SecureVIPAddress: "c,d",
			IsCoordinatingDiscoveryServer: true, LastDirtyTimestamp: -42, ASGName: "asg",
		},
		RegistrationTs: 9223372036854775807, LastRenewalTs: -9223372036854775808, EvictionTs: 1,
		ServiceUpTs: 2, LastUpdatedTs: 3, ActionType: fsm.ActionModified, ModifyIndex: 99,
	}
}

// wireEntry is what decoding e as encoded in format f must give back, per
// the normalisations listed in doc.go.
func wireEntry(e *fsm.Entry, f Format) *fsm.Entry {
	in := *e.Instance
	w := *e
	w.Instance = &in
	w.ModifyIndex = 0
	clean := func(s string) string { return validUTF8(s) }
	if f == XML {
		clean = xmlClean
	}
	cleanMap := func(m fsm.Metadata) fsm.Metadata {
		var out fsm.MetadataBuilder
		for k, v := range m.All() {
			if f == XML && !xmlNameOK(k) {
				continue
			}
			out.Set(clean(k), clean(v))
		}
		return out.Metadata()
	}
	for _, p := range []*string{&in.InstanceID, &in.HostName, &in.App, &in.IPAddr, &in.Sid,
		&in.AppGroupName, &in.HomePageURL, &in.StatusPageURL, &in.HealthCheckURL, &in.SecureHealthCheckURL,
		&in.VIPAddress, &in.SecureVIPAddress, &in.ASGName, &in.DataCenterInfo.Name, &w.ActionType} {
		*p = clean(*p)
	}
	in.App, in.AppGroupName = upperASCII(in.App), upperASCII(in.AppGroupName)
	in.Metadata = cleanMap(in.Metadata)
	if dc := &in.DataCenterInfo; dc.Name != "" || dc.Class != "" || !dc.Metadata.IsNil() {
		dc.Class = dataCenterClass(dc.Name)
		dc.Metadata = fsm.Metadata{}
		if dc.Name == amazon {
			dc.Metadata = cleanMap(e.Instance.DataCenterInfo.Metadata)
		}
	}
	if in.Sid == "" || in.Sid == "unknown" {
		in.Sid = "na"
	}
	in.Status, in.OverriddenStatus = orUnknown(in.Status), orUnknown(in.OverriddenStatus)
	in.RenewalIntervalSecs = orDefault(in.RenewalIntervalSecs, fsm.DefaultRenewalIntervalSecs)
	in.DurationSecs = orDefault(in.DurationSecs, fsm.DefaultDurationSecs)
	w.App, w.ID, w.Override = in.App, in.ID(), ""
	if in.OverriddenStatus != fsm.StatusUnknown {
		w.Override = in.OverriddenStatus
	}
	return &w
}

// validUTF8 replaces each invalid byte with U+FFFD, as both encoders do.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// xmlClean is validUTF8 plus the replacement of what XML 1.0 cannot carry.
func xmlClean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return utf8.RuneError
		}
		return r
	}, validUTF8(s))
}
