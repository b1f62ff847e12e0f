package datastream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON scanner for the hot path: it finds the extent of values and
// walks objects without building intermediate maps, and never converts
// numbers. Its grammar is RFC 8259's, checked against encoding/json by
// FuzzScanJSONAgreesWithEncodingJSON; string unescaping falls back to
// encoding/json whenever a string holds an escape or invalid UTF-8.

// errJSONIncomplete means the input ended inside a value.
var errJSONIncomplete = errors.New("unexpected end of JSON input")

// maxJSONDepth bounds nesting, as encoding/json does.
const maxJSONDepth = 10000

type jsonSyntaxError struct {
	msg string
	off int
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue returns the index just past the JSON value starting at b[i]
// (after optional whitespace).
func scanValue(b []byte, i int) (int, error) {
	return scanValueDepth(b, skipSpace(b, i), 0)
}

func scanValueDepth(b []byte, i, depth int) (int, error) {
	return scanValueSpans(b, i, depth, nil)
}

// memberSpan locates a member of an object in the scanned input: the key
// token is b[keyStart:keyEnd] and the value b[valStart:valEnd]. For a
// member of the top object, kids[0]:kids[1] indexes the members of its
// value in objectSpans.kids (none unless the value is an object).
type memberSpan struct {
	keyStart, keyEnd, valStart, valEnd int
	kids                               [2]int
	// keyPlain: the key reads as itself (see scanString); valPlain: so
	// does the value, a string.
	keyPlain, valPlain bool
}

// objectSpans locates, in a scanned object, its members (top) and the
// members of the objects that are their values (kids), so that a caller
// walking them need not find them again.
type objectSpans struct {
	top  []memberSpan
	kids []memberSpan
}

// maxMembers bounds the members scanValueMembers records in one value:
// their spans take ten times the bytes of the shortest members, so a value
// of tiny members would otherwise take ten times MaxRecordBytes. An event
// has a dozen members and a payload column each, and no database allows
// 65536 columns.
const maxMembers = 1 << 16

// errTooManyMembers refuses a value of more than maxMembers members.
var errTooManyMembers = fmt.Errorf("more than %d fields in an event, its source_metadata and its payload", maxMembers)

// scanValueMembers is scanValue that also records in spans the members of
// the value and of its member objects when it is an object (and nothing
// otherwise), as offsets into b. It fails with errTooManyMembers rather
// than record more than maxMembers.
func scanValueMembers(b []byte, i int, spans *objectSpans) (int, error) {
	spans.top, spans.kids = spans.top[:0], spans.kids[:0]
	return scanValueSpans(b, skipSpace(b, i), 0, spans)
}

// scanValueSpans is scanValueDepth, recording in spans (when not nil) the
// members of an object at depth 0 in spans.top and of objects at depth 1
// in spans.kids; deeper values are not recorded.
func scanValueSpans(b []byte, i, depth int, spans *objectSpans) (int, error) {
	if i >= len(b) {
		return i, errJSONIncomplete
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return i, &jsonSyntaxError{"nested too deeply", i}
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return i, errJSONIncomplete
		}
		if b[i] == closer {
			return i + 1, nil
		}
		for {
			var err error
			var m memberSpan
			if c == '{' {
				if i >= len(b) {
					return i, errJSONIncomplete
				}
				if b[i] != '"' {
					return i, &jsonSyntaxError{"object key is not a string", i}
				}
				m.keyStart = i
				if i, m.keyPlain, err = scanString(b, i); err != nil {
					return i, err
				}
				m.keyEnd = i
				i = skipSpace(b, i)
				if i >= len(b) {
					return i, errJSONIncomplete
				}
				if b[i] != ':' {
					return i, &jsonSyntaxError{"missing : after object key", i}
				}
				i++
			}
			m.valStart = skipSpace(b, i)
			var inner *objectSpans
			if depth == 0 && c == '{' {
				inner = spans
			}
			if inner != nil {
				m.kids[0] = len(spans.kids)
			}
			if m.valStart < len(b) && b[m.valStart] == '"' {
				i, m.valPlain, err = scanString(b, m.valStart)
			} else {
				i, err = scanValueSpans(b, m.valStart, depth+1, inner)
			}
			if err != nil {
				return i, err
			}
			if c == '{' && spans != nil {
				if len(spans.top)+len(spans.kids) >= maxMembers {
					return i, errTooManyMembers
				}
				m.valEnd = i
				switch depth {
				case 0:
					m.kids[1] = len(spans.kids)
					spans.top = append(spans.top, m)
				case 1:
					spans.kids = append(spans.kids, m)
				}
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errJSONIncomplete
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case closer:
				return i + 1, nil
			default:
				return i, &jsonSyntaxError{"missing , or closing bracket", i}
			}
		}
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	default:
		return i, &jsonSyntaxError{fmt.Sprintf("unexpected %q", c), i}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, errJSONIncomplete
		}
		if b[i+k] != lit[k] {
			return i + k, &jsonSyntaxError{"invalid literal", i + k}
		}
	}
	return i + len(lit), nil
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. A number
// at the very end of the input is incomplete: more digits may follow.
func scanNumber(b []byte, i int) (int, error) {
	start := i
	digits := func() (int, error) {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		if i >= len(b) {
			return n, errJSONIncomplete
		}
		return n, nil
	}
	if b[i] == '-' {
		i++
		if i >= len(b) {
			return i, errJSONIncomplete
		}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		if _, err := digits(); err != nil {
			return i, err
		}
	default:
		return i, &jsonSyntaxError{"invalid number", start}
	}
	if i >= len(b) {
		return i, errJSONIncomplete
	}
	if b[i] == '.' {
		i++
		n, err := digits()
		if n == 0 && err == nil {
			return i, &jsonSyntaxError{"invalid number", start}
		}
		if err != nil {
			return i, err
		}
	}
	if b[i] == 'e' || b[i] == 'E' {
		i++
		if i >= len(b) {
			return i, errJSONIncomplete
		}
		if b[i] == '+' || b[i] == '-' {
			i++
		}
		n, err := digits()
		if n == 0 && err == nil {
			return i, &jsonSyntaxError{"invalid number", start}
		}
		if err != nil {
			return i, err
		}
	}
	return i, nil
}

// strSpecial marks the bytes that end a run of plain string text: the
// closing quote, a backslash and the control characters.
var strSpecial = [256]bool{'"': true, '\\': true,
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0a: true, 0x0b: true, 0x0c: true, 0x0d: true, 0x0e: true, 0x0f: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1a: true, 0x1b: true, 0x1c: true, 0x1d: true, 0x1e: true, 0x1f: true}

// Word-at-a-time tests on 8 bytes read little-endian: each reports whether
// any of the bytes is of the kind (exactly, though not which byte).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZeroByte reports whether a byte of x is 0.
func hasZeroByte(x uint64) bool { return (x-ones)&^x&highs != 0 }

// hasStrSpecial reports whether a byte of x is a quote, a backslash or a
// control character (the bytes strSpecial marks).
func hasStrSpecial(x uint64) bool {
	return (x-ones*0x20)&^x&highs != 0 || hasZeroByte(x^(ones*'"')) || hasZeroByte(x^(ones*'\\'))
}

// hasEscapeOrNonASCII reports whether a byte of x is a backslash or not
// ASCII.
func hasEscapeOrNonASCII(x uint64) bool {
	return x&highs != 0 || hasZeroByte(x^(ones*'\\'))
}

// plainPrefix returns how many leading bytes of b, in whole words, hold
// neither a backslash nor a non-ASCII byte.
func plainPrefix(b []byte) int {
	i := 0
	for i+8 <= len(b) && !hasEscapeOrNonASCII(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	return i
}

// scanString scans a string starting at the quote b[i]. plain reports
// that its body holds no escape and only ASCII, so it reads as itself
// (plainString, known without a second look at its bytes).
func scanString(b []byte, i int) (end int, plain bool, err error) {
	i++
	var seen uint64 // every byte of the body, or-ed: its high bits tell non-ASCII
	escaped := false
	for i < len(b) {
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			if hasStrSpecial(w) {
				break
			}
			seen |= w
			i += 8
		}
		for i < len(b) && !strSpecial[b[i]] {
			seen |= uint64(b[i])
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, !escaped && seen&highs == 0, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, false, errJSONIncomplete
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						return i, false, errJSONIncomplete
					}
					h := b[i+k]
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false, &jsonSyntaxError{"invalid \\u escape", i}
					}
				}
				i += 6
			default:
				return i, false, &jsonSyntaxError{"invalid escape", i}
			}
		case c < 0x20:
			return i, false, &jsonSyntaxError{"control character in string", i}
		default:
			i++
		}
	}
	return i, false, errJSONIncomplete
}

// unquote returns the text of a complete JSON string token.
func unquote(tok []byte) (string, error) {
	body := tok[1 : len(tok)-1]
	if plainString(body) {
		return string(body), nil
	}
	var buf [256]byte
	out, err := appendUnquoted(buf[:0], tok)
	return string(out), err
}

// appendUnquoted appends the text of the JSON string token tok to dst, as
// encoding/json decodes it: escapes resolved, a surrogate pair joined, a
// lone surrogate and every byte of invalid UTF-8 replaced by U+FFFD.
// Tokens the scanner did not vet (a control character, a bad escape) go
// to encoding/json, for its error.
func appendUnquoted(dst, tok []byte) ([]byte, error) {
	body := tok[1 : len(tok)-1]
	start := len(dst)
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return jsonUnquoteSlow(dst[:start], tok)
			}
			switch e := body[i+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(body[i+2:])
				if !ok {
					return jsonUnquoteSlow(dst[:start], tok)
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
						r2, ok2 = hex4(body[i+2:])
					}
					if d := utf16.DecodeRune(r, r2); ok2 && d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return jsonUnquoteSlow(dst[:start], tok)
			}
			i += 2
		case c < 0x20 || c == '"':
			return jsonUnquoteSlow(dst[:start], tok)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			dst = utf8.AppendRune(dst, r) // U+FFFD for a byte of bad UTF-8
			i += size
		}
	}
	return dst, nil
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// jsonUnquoteSlow is appendUnquoted through encoding/json.
func jsonUnquoteSlow(dst, tok []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// plainString reports whether a string token's body reads as itself: no
// escapes and valid UTF-8 (the cases unquote copies without encoding/json).
func plainString(body []byte) bool {
	n := len(body)
	if n < 8 {
		for _, c := range body {
			if c == '\\' || c >= utf8.RuneSelf {
				return !containsByte(body, '\\') && utf8.Valid(body)
			}
		}
		return true
	}
	// Whole words, then the tail as one word overlapping the words already
	// checked: no byte loop for the common short string.
	if i := plainPrefix(body); i+8 <= n || (i < n && hasEscapeOrNonASCII(binary.LittleEndian.Uint64(body[n-8:]))) {
		return !containsByte(body, '\\') && utf8.Valid(body)
	}
	return true
}

// Bounds of a strCache: enough for every key and table name of a file, small
// enough that a file of unique values cannot make it grow without limit.
const (
	maxCachedStrings   = 1024
	maxCachedStringLen = 64
)

// strCache interns short strings that repeat from line to line (object keys,
// table names, read methods), so that decoding a file allocates each of them
// once instead of once per event. Interned strings are immutable and may be
// shared by any number of events. A nil *strCache interns nothing.
type strCache struct {
	m map[string]string
	// recent is a direct-mapped cache in front of m: a repeated key is
	// found by comparing bytes, without hashing all of them.
	recent [256]string
}

// slot picks b's entry in recent from its length and a few of its bytes.
func slot(b []byte) uint8 {
	if len(b) == 0 {
		return 0
	}
	return uint8(len(b)*31 + int(b[0])*7 + int(b[len(b)/2])*3 + int(b[len(b)-1]))
}

// intern returns b as a string, shared with earlier calls for the same bytes.
func (c *strCache) intern(b []byte) string {
	if c == nil {
		return string(b)
	}
	h := slot(b)
	if s := c.recent[h]; s == string(b) && len(b) > 0 {
		return s
	}
	if s, ok := c.m[string(b)]; ok {
		c.recent[h] = s
		return s
	}
	s := string(b)
	if len(b) <= maxCachedStringLen && len(c.m) < maxCachedStrings {
		if c.m == nil {
			c.m = make(map[string]string, 64)
		}
		c.m[s] = s
		c.recent[h] = s
	}
	return s
}

// unquoteSpan is unquote of a token scanString found plain or not.
func (c *strCache) unquoteSpan(tok []byte, plain bool) (string, error) {
	if plain {
		return c.intern(tok[1 : len(tok)-1]), nil
	}
	return c.unquote(tok)
}

// unquote is the package's unquote, interning strings without escapes.
func (c *strCache) unquote(tok []byte) (string, error) {
	if body := tok[1 : len(tok)-1]; plainString(body) {
		return c.intern(body), nil
	}
	return unquote(tok)
}

// eachMember calls fn for every member of the JSON object obj (a complete,
// valid value), in order, with the unquoted key and the raw value.
func eachMember(obj []byte, fn func(key string, val []byte) error) error {
	return eachMemberKey(obj, func(key, val []byte) error { return fn(string(key), val) })
}

// eachSpan is eachMemberKey over the members of an object that
// scanValueMembers located in b; plain is the member's valPlain.
func eachSpan(b []byte, spans []memberSpan, fn func(key, val []byte, plain bool) error) error {
	for _, m := range spans {
		key := b[m.keyStart+1 : m.keyEnd-1]
		if !m.keyPlain {
			var err error
			if key, err = keyText(b[m.keyStart:m.keyEnd]); err != nil {
				return err
			}
		}
		if err := fn(key, b[m.valStart:m.valEnd], m.valPlain); err != nil {
			return err
		}
	}
	return nil
}

// keyText returns the text of a valid string token: its body when that
// reads as itself (no copy), else the unquoted text.
func keyText(tok []byte) ([]byte, error) {
	if body := tok[1 : len(tok)-1]; plainString(body) {
		return body, nil
	}
	s, err := unquote(tok)
	return []byte(s), err
}

// eachMemberKey calls fn for every member of the JSON object obj (a
// complete, valid value), in order, with the key's text and the raw value.
// The key is valid during the call: callers that only compare keys need not
// make strings.
func eachMemberKey(obj []byte, fn func(key, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		ke := skipValid(obj, i)
		key, err := keyText(obj[i:ke])
		if err != nil {
			return err
		}
		i = skipSpace(obj, ke) + 1 // past ':'
		vs := skipSpace(obj, i)
		ve := skipValid(obj, vs)
		if err := fn(key, obj[vs:ve]); err != nil {
			return err
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // past ','
	}
	return nil
}

// skipValid returns the index just past the value starting at b[i], which
// is part of a value scanValue accepted: validation is done, so it only
// needs to find the end, which it does faster than scanValue.
func skipValid(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipValidString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipValidString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number or a literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipValidString returns the index just past the valid string token that
// starts at the quote b[i].
func skipValidString(b []byte, i int) int {
	i++
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return len(b)
		}
		i += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// eachElement calls fn for every element of the JSON array arr (a complete,
// valid value).
func eachElement(arr []byte, fn func(val []byte) error) error {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for i < len(arr) {
		ve := skipValid(arr, i)
		if err := fn(arr[i:ve]); err != nil {
			return err
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] == ']' {
			return nil
		}
		i = skipSpace(arr, i+1)
	}
	return nil
}

// genericJSON converts a valid JSON value to Go: nil, bool, json.Number,
// string, []any, map[string]any.
func genericJSON(v []byte, depth int) (any, error) {
	if depth > 64 {
		return nil, errors.New("nested too deeply")
	}
	v = v[skipSpace(v, 0):]
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	if len(v) == 0 {
		return nil, errJSONIncomplete
	}
	switch c := v[0]; {
	case c == 'n':
		return nil, nil
	case c == 't':
		return true, nil
	case c == 'f':
		return false, nil
	case c == '"':
		return unquote(v)
	case c == '[':
		out := []any{}
		err := eachElement(v, func(e []byte) error {
			x, err := genericJSON(e, depth+1)
			out = append(out, x)
			return err
		})
		return out, err
	case c == '{':
		out := map[string]any{}
		err := eachMember(v, func(k string, e []byte) error {
			x, err := genericJSON(e, depth+1)
			out[k] = x
			return err
		})
		return out, err
	default:
		return json.Number(v), nil
	}
}
