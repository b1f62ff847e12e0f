package datastream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// scanWhole reports whether data is exactly one JSON value with optional
// surrounding whitespace, per the package scanner.
func scanWhole(data []byte) bool {
	end, err := scanValue(data, 0)
	if errors.Is(err, errJSONIncomplete) {
		// A number at the very end completes at end of input.
		end, err = scanValue(append(append([]byte(nil), data...), ' '), 0)
		if err == nil && end > len(data) {
			return false
		}
	}
	return err == nil && skipSpace(data, end) == len(data)
}

func FuzzScanJSONAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,-2.5e+3,"x\u00e9\n",true,false,null,{}]}`, `0`, `-0.0E1`, `"\ud800"`, `[1,]`, `{"a" 1}`, `01`, `1.`, `"\x"`, "\"\xff\"", `[[[[]]]]`, ` {"a":"b"} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := scanWhole(data), json.Valid(data); got != want {
			t.Fatalf("scanner says valid=%v, encoding/json says %v, for %q", got, want, data)
		}
		if !json.Valid(data) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		got, err := genericJSON(data, 0)
		if err != nil {
			if errors.Is(err, errJSONIncomplete) {
				return
			}
			if err.Error() == "nested too deeply" {
				return
			}
			t.Fatalf("genericJSON(%q): %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("genericJSON(%q) = %#v, encoding/json = %#v", data, got, want)
		}
	})
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{`"plain"`, `"é ü"`, `"a\nb"`, `"\u00e9"`, "\"\xff\"", `"\ud83d\ude00"`, `""`} {
		t.Run(s+" unquotes like encoding/json", func(t *testing.T) {
			var want string
			if err := json.Unmarshal([]byte(s), &want); err != nil {
				t.Fatal(err)
			}
			got, err := unquote([]byte(s))
			if err != nil || got != want {
				t.Errorf("unquote = %q, %v; want %q", got, err, want)
			}
		})
	}
}
