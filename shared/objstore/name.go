package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxNameBytes is the longest object name GCS accepts; every backend enforces
// it so that a name that works locally also works in the cloud.
const maxNameBytes = 1024

// ValidName reports whether name is a valid object name: relative,
// '/'-separated, with no empty, "." or ".." segments, no leading or trailing
// '/', no backslash, NUL, carriage return or line feed, valid UTF-8 and at
// most 1024 bytes. The last four rules are GCS's own, enforced everywhere so
// that the local backends accept exactly what the cloud accepts. Such a name
// can never escape the root of a store. The error wraps ErrInvalidName.
func ValidName(name string) error {
	if why := invalidName(name); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidName, name, why)
	}
	return nil
}

func invalidName(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > maxNameBytes:
		return fmt.Sprintf("longer than %d bytes", maxNameBytes)
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case strings.HasPrefix(name, "/"):
		return "absolute"
	case strings.ContainsAny(name, "\\\x00\r\n"):
		return "contains a backslash, NUL, carriage return or line feed"
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch seg {
		case "":
			return "has an empty segment"
		case ".", "..":
			return fmt.Sprintf("has a %q segment", seg)
		}
	}
	return ""
}

// validPrefix checks a List prefix. A prefix need not be a whole name ("a/b-"
// is fine), but everything up to its last '/' must be, so that no backend
// ever looks outside its root.
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.ContainsAny(prefix, "\\\x00") {
		return fmt.Errorf("%w: prefix %q contains a backslash or NUL", ErrInvalidName, prefix)
	}
	if dir, _, ok := cutLast(prefix, "/"); ok {
		if err := ValidName(dir); err != nil {
			return fmt.Errorf("prefix %q: %w", prefix, err)
		}
	}
	return nil
}

// cutLast slices s around the last instance of sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// checkOptions rejects contradictory write preconditions.
func checkOptions(opts WriteOptions) error {
	if opts.IfAbsent && opts.IfGenerationMatch > 0 {
		return fmt.Errorf("objstore: IfAbsent and IfGenerationMatch are mutually exclusive")
	}
	if opts.IfGenerationMatch < 0 {
		return fmt.Errorf("objstore: IfGenerationMatch %d is negative", opts.IfGenerationMatch)
	}
	return nil
}
