package eureka

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes that go into a JSON string unescaped.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

// appendJSONString appends s as a quoted JSON string. Control characters are
// escaped, invalid UTF-8 becomes \ufffd (as encoding/json does), and U+2028
// and U+2029 are escaped so the output is also a valid JavaScript literal.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendXMLText appends s as XML character data. Besides the markup
// characters it escapes CR (a parser would turn CR LF into LF) and replaces
// what XML 1.0 cannot carry at all (most control characters, U+FFFE, U+FFFF,
// invalid UTF-8) with U+FFFD, so the output always parses.
func appendXMLText(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		var esc string
		width := 1
		if b < utf8.RuneSelf {
			switch {
			case b == '&':
				esc = "&amp;"
			case b == '<':
				esc = "&lt;"
			case b == '>':
				esc = "&gt;"
			case b == '\r':
				esc = "&#xD;"
			case b < 0x20 && b != '\t' && b != '\n':
				esc = "\uFFFD"
			default:
				i++
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !(r == utf8.RuneError && size == 1) && r != 0xFFFE && r != 0xFFFF {
				i += size
				continue
			}
			esc, width = "\uFFFD", size
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		i += width
		start = i
	}
	return append(dst, s[start:]...)
}

// xmlNameOK reports whether a metadata key, once escaped by appendXMLName,
// is an XML element name that every parser accepts. heureka keeps to ASCII
// names without colons (namespace prefixes); other keys are left out of XML
// output, where Eureka would emit a broken document (docs/eureka-api.md, "Metadata map").
func xmlNameOK(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_', c == '$':
		case '0' <= c && c <= '9', c == '-', c == '.':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// appendXMLName appends a metadata key as an element name using XStream's
// escaping, "_" → "__" and "$" → "_-" (docs/eureka-api.md, "Metadata map"). The key must satisfy
// xmlNameOK.
func appendXMLName(dst []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '_':
			dst = append(dst, '_', '_')
		case '$':
			dst = append(dst, '_', '-')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// unescapeXMLName reverses appendXMLName: "__" → "_", "_-" → "$"; any other
// "_" is kept as it is.
func unescapeXMLName(name string) string {
	i := 0
	for i < len(name) && name[i] != '_' {
		i++
	}
	if i == len(name) {
		return name
	}
	b := make([]byte, 0, len(name))
	b = append(b, name[:i]...)
	for ; i < len(name); i++ {
		c := name[i]
		if c == '_' && i+1 < len(name) {
			switch name[i+1] {
			case '_':
				i++
			case '-':
				c = '$'
				i++
			}
		}
		b = append(b, c)
	}
	return string(b)
}
