package eureka

import (
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"

	"github.com/heureka-registry/heureka/fsm"
)

// BadRequestError is a request body or register instance the server must
// refuse with 400. Msg is meant for the client as it is: for the validation
// failures of ValidateInstance it is Eureka's exact text (docs/eureka-api.md, "Register"), which
// belongs in a text/plain body.
type BadRequestError struct {
	Msg string
}

// Error returns Msg.
func (e *BadRequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf(format, args...)}
}

// Applications is a decoded applications document (docs/eureka-api.md, "Applications").
type Applications struct {
	VersionsDelta string
	AppsHashCode  string
	Applications  []Application
}

// Application is a decoded application: its name as written and its
// instances, each with the lease state the document carries.
type Application struct {
	Name      string
	Instances []*fsm.Entry
}

// DecodeInstance decodes a register body (docs/eureka-api.md, "Register", "Register bodies clients send") in format f,
// with or without the {"instance": ...} wrapper in JSON; XML needs its
// <instance> root. nowMs stands in for an absent or zero lastDirtyTimestamp.
//
// It accepts what real clients send: numbers or numeric strings wherever a
// number belongs, booleans or "true"/"false" strings, a bare-number port,
// both overriddenStatus spellings, JSON nulls (ignored), unknown keys
// (ignored), dataCenterInfo with or without @class. It normalises as Eureka
// does: app and appGroupName upper-cased; status absent → UP, empty →
// UNKNOWN; overriddenStatus absent or empty → UNKNOWN; port 7001 enabled and
// securePort 7002 disabled when absent; countryId 1 and sid "na" when absent;
// leaseInfo durations kept (≤ 0 as 0, the fsm applies defaults). Fields the
// server owns (leaseInfo timestamps, lastUpdatedTimestamp, actionType,
// isCoordinatingDiscoveryServer) are ignored.
//
// Like eureka-server, it turns an unknown status name into UNKNOWN (names
// match case-sensitively in JSON and case-insensitively in XML), reads a
// non-numeric JSON number (port.$, countryId, lastDirtyTimestamp, leaseInfo
// values) and a non-numeric XML leaseInfo value or lastDirtyTimestamp as 0
// (then the default), and refuses a dataCenterInfo.name outside Netflix,
// Amazon and MyOwn ("amazon" in any case in XML), which Eureka's Java codec
// cannot read back. See the package documentation for how dataCenterInfo is
// represented. Every error is a *BadRequestError naming the field.
func DecodeInstance(body []byte, f Format, nowMs int64) (*fsm.Instance, error) {
	d := decoder{xml: f == XML, now: nowMs, register: true}
	e, err := decodeRoot(body, f, "instance", d.instance)
	if err != nil {
		return nil, err
	}
	return e.Instance, nil
}

// ValidateInstance applies Eureka's register checks (docs/eureka-api.md, "Register") in order and
// returns the first failure as a *BadRequestError with Eureka's exact
// message. pathApp is the {app} path segment; both names are compared
// upper-cased.
//
// dataCenterInfo counts as absent when Name, Class and Metadata are all
// empty, which is how DecodeInstance represents a body without it (a
// present object always gets a Class).
func ValidateInstance(in *fsm.Instance, pathApp string) error {
	msg := ""
	switch dc := &in.DataCenterInfo; {
	case in.ID() == "":
		msg = "Missing instanceId"
	case in.HostName == "":
		msg = "Missing hostname"
	case in.IPAddr == "":
		msg = "Missing ip address"
	case in.App == "":
		msg = "Missing appName"
	case upperASCII(pathApp) != upperASCII(in.App):
		msg = "Mismatched appName, expecting " + upperASCII(pathApp) + " but was " + upperASCII(in.App)
	case dc.Name == "" && dc.Class == "" && dc.Metadata.IsNil():
		msg = "Missing dataCenterInfo"
	case dc.Name == "":
		msg = "Missing dataCenterInfo Name"
	default:
		return nil
	}
	return &BadRequestError{Msg: msg}
}

// NormalizeAppName upper-cases an application name the way heureka keys its
// registry: ASCII letters only, independent of locale (docs/eureka-api.md, "Paths"). Handlers
// must use it for the {app} path segment so that lookups match what
// DecodeInstance stored.
func NormalizeAppName(s string) string { return upperASCII(s) }

// upperASCII upper-cases ASCII letters, allocating only when s has a
// lower-case one.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// DecodeEntry decodes an instance document as the encoders write it
// ({"instance":{...}} or bare in JSON, <instance> in XML), including the
// server-side fields: leaseInfo timestamps, lastUpdatedTimestamp,
// actionType and isCoordinatingDiscoveryServer go into the Entry, whose App
// and ID are taken from the instance. An absent lastDirtyTimestamp stays 0.
func DecodeEntry(body []byte, f Format) (*fsm.Entry, error) {
	d := decoder{xml: f == XML, full: true}
	e, err := decodeRoot(body, f, "instance", d.instance)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// DecodeApplication decodes an application document ({"application":{...}}
// or bare in JSON, <application> in XML). A single instance object in place
// of an array is accepted.
func DecodeApplication(body []byte, f Format) (*Application, error) {
	d := decoder{xml: f == XML, full: true}
	a, err := decodeRoot(body, f, "application", d.application)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// DecodeApplications decodes an applications document ({"applications":{...}}
// or bare in JSON, <applications> in XML). Single objects in place of the
// application and instance arrays are accepted, as old servers wrote them.
func DecodeApplications(body []byte, f Format) (*Applications, error) {
	d := decoder{xml: f == XML, full: true}
	return decodeRoot(body, f, "applications", func(n *node) (*Applications, error) {
		apps := &Applications{}
		err := d.members("applications", n, func(name string, v *node) (err error) {
			switch name {
			case "versions__delta":
				apps.VersionsDelta, err = d.text(name, v)
			case "apps__hashcode":
				apps.AppsHashCode, err = d.text(name, v)
			case "application":
				err = eachInto(v, &apps.Applications, d.application)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		return apps, nil
	})
}

// decodeRoot parses body and decodes the content of its root with decode,
// while the parsed tree is valid (withJSON). JSON accepts {"<root>":
// {...}} or the bare object; XML requires the <root> element.
func decodeRoot[T any](body []byte, f Format, root string, decode func(*node) (T, error)) (T, error) {
	var v T
	if f == XML {
		name, n, err := parseXML(body)
		if err != nil {
			return v, err
		}
		if name != root {
			return v, badRequest("malformed XML: root element is <%s>, expected <%s>", name, root)
		}
		return decode(&n)
	}
	err := withJSON(body, func(n *node) error {
		r, err := jsonRoot(n, root)
		if err != nil {
			return err
		}
		v, err = decode(r)
		return err
	})
	return v, err
}

// jsonRoot is the content of a JSON document's root: the object under
// root, or the bare object.
func jsonRoot(n *node, root string) (*node, error) {
	if n.kind != kObj {
		return nil, badRequest("%s: expected an object, got %s", root, n.describe())
	}
	if w := n.get(root); w != nil {
		if w.kind != kObj {
			return nil, badRequest("%s: expected an object, got %s", root, w.describe())
		}
		return w, nil
	}
	return n, nil
}

// each calls fn for every element of an array, or once for a single value
// (XML repeats an element instead; the caller meets each repetition).
func each(n *node, fn func(*node) error) error {
	if n.kind != kArr {
		return fn(n)
	}
	for i := range n.items {
		if n.items[i].kind == kNull {
			continue
		}
		if err := fn(&n.items[i]); err != nil {
			return err
		}
	}
	return nil
}

// eachInto decodes every element of n (as each meets them) and appends
// it to list.
func eachInto[T any](n *node, list *[]T, decode func(*node) (T, error)) error {
	return each(n, func(n *node) error {
		x, err := decode(n)
		*list = append(*list, x)
		return err
	})
}

// nonNull yields the name and value of each member of an object that is not
// null, in document order: a null member leaves its field as it was.
func nonNull(fs []field) iter.Seq2[string, *node] {
	return func(yield func(string, *node) bool) {
		for i := range fs {
			if v := &fs[i].val; v.kind != kNull && !yield(fs[i].name, v) {
				return
			}
		}
	}
}

// decoder maps parsed trees onto the fsm model.
type decoder struct {
	xml bool
	// full reads the fields a server owns (documents, not register bodies).
	full bool
	// now replaces an absent lastDirtyTimestamp.
	now int64
	// register reads a register body the way eureka-server's codecs do:
	// unknown status names become UNKNOWN, non-numeric numbers 0 where
	// Jackson's getValueAs* would read them so, and dataCenterInfo.name must
	// be one of Eureka's names.
	register bool
}

func (d *decoder) application(n *node) (Application, error) {
	var a Application
	err := d.members("application", n, func(name string, v *node) (err error) {
		switch name {
		case "name":
			a.Name, err = d.text("application.name", v)
		case "instance":
			err = eachInto(v, &a.Instances, d.instance)
		}
		return err
	})
	return a, err
}

// instance reads an instance object (docs/eureka-api.md, "Instance"). Members are applied in
// document order, so the last of duplicates (or of the two overriddenStatus
// spellings) wins.
func (d *decoder) instance(n *node) (*fsm.Entry, error) {
	in := &fsm.Instance{
		Sid:              "na",
		Status:           fsm.StatusUp,
		OverriddenStatus: fsm.StatusUnknown,
		Port:             7001,
		PortEnabled:      true,
		SecurePort:       7002,
		CountryID:        1,
	}
	e := &fsm.Entry{Instance: in}
	err := d.members("instance", n, func(name string, v *node) error { return d.instanceMember(e, name, v) })
	if err != nil {
		return nil, err
	}
	if in.LastDirtyTimestamp == 0 {
		in.LastDirtyTimestamp = d.now
	}
	e.App, e.ID = in.App, in.ID()
	if in.OverriddenStatus != fsm.StatusUnknown {
		e.Override = in.OverriddenStatus
	}
	return e, nil
}

// instanceText is where a member of an instance that is plain text goes,
// or nil for the other members.
func instanceText(in *fsm.Instance, name string) *string {
	switch name {
	case "instanceId":
		return &in.InstanceID
	case "hostName":
		return &in.HostName
	case "ipAddr":
		return &in.IPAddr
	case "homePageUrl":
		return &in.HomePageURL
	case "statusPageUrl":
		return &in.StatusPageURL
	case "healthCheckUrl":
		return &in.HealthCheckURL
	case "secureHealthCheckUrl":
		return &in.SecureHealthCheckURL
	case "vipAddress":
		return &in.VIPAddress
	case "secureVipAddress":
		return &in.SecureVIPAddress
	case "asgName":
		return &in.ASGName
	}
	return nil
}

// instanceMember reads one member of an instance object into e; members
// it does not know are ignored.
func (d *decoder) instanceMember(e *fsm.Entry, name string, v *node) (err error) {
	in := e.Instance
	if p := instanceText(in, name); p != nil {
		*p, err = d.text(name, v)
		return err
	}
	switch name {
	case "app":
		in.App, err = d.text(name, v)
		in.App = upperASCII(in.App)
	case "sid":
		var s string
		if s, err = d.text(name, v); s != "" {
			in.Sid = s
		}
	case "status":
		in.Status, err = d.status(name, v)
	case "overriddenStatus", "overriddenstatus":
		in.OverriddenStatus, err = d.status(name, v)
	case "port":
		in.Port, in.PortEnabled, err = d.port(name, v, in.Port, in.PortEnabled, false)
	case "securePort":
		in.SecurePort, in.SecurePortEnabled, err = d.port(name, v, in.SecurePort, in.SecurePortEnabled, true)
	case "countryId":
		in.CountryID, err = d.int32(name, v, in.CountryID)
	case "dataCenterInfo":
		in.DataCenterInfo, err = d.dataCenter(v)
	case "leaseInfo":
		err = d.lease(v, e)
	case "metadata":
		in.Metadata, err = d.metadata(name, v)
	case "appGroupName":
		in.AppGroupName, err = d.text(name, v)
		in.AppGroupName = upperASCII(in.AppGroupName)
	case "lastDirtyTimestamp":
		in.LastDirtyTimestamp, err = d.int64(name, v, in.LastDirtyTimestamp)
	// Server-owned fields: a registrant cannot set them (docs/eureka-api.md, "Instance").
	case "isCoordinatingDiscoveryServer":
		if d.full {
			in.IsCoordinatingDiscoveryServer, err = d.bool(name, v)
		}
	case "lastUpdatedTimestamp":
		if d.full {
			e.LastUpdatedTs, err = d.int64(name, v, 0)
		}
	case "actionType":
		if d.full {
			e.ActionType, err = d.text(name, v)
		}
	}
	return err
}

// dataCenter reads dataCenterInfo (docs/eureka-api.md, "Data center"). @class is optional; a present
// object always comes back with a Class so that it is distinguishable from an
// absent one. Metadata is kept for Amazon only.
func (d *decoder) dataCenter(n *node) (fsm.DataCenterInfo, error) {
	var dc fsm.DataCenterInfo
	var md fsm.Metadata
	err := d.members("dataCenterInfo", n, func(name string, v *node) (err error) {
		switch name {
		case "@class":
			dc.Class, err = d.text("dataCenterInfo.@class", v)
		case "name":
			dc.Name, err = d.text("dataCenterInfo.name", v)
		case "metadata":
			md, err = d.metadata("dataCenterInfo.metadata", v)
		}
		return err
	})
	if err != nil {
		return dc, err
	}
	if d.register && dc.Name != "" {
		name, ok := dataCenterName(dc.Name, d.xml)
		if !ok {
			return dc, badRequest("dataCenterInfo.name: %q is not one of Netflix, Amazon, MyOwn", dc.Name)
		}
		dc.Name = name
	}
	if dc.Name == amazon {
		dc.Metadata = md
	}
	if dc.Class == "" {
		dc.Class = dataCenterClass(dc.Name)
	}
	return dc, nil
}

// dataCenterName checks a data-center name against Eureka's enum
// (DataCenterInfo.Name): exact in JSON (Jackson's enum reader); in XML
// Amazon in any case, the others exact (XStream's converter).
func dataCenterName(name string, xml bool) (string, bool) {
	switch {
	case name == "Netflix", name == "MyOwn", name == amazon:
		return name, true
	case xml && strings.EqualFold(name, amazon):
		return amazon, true
	}
	return "", false
}

// lease reads leaseInfo (docs/eureka-api.md, "Lease info"). A register body contributes only the
// two durations; documents also carry the lease timestamps.
func (d *decoder) lease(n *node, e *fsm.Entry) error {
	in := e.Instance
	return d.members("leaseInfo", n, func(name string, v *node) (err error) {
		switch name {
		case "renewalIntervalInSecs":
			in.RenewalIntervalSecs, err = d.int32("leaseInfo."+name, v, 0)
			in.RenewalIntervalSecs = max(in.RenewalIntervalSecs, 0)
		case "durationInSecs":
			in.DurationSecs, err = d.int32("leaseInfo."+name, v, 0)
			in.DurationSecs = max(in.DurationSecs, 0)
		case "registrationTimestamp":
			if d.full {
				e.RegistrationTs, err = d.int64("leaseInfo."+name, v, 0)
			}
		case "lastRenewalTimestamp", "renewalTimestamp":
			if d.full {
				e.LastRenewalTs, err = d.int64("leaseInfo."+name, v, 0)
			}
		case "evictionTimestamp":
			if d.full {
				e.EvictionTs, err = d.int64("leaseInfo."+name, v, 0)
			}
		case "serviceUpTimestamp":
			if d.full {
				e.ServiceUpTs, err = d.int64("leaseInfo."+name, v, 0)
			}
		}
		return err
	})
}

// metadata reads a string map (docs/eureka-api.md, "Metadata map"). Values are taken as text (numbers
// and booleans as written). JSON drops the key "@class", Eureka's empty-map
// marker; XML drops attributes and unescapes element names. A repeated key
// keeps its last value, as a map would; no entry at all gives nil.
func (d *decoder) metadata(path string, n *node) (fsm.Metadata, error) {
	fs, err := d.object(path, n)
	if err != nil {
		return fsm.Metadata{}, err
	}
	var m fsm.MetadataBuilder
	m.Grow(len(fs))
	for i := range fs {
		k, v := fs[i].name, &fs[i].val
		if d.xml {
			if strings.HasPrefix(k, "@") {
				continue
			}
			k = unescapeXMLName(k)
		} else if k == "@class" || v.kind == kNull {
			continue
		}
		if v.kind == kObj || v.kind == kArr {
			return fsm.Metadata{}, badRequest("%s.%s: expected a string, got %s", path, k, v.describe())
		}
		m.Set(k, v.text)
	}
	return m.Metadata(), nil
}

// port reads a port (docs/eureka-api.md, "Ports"), starting from the defaults num and enabled.
// JSON: {"$": n, "@enabled": b} with n a number or numeric string and b a
// boolean or string, or a bare number (taken as enabled). XML: the text is
// the number; enabled="false" disables a port, only enabled="true" enables a
// secure port.
func (d *decoder) port(name string, n *node, num int32, enabled, secure bool) (int32, bool, error) {
	var err error
	if d.xml {
		if n.kind != kStr {
			return 0, false, badRequest("%s: expected a port number, got %s", name, n.describe())
		}
		if num, err = d.int32(name, n, num); err != nil {
			return 0, false, err
		}
		if a := n.get("@enabled"); a != nil {
			v := strings.TrimSpace(a.text)
			if secure {
				enabled = strings.EqualFold(v, "true")
			} else {
				enabled = !strings.EqualFold(v, "false")
			}
		}
		return num, enabled, nil
	}
	switch n.kind {
	case kNum, kStr:
		num, err = d.int32(name, n, num)
		return num, true, err
	case kObj:
		err = d.members(name, n, func(member string, v *node) (err error) {
			switch member {
			case "$":
				num, err = d.int32(name+".$", v, num)
			case "@enabled":
				enabled, err = d.bool(name+".@enabled", v)
			}
			return err
		})
		if err != nil {
			return 0, false, err
		}
		return num, enabled, nil
	}
	return 0, false, badRequest("%s: expected a port object or number, got %s", name, n.describe())
}

// object returns the members of an object. In XML an element without child
// elements and without text is an empty object (its attributes are members).
func (d *decoder) object(path string, n *node) ([]field, error) {
	if n.kind == kObj || d.xml && n.kind == kStr && strings.TrimSpace(n.text) == "" {
		return n.fields, nil
	}
	return nil, badRequest("%s: expected an object, got %s", path, n.describe())
}

// members calls fn with the name and value of each member of the object n
// that is not null, in document order (see nonNull), until fn fails.
func (d *decoder) members(path string, n *node, fn func(name string, v *node) error) error {
	fs, err := d.object(path, n)
	if err != nil {
		return err
	}
	for name, v := range nonNull(fs) {
		if err := fn(name, v); err != nil {
			return err
		}
	}
	return nil
}

// text returns a scalar as text: strings as they are, numbers and booleans
// as written (Eureka reads every string field with Jackson's getText).
func (d *decoder) text(path string, n *node) (string, error) {
	switch n.kind {
	case kStr, kNum, kBool:
		return n.text, nil
	}
	if d.xml {
		return "", badRequest("%s: expected text, got an element with child elements", path)
	}
	return "", badRequest("%s: expected a string, got %s", path, n.describe())
}

// status reads a status name: empty means UNKNOWN (docs/eureka-api.md, "Instance"); any other
// value must be one of the five names, matched exactly in JSON and ignoring
// case (and surrounding blanks) in XML.
func (d *decoder) status(path string, n *node) (string, error) {
	s, err := d.text(path, n)
	if err != nil {
		return "", err
	}
	v := s
	if d.xml {
		v = upperASCII(strings.TrimSpace(v))
	}
	switch {
	case v == "":
		return fsm.StatusUnknown, nil
	case fsm.ValidStatus(v):
		return v, nil
	case d.register:
		return fsm.StatusUnknown, nil
	}
	return "", badRequest("%s: unknown status %q, expected one of UP, DOWN, STARTING, OUT_OF_SERVICE, UNKNOWN", path, s)
}

// bool reads a boolean: JSON true/false, a "true"/"false" string (any case),
// or a number (non-zero is true), as Jackson's getValueAsBoolean does.
func (d *decoder) bool(path string, n *node) (bool, error) {
	switch n.kind {
	case kBool, kStr:
		return strings.EqualFold(strings.TrimSpace(n.text), "true"), nil
	case kNum:
		f, _ := strconv.ParseFloat(n.text, 64)
		return f != 0, nil
	}
	return false, badRequest("%s: expected a boolean, got %s", path, n.describe())
}

// int64 reads an integer from a number or a numeric string; an empty string
// leaves def. Integral floats (8080.0, 1e3) are accepted.
func (d *decoder) int64(path string, n *node, def int64) (int64, error) {
	var s string
	loose := d.loose(path)
	switch {
	case n.kind == kNum:
		s = n.text
	case n.kind == kStr:
		if s = strings.TrimSpace(n.text); s == "" {
			return def, nil
		}
	case n.kind == kBool && loose && !d.xml:
		if n.text == "true" {
			return 1, nil
		}
		return 0, nil
	default:
		return 0, badRequest("%s: expected a number, got %s", path, n.describe())
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	inRange := err == nil && f >= math.MinInt64 && f < math.MaxInt64
	switch {
	case inRange && (f == math.Trunc(f) || loose):
		return int64(f), nil // Jackson truncates a fraction
	case loose && err != nil:
		return 0, nil // Jackson's getValueAsInt/Long default
	}
	return 0, badRequest("%s: %q is not an integer", path, n.text)
}

// loose reports whether a number at path is read as eureka-server reads a
// register body: in JSON every number (Jackson's getValueAsInt/Long), in XML
// only leaseInfo values and lastDirtyTimestamp (XStream skips those when
// they do not parse, but fails on a bad port or countryId).
func (d *decoder) loose(path string) bool {
	if !d.register {
		return false
	}
	return !d.xml || strings.HasPrefix(path, "leaseInfo.") || path == "lastDirtyTimestamp"
}

// int32 is int64 limited to the int32 range.
func (d *decoder) int32(path string, n *node, def int32) (int32, error) {
	v, err := d.int64(path, n, int64(def))
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, badRequest("%s: %s is out of range", path, n.text)
	}
	return int32(v), nil
}
