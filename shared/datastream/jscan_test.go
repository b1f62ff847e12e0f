package datastream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
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

func TestWordTestsAgreeWithByteTests(t *testing.T) {
	// Every byte value at every position of a word of plain text, and
	// random words: the word tests must answer as the byte tests do.
	words := [][8]byte{}
	for c := range 256 {
		for pos := range 8 {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[pos] = byte(c)
			words = append(words, w)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		words = append(words, w)
	}
	for _, w := range words {
		special, escOrHigh := false, false
		for _, c := range w {
			special = special || strSpecial[c]
			escOrHigh = escOrHigh || c == '\\' || c >= 0x80
		}
		x := binary.LittleEndian.Uint64(w[:])
		if got := hasStrSpecial(x); got != special {
			t.Fatalf("hasStrSpecial(%q) = %v, want %v", w, got, special)
		}
		if got := hasEscapeOrNonASCII(x); got != escOrHigh {
			t.Fatalf("hasEscapeOrNonASCII(%q) = %v, want %v", w, got, escOrHigh)
		}
	}
}

// FuzzMemberSpansAgreeWithEachMember checks that the members the framer
// records while validating an object, and those of the objects it holds,
// are those a walk of each object finds.
func FuzzMemberSpansAgreeWithEachMember(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":2}], "a\u0062":"x\"y", "d":{} } `, `{"a":1`, `[{"a":1}]`, `{"a":-1.5e3,"b":null,"c":true}`, `{"m":{"k":[1],"o":{"x":1}},"p":{"a":"b"}}`} {
		f.Add([]byte(s))
	}
	type member struct{ key, val string }
	walk := func(t *testing.T, obj []byte) []member {
		var out []member
		if err := eachMemberKey(obj, func(k, v []byte) error {
			out = append(out, member{string(k), string(v)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	fromSpans := func(t *testing.T, b []byte, spans []memberSpan) []member {
		var out []member
		if err := eachSpan(b, spans, func(k, v []byte, plain bool) error {
			// plain: a string of ASCII without escapes, which reads as
			// itself without a second look.
			want := len(v) >= 2 && v[0] == '"' && !bytes.ContainsAny(v[1:len(v)-1], "\\") && asciiOnly(v[1:len(v)-1])
			if plain != want {
				t.Fatalf("value %q: plain = %v, want %v", v, plain, want)
			}
			out = append(out, member{string(k), string(v)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var spans objectSpans
		end, err := scanValueMembers(data, 0, &spans)
		if err != nil {
			return
		}
		obj := data[skipSpace(data, 0):end]
		if obj[0] != '{' {
			if len(spans.top) != 0 || len(spans.kids) != 0 {
				t.Fatalf("recorded members of a %q value", obj[0])
			}
			return
		}
		if got, want := fromSpans(t, data, spans.top), walk(t, obj); !reflect.DeepEqual(got, want) {
			t.Fatalf("spans give %q, a walk gives %q", got, want)
		}
		for _, m := range spans.top {
			kids := spans.kids[m.kids[0]:m.kids[1]]
			v := data[m.valStart:m.valEnd]
			if v[0] != '{' {
				if len(kids) != 0 {
					t.Fatalf("recorded members of the %q value %s", v[0], v)
				}
				continue
			}
			if got, want := fromSpans(t, data, kids), walk(t, v); !reflect.DeepEqual(got, want) {
				t.Fatalf("spans of %s give %q, a walk gives %q", v, got, want)
			}
		}
	})
}

// unquoteCases are string bodies with every kind of escape and of bad
// UTF-8, at the start, middle and end.
var unquoteCases = []string{
	``, `plain`, `a\"b`, `\\`, `\/`, `\b\f\n\r\t`, `tab\there`, `\u00e9t\u00E9`,
	`\ud83d\ude00`, `x\ud83d\ude00y`, `\ud83d`, `\ud83dx`, `\ude00`, `\ud83d\u0041`,
	`\ud83d\ud83d\ude00`, `\u0000`, "caf\xc3\xa9", "bad\xffbyte", "\xc3", "\xed\xa0\x80",
	`\u12`, `\x41`, "mixed \u00e9 and \\n and \xff", strings.Repeat(`\"`, 200), strings.Repeat("é", 300),
}

func TestAppendUnquotedDecodesLikeEncodingJSON(t *testing.T) {
	for _, body := range unquoteCases {
		tok := []byte(`"` + body + `"`)
		var want string
		wantErr := json.Unmarshal(tok, &want)
		got, err := appendUnquoted([]byte("prefix"), tok)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%q: err = %v, encoding/json err = %v", body, err, wantErr)
			continue
		}
		if wantErr == nil && string(got) != "prefix"+want {
			t.Errorf("%q: got %q, encoding/json gives %q", body, got[len("prefix"):], want)
		}
		if wantErr == nil {
			if s, err := unquote(tok); err != nil || s != want {
				t.Errorf("%q: unquote = %q, %v; want %q", body, s, err, want)
			}
			var a strArena
			if s, err := a.unquote(tok); err != nil || s != want {
				t.Errorf("%q: strArena.unquote = %q, %v; want %q", body, s, err, want)
			}
		}
	}
}

func TestPlainStringIsValidUTF8WithoutABackslash(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for pos := 0; pos < n; pos++ {
			for _, bad := range []byte{'\\', 0xff, 0xc3} {
				b := bytes.Repeat([]byte{'a'}, n)
				b[pos] = bad
				want := utf8.Valid(b) && !bytes.ContainsRune(b, '\\')
				if got := plainString(b); got != want {
					t.Fatalf("plainString(%q) = %v, want %v", b, got, want)
				}
			}
		}
		if b := bytes.Repeat([]byte{'a'}, n); !plainString(b) {
			t.Fatalf("plainString(%q) = false", b)
		}
	}
	if !plainString([]byte("caf\xc3\xa9 au lait, déjà vu")) {
		t.Error("valid UTF-8 without a backslash is not plain")
	}
}

func FuzzAppendUnquotedMatchesEncodingJSON(f *testing.F) {
	for _, c := range unquoteCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tok := append(append([]byte{'"'}, body...), '"')
		var want string
		wantErr := json.Unmarshal(tok, &want)
		got, err := appendUnquoted(nil, tok)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("%q: no error, encoding/json says %v", body, wantErr)
			}
			return
		}
		if err != nil || string(got) != want {
			t.Fatalf("%q: got %q, %v; encoding/json gives %q", body, got, err, want)
		}
	})
}

func asciiOnly(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func TestScanValueMembersRecordsAtMostMaxMembers(t *testing.T) {
	object := func(top, kids int) []byte {
		b := []byte(`{"p":{`)
		for i := range kids {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `"k":1`...)
		}
		b = append(b, '}')
		for range top - 1 {
			b = append(b, `,"t":2`...)
		}
		return append(b, '}')
	}
	for _, tt := range []struct {
		name      string
		top, kids int
		err       error
	}{
		{"maxMembers members in all", 100, maxMembers - 100, nil},
		{"one member more, in an object", 100, maxMembers - 99, errTooManyMembers},
		{"one member more, at the top", 101, maxMembers - 100, errTooManyMembers},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var spans objectSpans
			_, err := scanValueMembers(object(tt.top, tt.kids), 0, &spans)
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err == nil && (len(spans.top) != tt.top || len(spans.kids) != tt.kids) {
				t.Fatalf("recorded %d and %d members, want %d and %d", len(spans.top), len(spans.kids), tt.top, tt.kids)
			}
		})
	}
}
