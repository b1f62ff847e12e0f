package datastream

import (
	"fmt"
	"strings"
	"time"
)

// parseTimestamp parses the timestamp forms Datastream and its consumers
// write, leniently: "2021-05-16T01:13:01.000Z", "2025-11-05T18:23:46.698000Z",
// "2021-12-25 05:42:04.408", "2024-01-02T03:04:05+02:00", "2024-01-02"
// (midnight). The date and time may be separated by T or a space; the
// fraction has 0 to 9 digits; the zone is absent (UTC), Z, UTC, or an offset
// ±HH, ±HHMM or ±HH:MM. hasZone reports whether a zone was written.
func parseTimestamp(s string) (t time.Time, hasZone bool, err error) {
	in := s
	s = strings.TrimSpace(s)
	bad := func(why string) (time.Time, bool, error) {
		return time.Time{}, false, fmt.Errorf("timestamp %q: %s", in, why)
	}
	num := func(n int) (int, bool) {
		if len(s) < n {
			return 0, false
		}
		v := 0
		for i := 0; i < n; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		s = s[n:]
		return v, true
	}
	expect := func(c byte) bool {
		if len(s) > 0 && s[0] == c {
			s = s[1:]
			return true
		}
		return false
	}
	year, ok := num(4)
	if !ok || !expect('-') {
		return bad("want YYYY-MM-DD")
	}
	month, ok := num(2)
	if !ok || !expect('-') {
		return bad("want YYYY-MM-DD")
	}
	day, ok := num(2)
	if !ok {
		return bad("want YYYY-MM-DD")
	}
	var hour, minute, sec, nanos int
	if s != "" && (s[0] == 'T' || s[0] == 't' || s[0] == ' ') {
		s = s[1:]
		if hour, ok = num(2); !ok || !expect(':') {
			return bad("want HH:MM")
		}
		if minute, ok = num(2); !ok {
			return bad("want HH:MM")
		}
		if expect(':') {
			if sec, ok = num(2); !ok {
				return bad("want seconds")
			}
			if len(s) > 0 && (s[0] == '.' || s[0] == ',') {
				s = s[1:]
				n := 0
				for n < len(s) && s[n] >= '0' && s[n] <= '9' {
					n++
				}
				if n == 0 || n > 9 {
					return bad("fraction must have 1 to 9 digits")
				}
				f, _ := num(n)
				for i := n; i < 9; i++ {
					f *= 10
				}
				nanos = f
			}
		}
	}
	loc := time.UTC
	rest := strings.TrimSpace(s)
	switch {
	case rest == "":
	case rest == "Z" || rest == "z" || rest == "UTC":
		hasZone = true
	case rest[0] == '+' || rest[0] == '-':
		sign := 1
		if rest[0] == '-' {
			sign = -1
		}
		s = rest[1:]
		oh, ok := num(2)
		if !ok {
			return bad("want a zone offset ±HH[:MM]")
		}
		om := 0
		if s != "" {
			expect(':')
			if om, ok = num(2); !ok || s != "" {
				return bad("want a zone offset ±HH[:MM]")
			}
		}
		if oh > 23 || om > 59 {
			return bad("zone offset out of range")
		}
		loc = time.FixedZone("", sign*(oh*3600+om*60))
		hasZone = true
	default:
		return bad(fmt.Sprintf("unexpected %q", rest))
	}
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return bad("field out of range")
	}
	t = time.Date(year, time.Month(month), day, hour, minute, sec, nanos, loc)
	if t.Day() != day {
		return bad("no such day")
	}
	return t.UTC(), hasZone, nil
}
