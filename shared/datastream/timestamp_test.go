package datastream

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// checkFastMicros fails when fastMicros accepts s but reads it otherwise
// than parseTimestamp does.
func checkFastMicros(t *testing.T, s string) (accepted bool) {
	t.Helper()
	got, ok := fastMicros([]byte(s))
	if gotStr, okStr := fastMicros(s); gotStr != got || okStr != ok {
		t.Fatalf("fastMicros of the string %q = %d, %v; of its bytes %d, %v", s, gotStr, okStr, got, ok)
	}
	// strictTimestamp, which reads through fastMicros what it can, reads
	// what it accepts as parseTimestamp does.
	if us, strict := strictTimestamp(s); strict {
		tm, _, err := parseTimestamp(s)
		if err != nil || value.MicrosOf(tm) != us {
			t.Fatalf("strictTimestamp(%q) = %d; parseTimestamp gives %v, %v", s, us, tm, err)
		}
	}
	if !ok {
		return false
	}
	tm, _, err := parseTimestamp(s)
	if err != nil {
		t.Fatalf("fastMicros(%q) = %d, but parseTimestamp refuses it: %v", s, got, err)
	}
	if want := value.MicrosOf(tm); got != want {
		t.Fatalf("fastMicros(%q) = %d, parseTimestamp gives %d", s, got, want)
	}
	return true
}

func TestFastMicrosAgreesWithParseTimestamp(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		accepted bool
	}{
		{"milliseconds in UTC", "2021-05-16T01:13:01.000Z", true},
		{"microseconds in UTC", "2025-11-05T18:23:46.698000Z", true},
		{"a space and no zone", "2021-12-25 05:42:04.408", true},
		{"nanoseconds", "2024-01-02T03:04:05.123456789Z", true},
		{"no fraction", "2024-01-02T03:04:05Z", true},
		{"a lower-case t and z", "2024-01-02t03:04:05z", true},
		{"the UTC zone name", "2024-01-02 03:04:05 UTC", false},
		{"UTC without a space", "2024-01-02T03:04:05UTC", true},
		{"a leap day", "2024-02-29T00:00:00Z", true},
		{"the leap day of a century year divisible by 400", "2000-02-29T12:00:00Z", true},
		{"the leap day of a century year that is not a leap year", "1900-02-29T12:00:00Z", false},
		{"the 31st of a 30-day month", "2024-04-31T00:00:00Z", false},
		{"a date before 1970", "1969-12-31T23:59:59.999999Z", true},
		{"year zero", "0000-03-01T00:00:00Z", true},
		{"an offset", "2024-01-02T03:04:05+02:00", false},
		{"a date alone", "2024-01-02", false},
		{"minutes only", "2024-01-02T03:04", false},
		{"ten fraction digits", "2024-01-02T03:04:05.1234567890Z", false},
		{"a dot without digits", "2024-01-02T03:04:05.Z", false},
		{"hour 24", "2024-01-02T24:00:00Z", false},
		{"second 60", "2024-01-02T23:59:60Z", false},
		{"month 13", "2024-13-02T00:00:00Z", false},
		{"a letter in the year", "20x4-01-02T00:00:00Z", false},
		{"surrounding spaces", " 2024-01-02T03:04:05Z", false},
		{"trailing text", "2024-01-02T03:04:05Zx", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkFastMicros(t, tt.in); got != tt.accepted {
				t.Errorf("fastMicros(%q) accepted = %v, want %v", tt.in, got, tt.accepted)
			}
		})
	}
	t.Run("random instants from year 0 to 9999 read as parseTimestamp reads them", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for range 20000 {
			s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%0*dZ", rng.IntN(10000), 1+rng.IntN(12), 1+rng.IntN(31),
				rng.IntN(24), rng.IntN(60), rng.IntN(60), 1+rng.IntN(9), rng.IntN(1000))
			_, _, err := parseTimestamp(s)
			if accepted := checkFastMicros(t, s); accepted != (err == nil) {
				t.Fatalf("fastMicros(%q) accepted = %v, parseTimestamp err = %v", s, accepted, err)
			}
		}
	})
}

func FuzzFastMicrosAgreesWithParseTimestamp(f *testing.F) {
	for _, s := range []string{"2021-05-16T01:13:01.000Z", "2021-12-25 05:42:04.408", "0000-02-29T00:00:00Z", "9999-12-31T23:59:59.999999999UTC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFastMicros(t, s) })
}
