package eureka

import "strings"

// Format is a wire format of the Eureka REST API.
type Format uint8

// The two formats Eureka speaks. XML is the zero value because it is
// Eureka's default whenever a client does not ask for JSON (docs/eureka-api.md, "Formats").
const (
	XML Format = iota
	JSON
	// CompactXML and CompactJSON are the compact variants a client asks for
	// with X-Eureka-Accept: compact: instances without the fields
	// eureka-server's mini codec leaves out (see AppendInstance).
	CompactXML
	CompactJSON
)

// NumFormats is how many Format values there are (for cache invalidation).
const NumFormats = 4

// Base is the wire format without the compact variant: XML or JSON.
func (f Format) Base() Format { return f & JSON }

// Compact reports whether f is a compact variant.
func (f Format) Compact() bool { return f&CompactXML != 0 }

// WithAccept applies an X-Eureka-Accept header: "compact" (any case) selects
// the compact variant, anything else (usually "full") leaves f.
func (f Format) WithAccept(eurekaAccept string) Format {
	if strings.EqualFold(strings.TrimSpace(eurekaAccept), "compact") {
		return f | CompactXML
	}
	return f
}

// ContentType is the media type to send with a document in format f.
func (f Format) ContentType() string {
	if f.Base() == JSON {
		return "application/json"
	}
	return "application/xml"
}

// String returns "json" or "xml" (handy in cache keys and test names).
func (f Format) String() string {
	if f.Base() == JSON {
		return "json"
	}
	return "xml"
}

// ResponseFormat picks the response format from an Accept header: JSON iff
// the header contains "json" in any case, XML otherwise, including when the
// header is missing or "*/*" (docs/eureka-api.md, "Formats"). Java, Spring and js-client ask for
// JSON; fargo and browsers get XML.
func ResponseFormat(accept string) Format {
	if containsFold(accept, "json") {
		return JSON
	}
	return XML
}

// RequestFormat picks the decoder for a request body. A Content-Type whose
// subtype is json (or ends in +json) selects JSON and xml (or +xml) selects
// XML. A missing or generic type (*/*, text/plain, octet-stream, ...) is
// resolved by sniffing the first non-blank byte of the body: '{' is JSON,
// anything else XML, Eureka's default (docs/eureka-api.md, "Formats").
func RequestFormat(contentType string, body []byte) Format {
	mt, _, _ := strings.Cut(contentType, ";")
	_, sub, _ := strings.Cut(strings.TrimSpace(mt), "/")
	switch {
	case strings.EqualFold(sub, "json") || hasSuffixFold(sub, "+json"):
		return JSON
	case strings.EqualFold(sub, "xml") || hasSuffixFold(sub, "+xml"):
		return XML
	}
	body = trimBOM(body)
	for _, b := range body {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			if b == '{' {
				return JSON
			}
			break
		}
	}
	return XML
}

// containsFold reports whether sub (lower-case ASCII) occurs in s, ignoring
// ASCII case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// trimBOM drops a leading UTF-8 byte order mark, which some clients send.
func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}
