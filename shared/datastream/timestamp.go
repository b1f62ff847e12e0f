package datastream

import (
	"fmt"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
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

// fastMicros reads the timestamp forms Datastream writes,
// "2021-05-16T01:13:01.000Z" and "2021-12-25 05:42:04.408" (0 to 9
// fraction digits; zone Z, z, UTC or none), as microseconds since the
// epoch without building a time.Time; ok is false for anything else,
// including invalid dates, which parseTimestamp then reads or refuses. It
// agrees with value.MicrosOf(parseTimestamp(s)) on every input it accepts.
func fastMicros[T ~string | ~[]byte](b T) (us value.Micros, ok bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	num := func(i, n int) int {
		v := 0
		for k := i; k < i+n; k++ {
			c := b[k]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, false
	}
	rest := b[19:]
	nanos := 0
	if len(rest) > 0 && (rest[0] == '.' || rest[0] == ',') {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			nanos = nanos*10 + int(rest[n]-'0')
			n++
		}
		if n == 1 || n > 10 {
			return 0, false
		}
		for i := n; i < 10; i++ {
			nanos *= 10
		}
		rest = rest[n:]
	}
	switch string(rest) {
	case "", "Z", "z", "UTC":
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return value.Micros(secs*1_000_000 + int64(nanos/1000)), true
}

// daysIn is the number of days of a month of the proleptic Gregorian
// calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to a date of the
// proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := m + 9
	if m > 2 {
		mp = m - 3
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
