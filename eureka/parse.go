package eureka

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Both formats are parsed into one small tree, shaped the way Eureka's JSON
// already maps XML (Jettison/Badgerfish style): an XML attribute becomes a
// member named "@attr", a child element a member named after it, and an
// element without child elements a string. One decoder (decode.go) then
// reads both formats; only a few rules differ (docs/eureka-api.md, "Instance", "Ports", "Metadata map").

type kind uint8

const (
	kNull kind = iota
	kBool
	kNum
	kStr
	kObj
	kArr
)

// node is one parsed value.
type node struct {
	kind kind
	// text is the literal of a scalar: a string's content, a number as
	// written, "true"/"false"; for XML the element's character data.
	text string
	// fields are an object's members in document order (duplicates kept;
	// readers let the last one win). An XML element carries its attributes
	// here as "@name" members, also when it is a kStr.
	fields []field
	// items are an array's elements (JSON only).
	items []node
}

type field struct {
	name string
	val  node
}

// get returns the last member called name, or nil.
func (n *node) get(name string) *node {
	for i := len(n.fields) - 1; i >= 0; i-- {
		if n.fields[i].name == name {
			return &n.fields[i].val
		}
	}
	return nil
}

// describe names a node's type for error messages.
func (n *node) describe() string {
	switch n.kind {
	case kNull:
		return "null"
	case kBool:
		return "a boolean"
	case kNum:
		return "a number"
	case kStr:
		return "a string"
	case kObj:
		return "an object"
	}
	return "an array"
}

// maxDepth bounds nesting. Eureka documents are at most six levels deep;
// the bound keeps hostile input from exhausting the stack.
const maxDepth = 64

// --- JSON ----------------------------------------------------------------

// withJSON parses one JSON value (RFC 8259, after an optional UTF-8 BOM)
// and calls fn with it. Strings are decoded as encoding/json does: invalid
// UTF-8 and unpaired surrogates become U+FFFD.
//
// The tree is valid only during fn: its objects' members and arrays' items
// live in the parser's arenas, which the next document parsed reuses. fn
// must keep nothing of it but strings (which come from a copy of body).
func withJSON(body []byte, fn func(*node) error) error {
	p := parsers.Get().(*jsonParser)
	defer p.release()
	n, err := p.parse(body)
	if err != nil {
		return err
	}
	return fn(&n)
}

// parse parses body into a tree held in p's arenas.
func (p *jsonParser) parse(body []byte) (node, error) {
	p.s, p.i = string(trimBOM(body)), 0
	p.space()
	n, err := p.value(0)
	if err != nil {
		return node{}, err
	}
	p.space()
	if p.i < len(p.s) {
		return node{}, p.errorf("unexpected %s after the document", p.peekDesc())
	}
	return n, nil
}

type jsonParser struct {
	s string
	i int
	// fields and items are scratch stacks: an object's members (an
	// array's items) are gathered on top and moved to the arenas, at
	// their exact count, when it closes. Slots are cleared as they are
	// popped.
	fields []field
	items  []node
	// treeFields and treeItems are the arenas the tree's objects and
	// arrays point into, emptied and cleared when the parser goes back
	// to its pool: a registration body parsed into slices of its own made
	// one allocation per object, several times the body's size, for a
	// tree dropped as soon as it was read. An arena that grows leaves the
	// objects already in it on its old array, which they keep alive; it
	// grows to maxPooledStack elements at most (moveTo).
	treeFields []field
	treeItems  []node
}

// parsers keeps jsonParsers for their stacks and arenas.
var parsers = sync.Pool{New: func() any { return new(jsonParser) }}

// maxPooledStack bounds the stacks and arenas a pooled parser keeps: one
// grown by a document of a hundred thousand members is left to the
// collector.
const maxPooledStack = 4096

// release empties p, so that a pooled parser keeps no document alive, and
// returns it to parsers.
func (p *jsonParser) release() {
	p.s = ""
	clear(p.treeFields)
	clear(p.treeItems)
	p.treeFields, p.treeItems = p.treeFields[:0], p.treeItems[:0]
	if max(cap(p.fields), cap(p.items)) > maxPooledStack {
		return
	}
	parsers.Put(p)
}

// popFields and popItems drop the stacks back to mark, clearing the slots.
func (p *jsonParser) popFields(mark int) {
	clear(p.fields[mark:])
	p.fields = p.fields[:mark]
}

func (p *jsonParser) popItems(mark int) {
	clear(p.items[mark:])
	p.items = p.items[:mark]
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf("malformed JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))}
}

func (p *jsonParser) peekDesc() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return fmt.Sprintf("character %q", r)
}

func (p *jsonParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (node, error) {
	if p.i >= len(p.s) {
		return node{}, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return node{kind: kStr, text: s}, err
	case c == 't':
		return p.literal("true", kBool)
	case c == 'f':
		return p.literal("false", kBool)
	case c == 'n':
		return p.literal("null", kNull)
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return node{}, p.errorf("unexpected %s, expected a value", p.peekDesc())
}

func (p *jsonParser) literal(lit string, k kind) (node, error) {
	if !strings.HasPrefix(p.s[p.i:], lit) {
		return node{}, p.errorf("invalid literal, expected %s", lit)
	}
	p.i += len(lit)
	return node{kind: k, text: lit}, nil
}

func (p *jsonParser) object(depth int) (node, error) {
	n := node{kind: kObj}
	mark := len(p.fields)
	defer p.popFields(mark)
	err := p.sequence(depth, '}', func() error {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.errorf("unexpected %s, expected a member name", p.peekDesc())
		}
		name, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.errorf("unexpected %s, expected ':'", p.peekDesc())
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		p.fields = append(p.fields, field{name: name, val: v})
		return nil
	})
	if err != nil {
		return node{}, err
	}
	if len(p.fields) > mark {
		n.fields = moveTo(&p.treeFields, p.fields[mark:])
	}
	return n, nil
}

func (p *jsonParser) array(depth int) (node, error) {
	n := node{kind: kArr}
	mark := len(p.items)
	defer p.popItems(mark)
	err := p.sequence(depth, ']', func() error {
		v, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		p.items = append(p.items, v)
		return nil
	})
	if err != nil {
		return node{}, err
	}
	if len(p.items) > mark {
		n.items = moveTo(&p.treeItems, p.items[mark:])
	}
	return n, nil
}

// moveTo appends elems to the arena and returns them there, capped at
// their count so that nothing appended to the result can reach a
// neighbour. Past maxPooledStack elements they get a slice of their own
// instead: a large document (a peer's full registry) then costs its
// exact size, not the arrays an arena doubling to its size leaves behind.
func moveTo[T any](arena *[]T, elems []T) []T {
	if len(*arena)+len(elems) > maxPooledStack {
		return slices.Clone(elems)
	}
	start := len(*arena)
	*arena = append(*arena, elems...)
	return (*arena)[start:len(*arena):len(*arena)]
}

// sequence parses an object's members or an array's items, elem parsing
// one: the opening '{' or '[' (at depth, which is bounded), then elements
// separated by ',' up to end.
func (p *jsonParser) sequence(depth int, end byte, elem func() error) error {
	if depth >= maxDepth {
		return p.errorf("nesting deeper than %d", maxDepth)
	}
	p.i++ // '{' or '['
	p.space()
	if p.i < len(p.s) && p.s[p.i] == end {
		p.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		p.space()
		if p.i < len(p.s) {
			switch p.s[p.i] {
			case ',':
				p.i++
				p.space()
				continue
			case end:
				p.i++
				return nil
			}
		}
		return p.errorf("unexpected %s, expected ',' or '%c'", p.peekDesc(), end)
	}
}

// number scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and keeps its text.
func (p *jsonParser) number() (node, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return node{}, p.errorf("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number")
		}
	}
	return node{kind: kNum, text: p.s[start:p.i]}, nil
}

func (p *jsonParser) digits() int {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// str reads a string starting at its opening quote. A string without
// escapes or invalid UTF-8 is returned as a substring of the input.
func (p *jsonParser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], nil
		case c == '\\' || c < 0x20:
			return p.strSlow(start)
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return p.strSlow(start)
			}
			p.i += size
		}
	}
	return "", p.errorf("unterminated string")
}

// strSlow decodes a string with escapes, from its first content byte.
func (p *jsonParser) strSlow(start int) (string, error) {
	p.i = start
	var b []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character %#x in string", c)
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("unterminated string")
			}
			p.i += 2
			switch e := p.s[p.i-1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errorf("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					// A valid pair makes one rune. A lone surrogate becomes
					// U+FFFD and what follows it is read on its own (so an
					// invalid escape there is reported then).
					r2 := rune(-1)
					if strings.HasPrefix(p.s[p.i:], `\u`) {
						save := p.i
						p.i += 2
						r2, _ = p.hex4()
						p.i = save
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						p.i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			b = utf8.AppendRune(b, r) // RuneError for invalid UTF-8
			p.i += size
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

// --- XML -----------------------------------------------------------------

// parseXML parses a document with encoding/xml and returns the root
// element's local name and tree. Namespaces play no part in Eureka
// documents: elements are matched by local name. A UTF-8 BOM, comments, processing
// instructions and directives are skipped; a DTD is never expanded.
func parseXML(body []byte) (string, node, error) {
	d := xml.NewDecoder(bytes.NewReader(trimBOM(body)))
	d.CharsetReader = charsetReader
	var root string
	var n node
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if root == "" {
				return "", node{}, &BadRequestError{Msg: "malformed XML: no root element"}
			}
			return root, n, nil
		}
		if err != nil {
			return "", node{}, xmlError(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root != "" {
				return "", node{}, &BadRequestError{Msg: "malformed XML: more than one root element"}
			}
			root = t.Name.Local
			if n, err = xmlElement(d, t, 0); err != nil {
				return "", node{}, err
			}
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return "", node{}, &BadRequestError{Msg: "malformed XML: text outside the root element"}
			}
		}
	}
}

// xmlElement reads the content of start up to its end tag (encoding/xml
// checks that the tags match).
func xmlElement(d *xml.Decoder, start xml.StartElement, depth int) (node, error) {
	if depth >= maxDepth {
		return node{}, &BadRequestError{Msg: fmt.Sprintf("malformed XML: nesting deeper than %d", maxDepth)}
	}
	n := node{kind: kStr}
	for _, a := range start.Attr {
		if a.Name.Space == "xmlns" || a.Name.Space == "" && a.Name.Local == "xmlns" {
			continue
		}
		n.fields = append(n.fields, field{name: "@" + a.Name.Local, val: node{kind: kStr, text: a.Value}})
	}
	var text []byte
	for {
		tok, err := d.Token()
		if err != nil {
			return node{}, xmlError(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			c, err := xmlElement(d, t, depth+1)
			if err != nil {
				return node{}, err
			}
			n.kind = kObj
			n.fields = append(n.fields, field{name: t.Name.Local, val: c})
		case xml.CharData:
			if n.kind == kStr {
				text = append(text, t...)
			}
		case xml.EndElement:
			if n.kind == kStr {
				n.text = string(text)
			}
			return n, nil
		}
	}
}

func xmlError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return &BadRequestError{Msg: fmt.Sprintf("malformed XML at line %d: %s", se.Line, se.Msg)}
	}
	return &BadRequestError{Msg: "malformed XML: " + err.Error()}
}

// charsetReader lets encoding/xml read documents declared as ISO-8859-1 (or
// US-ASCII, a subset), the one charset besides UTF-8 Eureka accepts
// (docs/eureka-api.md, "Formats").
func charsetReader(label string, r io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii":
	default:
		return nil, fmt.Errorf("unsupported charset %q", label)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return bytes.NewReader(out), nil
}
