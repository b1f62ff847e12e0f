package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
)

// pushBody is the body Pub/Sub pushes for the finalize notification of
// gs://datastream/name.
func pushBody(t testing.TB, name string) []byte {
	t.Helper()
	now := time.Now()
	msg, err := finalizeNotification(&storage.ObjectAttrs{Bucket: "datastream", Name: name, Generation: 1, Size: 10, Created: now, Updated: now}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{
		"message":      map[string]any{"attributes": msg.Attributes, "data": base64.StdEncoding.EncodeToString(msg.Data), "messageId": "1"},
		"subscription": "projects/p/subscriptions/onfile",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upstream is a fake onfile that records the objects it was pushed.
type upstream struct {
	mu    sync.Mutex
	names []string
	last  *http.Request
	body  []byte
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var env struct {
		Message struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"message"`
	}
	_ = json.Unmarshal(b, &env)
	name := env.Message.Attributes["objectId"]
	u.mu.Lock()
	u.names, u.last, u.body = append(u.names, name), r, b
	u.mu.Unlock()
	if strings.HasSuffix(name, "fail.jsonl") {
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "try again")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.names)
}

// startFilter serves a drop filter in front of a fake onfile.
func startFilter(t *testing.T, rate float64, seed uint64) (*dropFilter, *upstream) {
	t.Helper()
	up := &upstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	f, err := startDropFilter(srv.URL, rate, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f, up
}

// push posts a body to the filter as Pub/Sub pushes it and returns the
// answer's status and body.
func push(t *testing.T, f *dropFilter, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(f.URL()+"/projects/p/topics/gcs-notifications", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDropFilter(t *testing.T) {
	t.Run("drops about the configured share and records exactly the names it drops, in order", func(t *testing.T) {
		const n, rate = 400, 0.3
		f, up := startFilter(t, rate, 7)
		var sent []string
		for i := range n {
			name := fmt.Sprintf("shop_customers/2026/01/05/10/00/f%03d.jsonl", i)
			sent = append(sent, name)
			status, _ := push(t, f, pushBody(t, name))
			if status != http.StatusOK && status != http.StatusNoContent {
				t.Fatalf("push of %s answered %d", name, status)
			}
		}
		dropped, got := f.droppedNames(), up.received()
		// Four standard deviations of the binomial count either side.
		sd := math.Sqrt(n * rate * (1 - rate))
		if d := float64(len(dropped)); d < n*rate-4*sd || d > n*rate+4*sd {
			t.Errorf("dropped %d of %d at rate %v", len(dropped), n, rate)
		}
		// Sent one after the other: what was not forwarded, in order, is
		// exactly what the filter says it dropped.
		var missing []string
		for _, name := range sent {
			if !slices.Contains(got, name) {
				missing = append(missing, name)
			}
		}
		if !slices.Equal(missing, dropped) {
			t.Errorf("not forwarded %d names, recorded %d dropped; first not forwarded %v, first recorded %v",
				len(missing), len(dropped), missing[:min(3, len(missing))], dropped[:min(3, len(dropped))])
		}
		if len(got)+len(dropped) != n {
			t.Errorf("forwarded %d and dropped %d of %d", len(got), len(dropped), n)
		}
	})

	t.Run("the same seed drops the same notifications", func(t *testing.T) {
		var runs [2][]string
		for i := range runs {
			f, _ := startFilter(t, 0.5, 11)
			for j := range 40 {
				push(t, f, pushBody(t, fmt.Sprintf("t/f%02d.jsonl", j)))
			}
			runs[i] = f.droppedNames()
		}
		if !slices.Equal(runs[0], runs[1]) || len(runs[0]) == 0 {
			t.Errorf("two runs with seed 11 dropped %v and %v", runs[0], runs[1])
		}
	})

	t.Run("a forwarded push reaches onfile unchanged and its answer comes back", func(t *testing.T) {
		f, up := startFilter(t, 0, 1)
		body := pushBody(t, "t/fail.jsonl")
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/projects/p/topics/gcs-notifications?x=1", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Goog-Test", "kept")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || string(answer) != "try again" || resp.Header.Get("X-Upstream") != "yes" {
			t.Errorf("answer %d %q (X-Upstream %q), want onfile's 503 \"try again\"", resp.StatusCode, answer, resp.Header.Get("X-Upstream"))
		}
		up.mu.Lock()
		defer up.mu.Unlock()
		r := up.last
		if r == nil {
			t.Fatal("onfile got nothing")
		}
		if r.Method != http.MethodPost || r.URL.RequestURI() != "/projects/p/topics/gcs-notifications?x=1" ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Goog-Test") != "kept" || r.Header.Get("X-Forwarded-For") != "" {
			t.Errorf("onfile got %s %s with headers %v", r.Method, r.URL.RequestURI(), r.Header)
		}
		if !bytes.Equal(up.body, body) {
			t.Errorf("onfile got body %q, want %q", up.body, body)
		}
	})

	t.Run("SetDropRate 1 drops every notification and 0 none", func(t *testing.T) {
		f, up := startFilter(t, 0, 1)
		f.setRate(1)
		for i := range 10 {
			if status, _ := push(t, f, pushBody(t, fmt.Sprintf("t/a%d.jsonl", i))); status != http.StatusNoContent {
				t.Errorf("a dropped push answered %d, want 204", status)
			}
		}
		f.setRate(0)
		for i := range 10 {
			push(t, f, pushBody(t, fmt.Sprintf("t/b%d.jsonl", i)))
		}
		if d, g := f.droppedNames(), up.received(); len(d) != 10 || len(g) != 10 || !strings.Contains(d[9], "/a9") || !strings.Contains(g[0], "/b0") {
			t.Errorf("dropped %v, forwarded %v", d, g)
		}
	})

	t.Run("a body that is no notification passes even at rate 1", func(t *testing.T) {
		f, up := startFilter(t, 1, 1)
		if status, _ := push(t, f, []byte(`{"message":{"data":"e30="}}`)); status != http.StatusOK {
			t.Errorf("answered %d, want onfile's 200", status)
		}
		if len(up.received()) != 1 || len(f.droppedNames()) != 0 {
			t.Errorf("forwarded %d, dropped %v", len(up.received()), f.droppedNames())
		}
	})

	t.Run("rates outside 0 to 1 are clamped", func(t *testing.T) {
		f, _ := startFilter(t, 0, 1)
		for _, tc := range []struct{ set, want float64 }{{-1, 0}, {2, 1}, {math.NaN(), 0}, {0.25, 0.25}} {
			f.setRate(tc.set)
			if f.rate != tc.want {
				t.Errorf("setRate(%v) left rate %v, want %v", tc.set, f.rate, tc.want)
			}
		}
	})
}

// BenchmarkDropFilterHop measures what the filter adds to a push at rate 0,
// the stack's default: each round pushes to a fake onfile directly and
// through the filter, and reports both and the difference, in microseconds.
func BenchmarkDropFilterHop(b *testing.B) {
	body := pushBody(b, "shop_customers/2026/01/05/10/00/f.jsonl")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	f, err := startDropFilter(up.URL, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer f.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(base string) time.Duration {
		start := time.Now()
		resp, err := client.Post(base+"/projects/p/topics/gcs-notifications", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	var direct, filtered time.Duration
	for b.Loop() {
		direct += post(up.URL)
		filtered += post(f.URL())
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(us(direct), "direct-µs/push")
	b.ReportMetric(us(filtered), "filtered-µs/push")
	b.ReportMetric(us(filtered-direct), "extra-µs/push")
}
