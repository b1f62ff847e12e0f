package datastream

import (
	"encoding/json"
	"errors"
	"fmt"
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
	if i >= len(b) {
		return i, errJSONIncomplete
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
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
			if c == '{' {
				if i >= len(b) {
					return i, errJSONIncomplete
				}
				if b[i] != '"' {
					return i, &jsonSyntaxError{"object key is not a string", i}
				}
				if i, err = scanString(b, i); err != nil {
					return i, err
				}
				i = skipSpace(b, i)
				if i >= len(b) {
					return i, errJSONIncomplete
				}
				if b[i] != ':' {
					return i, &jsonSyntaxError{"missing : after object key", i}
				}
				i++
			}
			if i, err = scanValueDepth(b, skipSpace(b, i), depth+1); err != nil {
				return i, err
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

// scanString scans a string starting at the quote b[i].
func scanString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, errJSONIncomplete
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						return i, errJSONIncomplete
					}
					h := b[i+k]
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, &jsonSyntaxError{"invalid \\u escape", i}
					}
				}
				i += 6
			default:
				return i, &jsonSyntaxError{"invalid escape", i}
			}
		case c < 0x20:
			return i, &jsonSyntaxError{"control character in string", i}
		default:
			i++
		}
	}
	return i, errJSONIncomplete
}

// unquote returns the text of a complete JSON string token.
func unquote(tok []byte) (string, error) {
	body := tok[1 : len(tok)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain || (utf8.Valid(body) && !containsByte(body, '\\')) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(tok, &s)
	return s, err
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// eachMember calls fn for every member of the JSON object obj (a complete,
// valid value), in order, with the unquoted key and the raw value.
func eachMember(obj []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		ke, err := scanString(obj, i)
		if err != nil {
			return err
		}
		key, err := unquote(obj[i:ke])
		if err != nil {
			return err
		}
		i = skipSpace(obj, ke) + 1 // past ':'
		vs := skipSpace(obj, i)
		ve, err := scanValueDepth(obj, vs, 1)
		if err != nil {
			return err
		}
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
		ve, err := scanValueDepth(arr, i, 1)
		if err != nil {
			return err
		}
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
