package eureka

import (
	"strconv"

	"github.com/heureka-registry/heureka/fsm"
)

// Data-center class names. Both Java decoders resolve the data-center type
// from @class and have no default, so output always carries one of the two
// canonical names (docs/eureka-api.md, "Data center").
const (
	classAmazonInfo  = "com.netflix.appinfo.AmazonInfo"
	classDefaultInfo = "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"
	classEmptyMap    = "java.util.Collections$EmptyMap"
	amazon           = "Amazon"
)

// dataCenterClass is the canonical @class for a data-center name.
func dataCenterClass(name string) string {
	if name == amazon {
		return classAmazonInfo
	}
	return classDefaultInfo
}

// The encoders below write one format-neutral sequence of fields and let
// small helpers render each field in JSON or XML. In JSON a member is
// preceded by a comma unless it is the first in its object, which the
// helpers detect from the previous byte, so optional fields need no
// bookkeeping.

// AppendInstance appends the bare instance object of e, {...} in JSON and
// <instance>...</instance> in XML, with the fields of docs/eureka-api.md, "Instance" in Eureka's
// order. e.Instance must not be nil. The lease times come from e:
// lastRenewalTimestamp is e.LastRenewalTs (heureka reports the real last
// renewal, docs/eureka-api.md, "Where heureka differs").
//
// A compact f leaves out what eureka-server's mini codec leaves out:
// appGroupName, overriddenStatus, sid, countryId, the four URLs,
// isCoordinatingDiscoveryServer, lastDirtyTimestamp, leaseInfo and metadata.
func AppendInstance(dst []byte, f Format, e *fsm.Entry) []byte {
	full := !f.Compact()
	f = f.Base()
	in := e.Instance
	if f == XML {
		dst = append(dst, "<instance>"...)
	} else {
		dst = append(dst, '{')
	}
	if in.InstanceID != "" {
		dst = str(dst, f, "instanceId", in.InstanceID)
	}
	dst = str(dst, f, "hostName", in.HostName)
	dst = str(dst, f, "app", in.App)
	dst = str(dst, f, "ipAddr", in.IPAddr)
	if s := in.Sid; full && s != "" && s != "na" && s != "unknown" {
		dst = str(dst, f, "sid", s)
	}
	dst = str(dst, f, "status", orUnknown(in.Status))
	// The XML element is spelt with a lower-case s; fargo's XML decoder is
	// case-sensitive (docs/eureka-api.md, "Instance", "Documents").
	switch {
	case !full:
	case f == JSON:
		dst = str(dst, f, "overriddenStatus", orUnknown(in.OverriddenStatus))
	default:
		dst = str(dst, f, "overriddenstatus", orUnknown(in.OverriddenStatus))
	}
	dst = port(dst, f, "port", in.Port, in.PortEnabled)
	dst = port(dst, f, "securePort", in.SecurePort, in.SecurePortEnabled)
	if full {
		dst = num(dst, f, "countryId", int64(in.CountryID))
	}
	if dc := &in.DataCenterInfo; dc.Name != "" || dc.Class != "" || !dc.Metadata.IsNil() {
		dst = dataCenter(dst, f, dc)
	}
	if full {
		dst = open(dst, f, "leaseInfo")
		dst = num(dst, f, "renewalIntervalInSecs", int64(orDefault(in.RenewalIntervalSecs, fsm.DefaultRenewalIntervalSecs)))
		dst = num(dst, f, "durationInSecs", int64(orDefault(in.DurationSecs, fsm.DefaultDurationSecs)))
		dst = num(dst, f, "registrationTimestamp", e.RegistrationTs)
		dst = num(dst, f, "lastRenewalTimestamp", e.RenewedAt())
		dst = num(dst, f, "evictionTimestamp", e.EvictionTs)
		dst = num(dst, f, "serviceUpTimestamp", e.ServiceUpTs)
		dst = closeObj(dst, f, "leaseInfo")
		dst = metadata(dst, f, in.Metadata)
		// Eureka's "auto" fields: strings, written only when set (docs/eureka-api.md, "Instance").
		dst = optStr(dst, f, "appGroupName", in.AppGroupName)
		dst = optStr(dst, f, "homePageUrl", in.HomePageURL)
		dst = optStr(dst, f, "statusPageUrl", in.StatusPageURL)
		dst = optStr(dst, f, "healthCheckUrl", in.HealthCheckURL)
		dst = optStr(dst, f, "secureHealthCheckUrl", in.SecureHealthCheckURL)
	}
	dst = optStr(dst, f, "vipAddress", in.VIPAddress)
	dst = optStr(dst, f, "secureVipAddress", in.SecureVIPAddress)
	if full {
		dst = str(dst, f, "isCoordinatingDiscoveryServer", strconv.FormatBool(in.IsCoordinatingDiscoveryServer))
	}
	dst = numStr(dst, f, "lastUpdatedTimestamp", e.LastUpdatedTs)
	if full {
		dst = numStr(dst, f, "lastDirtyTimestamp", in.LastDirtyTimestamp)
	}
	dst = optStr(dst, f, "actionType", e.ActionType)
	dst = optStr(dst, f, "asgName", in.ASGName)
	return closeObj(dst, f, "instance")
}

// AppendInstanceDoc appends e as a root document: {"instance":{...}} in JSON,
// <instance>...</instance> in XML (instance reads, docs/eureka-api.md, "Documents").
func AppendInstanceDoc(dst []byte, f Format, e *fsm.Entry) []byte {
	if f.Base() == XML {
		return AppendInstance(dst, f, e)
	}
	dst = append(dst, `{"instance":`...)
	dst = AppendInstance(dst, f, e)
	return append(dst, '}')
}

// AppendApplication appends one application as a fragment that
// AppendApplicationDoc or AppendApplications can embed unchanged:
// {"name":"X","instance":[...]} in JSON (instance is always an array),
// <application><name>X</name><instance>...</instance>...</application> in XML.
// Callers never pass zero entries: Eureka never lists an application without
// instances and js-client crashes on one (docs/eureka-api.md, "Documents").
func AppendApplication(dst []byte, f Format, name string, entries []*fsm.Entry) []byte {
	if f.Base() == XML {
		dst = append(dst, "<application><name>"...)
		dst = appendXMLText(dst, name)
		dst = append(dst, "</name>"...)
		for _, e := range entries {
			dst = AppendInstance(dst, f, e)
		}
		return append(dst, "</application>"...)
	}
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, name)
	dst = append(dst, `,"instance":[`...)
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendInstance(dst, f, e)
	}
	return append(dst, "]}"...)
}

// ApplicationParts returns what AppendApplication writes before, between
// and after the instances of application name, so that a document can be
// sent as segments sharing encoded instances.
func ApplicationParts(f Format, name string) (prefix, sep, suffix []byte) {
	if f.Base() == XML {
		prefix = append(prefix, "<application><name>"...)
		prefix = appendXMLText(prefix, name)
		return append(prefix, "</name>"...), nil, []byte("</application>")
	}
	prefix = append(prefix, `{"name":`...)
	prefix = appendJSONString(prefix, name)
	return append(prefix, `,"instance":[`...), []byte{','}, []byte("]}")
}

// AppendApplicationDoc wraps a fragment from AppendApplication as a root
// document (GET /apps/{app}): {"application":<fragment>} in JSON; in XML the fragment is
// already the root.
func AppendApplicationDoc(dst []byte, f Format, fragment []byte) []byte {
	prefix, suffix := ApplicationDocParts(f)
	dst = append(dst, prefix...)
	dst = append(dst, fragment...)
	return append(dst, suffix...)
}

// ApplicationDocParts returns what AppendApplicationDoc writes before and
// after the fragment, so a document can be sent as segments that share the
// fragment's bytes instead of copying them.
func ApplicationDocParts(f Format) (prefix, suffix []byte) {
	if f.Base() == XML {
		return nil, nil
	}
	return []byte(`{"application":`), []byte{'}'}
}

// AppendApplications appends an applications document (full registry, delta, VIPs;
// docs/eureka-api.md, "Applications") built from AppendApplication fragments in the given format:
//
//	{"applications":{"versions__delta":"1","apps__hashcode":"UP_3_","application":[frag,frag]}}
//	<applications><versions__delta>1</versions__delta><apps__hashcode>UP_3_</apps__hashcode>fragfrag</applications>
//
// versions__delta is a string in JSON; with no fragments "application" is [].
func AppendApplications(dst []byte, f Format, versionsDelta, hashCode string, fragments [][]byte) []byte {
	prefix, sep, suffix := ApplicationsParts(f, versionsDelta, hashCode)
	dst = append(dst, prefix...)
	for i, frag := range fragments {
		if i > 0 {
			dst = append(dst, sep...)
		}
		dst = append(dst, frag...)
	}
	return append(dst, suffix...)
}

// ApplicationsParts returns what AppendApplications writes before the
// fragments, between two of them, and after them (see ApplicationDocParts).
func ApplicationsParts(f Format, versionsDelta, hashCode string) (prefix, sep, suffix []byte) {
	if f.Base() == XML {
		prefix = append(prefix, "<applications><versions__delta>"...)
		prefix = appendXMLText(prefix, versionsDelta)
		prefix = append(prefix, "</versions__delta><apps__hashcode>"...)
		prefix = appendXMLText(prefix, hashCode)
		prefix = append(prefix, "</apps__hashcode>"...)
		return prefix, nil, []byte("</applications>")
	}
	prefix = append(prefix, `{"applications":{"versions__delta":`...)
	prefix = appendJSONString(prefix, versionsDelta)
	prefix = append(prefix, `,"apps__hashcode":`...)
	prefix = appendJSONString(prefix, hashCode)
	prefix = append(prefix, `,"application":[`...)
	return prefix, []byte{','}, []byte("]}}")
}

// dataCenter writes dataCenterInfo with its canonical class; metadata only for
// Amazon, since Spring maps every other name to a class without it (docs/eureka-api.md, "Data center").
func dataCenter(dst []byte, f Format, dc *fsm.DataCenterInfo) []byte {
	class := dataCenterClass(dc.Name)
	if f.Base() == XML {
		dst = append(dst, `<dataCenterInfo class="`...)
		dst = append(dst, class...) // a constant: needs no escaping
		dst = append(dst, `">`...)
	} else {
		dst = key(dst, "dataCenterInfo")
		dst = append(dst, `{"@class":"`...)
		dst = append(dst, class...)
		dst = append(dst, '"')
	}
	dst = optStr(dst, f, "name", dc.Name)
	if dc.Name == amazon {
		dst = metadata(dst, f, dc.Metadata)
	}
	return closeObj(dst, f, "dataCenterInfo")
}

// metadata writes a string map with its keys sorted (the order the block
// holds them in), so that equal registries encode to equal bytes. An empty
// map is Eureka's EmptyMap marker (docs/eureka-api.md, "Metadata map").
func metadata(dst []byte, f Format, m fsm.Metadata) []byte {
	if m.Len() == 0 {
		if f.Base() == XML {
			return append(dst, `<metadata class="`+classEmptyMap+`"/>`...)
		}
		dst = key(dst, "metadata")
		return append(dst, `{"@class":"`+classEmptyMap+`"}`...)
	}
	dst = open(dst, f, "metadata")
	for k, v := range m.Scan() {
		if f.Base() == JSON {
			dst = str(dst, f, k, v)
		} else if xmlNameOK(k) {
			dst = append(dst, '<')
			dst = appendXMLName(dst, k)
			dst = append(dst, '>')
			dst = appendXMLText(dst, v)
			dst = append(dst, '<', '/')
			dst = appendXMLName(dst, k)
			dst = append(dst, '>')
		}
	}
	return closeObj(dst, f, "metadata")
}

// port writes a port object: {"$":8080,"@enabled":"true"} with a numeric $
// and a string @enabled (fargo rejects a JSON boolean), or
// <port enabled="true">8080</port> (docs/eureka-api.md, "Ports").
func port(dst []byte, f Format, name string, n int32, enabled bool) []byte {
	if f.Base() == XML {
		dst = append(dst, '<')
		dst = append(dst, name...)
		dst = append(dst, ` enabled="`...)
		dst = strconv.AppendBool(dst, enabled)
		dst = append(dst, '"', '>')
		dst = strconv.AppendInt(dst, int64(n), 10)
		return closeTag(dst, name)
	}
	dst = key(dst, name)
	dst = append(dst, `{"$":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, `,"@enabled":"`...)
	dst = strconv.AppendBool(dst, enabled)
	return append(dst, '"', '}')
}

// key writes a JSON member name, preceded by a comma unless it opens its object.
func key(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' {
		dst = append(dst, ',')
	}
	dst = appendJSONString(dst, name)
	return append(dst, ':')
}

// open starts an object-valued member (JSON) or a parent element (XML).
func open(dst []byte, f Format, name string) []byte {
	if f.Base() == XML {
		dst = append(dst, '<')
		dst = append(dst, name...)
		return append(dst, '>')
	}
	dst = key(dst, name)
	return append(dst, '{')
}

// closeObj ends what open started.
func closeObj(dst []byte, f Format, name string) []byte {
	if f.Base() == XML {
		return closeTag(dst, name)
	}
	return append(dst, '}')
}

func closeTag(dst []byte, name string) []byte {
	dst = append(dst, '<', '/')
	dst = append(dst, name...)
	return append(dst, '>')
}

// str writes a string field. Names passed here are constants or, in JSON,
// metadata keys (escaped by key); XML metadata keys go through appendXMLName.
func str(dst []byte, f Format, name, v string) []byte {
	if f.Base() == XML {
		dst = append(dst, '<')
		dst = append(dst, name...)
		dst = append(dst, '>')
		dst = appendXMLText(dst, v)
		return closeTag(dst, name)
	}
	dst = key(dst, name)
	return appendJSONString(dst, v)
}

func optStr(dst []byte, f Format, name, v string) []byte {
	if v == "" {
		return dst
	}
	return str(dst, f, name, v)
}

// num writes a field that is a JSON number (port numbers, countryId, leaseInfo).
func num(dst []byte, f Format, name string, v int64) []byte {
	if f.Base() == XML {
		dst = append(dst, '<')
		dst = append(dst, name...)
		dst = append(dst, '>')
		dst = strconv.AppendInt(dst, v, 10)
		return closeTag(dst, name)
	}
	dst = key(dst, name)
	return strconv.AppendInt(dst, v, 10)
}

// numStr writes a number that Eureka emits as a JSON string (the timestamps
// among the auto fields, docs/eureka-api.md, "Documents").
func numStr(dst []byte, f Format, name string, v int64) []byte {
	if f.Base() == XML {
		return num(dst, f, name, v)
	}
	dst = key(dst, name)
	dst = append(dst, '"')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '"')
}

func orUnknown(status string) string {
	if status == "" {
		return fsm.StatusUnknown
	}
	return status
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}
